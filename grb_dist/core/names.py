"""The names every part of grb_dist shares, and the one rule for names.

- the difficulties, split keys and the clean row's attack name, defined once (the scenarios
  are objects of their own: :mod:`grb_dist.core.scenario`);
- :func:`is_name`: what a name may look like anywhere (datasets, models, attacks, runs):
  letters, digits, ``. _ + -``, never a path;
- :func:`normalize_name`: the canonical spelling registries compare (``GCN-LN`` ==
  ``gcn_ln``), and ``module:Class`` specs (``mypkg.models:MyGCN``), which normalise to the
  dotted name they are registered under (``mypkg.models.mygcn``);
- :func:`unknown_name_message`: one line for an unknown name, with "did you mean".

Nothing here imports anything of grb_dist but its errors.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Iterable

from grb_dist.core.errors import ConfigError, DatasetError

#: The difficulty a poisoning perturbation is keyed under: it is global (it fights every
#: unlabelled node), computed once and scored on every difficulty.
POISONING_DIFFICULTY = "full"
#: The degree-based test sets, easiest first.
DIFFICULTIES = ("easy", "medium", "hard", "full")
#: The keys of a graph's split.
SPLIT_NAMES = ("train", "val", "test_easy", "test_medium", "test_hard", "test_full")
#: Numeric precisions of attack and scoring computations (:mod:`grb_dist.models.precision`).
PRECISIONS = ("fp32", "tf32", "bf16")
#: The attack (and surrogate) name of a clean row: a defense scored on the unperturbed graph.
CLEAN = "none"
#: Who the attacker attacks: ``transfer`` (GRB's protocol: a surrogate the attacker trained
#: itself, black-box) or ``adaptive`` (the defense itself, white-box).
TRANSFER, ADAPTIVE = "transfer", "adaptive"
THREATS = (TRANSFER, ADAPTIVE)

#: A name: letters, digits, ``. _ + -`` (not first), at most 128 characters, never ``..``.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
#: A registered name (``register_model`` ...): lower case, no dots (dotted names belong to
#: ``module:Class`` specs), at most 64 characters.
_PLAIN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def is_name(value: Any) -> bool:
    """Whether ``value`` is a name: letters, digits, ``. _ + -`` (not first), no ``..``,
    at most 128 characters. Names never contain path separators."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) and ".." not in value


def is_plain_name(value: Any) -> bool:
    """Whether ``value`` (normalised) can be registered: a name without dots or ``+``, at
    most 64 characters."""
    return isinstance(value, str) and bool(_PLAIN.fullmatch(value))


def check_precision(precision: str) -> str:
    """Validate ``precision``; raise :class:`ConfigError` naming the valid ones."""
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")
    return precision


def is_registry_key(value: Any) -> bool:
    """Whether ``value`` (normalised) can key a registry: a registered name, or the dotted
    name of a ``module:Class`` spec (``mypkg.models.mygcn``), at most 128 characters."""
    return isinstance(value, str) and len(value) <= 128 and all(is_plain_name(p) for p in value.split("."))


def difficulty_key(difficulty: str) -> str:
    """Split key of a difficulty name (``easy`` -> ``test_easy``)."""
    d = difficulty.lower()
    if d.startswith("test_"):
        d = d[5:]
    if d not in DIFFICULTIES:
        raise DatasetError(unknown_name_message("difficulty", difficulty, DIFFICULTIES))
    return f"test_{d}"


#: At most this many valid names are listed in an error message; longer tables list their
#: closest matches and their simplest names, then how many more there are.
MAX_LISTED = 16
#: Where the full list of each kind of name is shown (the end of a cut-short message).
SEE_ALSO = {
    "dataset": "`grb-dist datasets`",
    "model": "`grb-dist train --help`",
    "defense": "`grb-dist train --help`",
    "attack": "`grb-dist sweep --help`",
}


def close_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The valid names closest to ``name`` (:func:`difflib.get_close_matches` on normalised
    names), best first, in their registered spelling."""
    display = {normalize_name(c): c for c in choices}
    key = normalize_name(name)
    hits = difflib.get_close_matches(key, list(display), n=n, cutoff=0.6)
    # equally close names in alphabetical order (difflib puts ties in reverse order)
    hits.sort(key=lambda h: (-difflib.SequenceMatcher(None, key, h).ratio(), h))
    return [display[h] for h in hits]


def unknown_name_message(kind: str, name: str, choices: Iterable[str], *, see: str | None = None) -> str:
    """One line for an unknown ``name`` of ``kind``: ``unknown model 'gcm'; did you mean
    'gcn'? choose one of: ...``.

    Up to :data:`MAX_LISTED` choices are all listed, sorted. Longer lists name the closest
    matches first, then the simplest names (those with the fewest ``_``/``-`` parts, such as
    the base models of the model table), at most :data:`MAX_LISTED` in all, then
    ``... (N more; see <see>)`` where ``see`` (default: :data:`SEE_ALSO` of ``kind``, else
    ``--help``) is where the full list is.
    """
    names = sorted(set(choices))
    close = close_matches(name, names)
    head = f"unknown {kind} {name!r}"
    if close:
        head += f"; did you mean {' or '.join(repr(c) for c in close)}?"
    if len(names) <= MAX_LISTED:
        return f"{head} choose one of: {', '.join(names)}" if close else f"{head}; choose one of: {', '.join(names)}"
    parts = {c: c.count("_") + c.count("-") for c in names}
    fewest = min(parts.values())
    simple = [c for c in names if parts[c] == fewest and c not in close]
    listed = close + simple[: MAX_LISTED - len(close)]
    where = see or SEE_ALSO.get(kind, "--help")
    sep = " " if close else "; "
    return f"{head}{sep}choose one of: {', '.join(listed)}, ... ({len(names) - len(listed)} more; see {where})"


def normalize_name(name: str) -> str:
    """Canonical form of a registry name: lower case, ``-`` and spaces become ``_``.

    A ``module:Class`` spec becomes its registered name (see the module docstring and
    :func:`spec_name`) and is remembered for :func:`spec_of`.
    """
    if ":" in name:
        return spec_name(name)
    return name.strip().lower().replace("-", "_").replace(" ", "_")


#: ``module:Class``: a dotted module path and a class (or factory) name, identifiers only.
SPEC = re.compile(r"(?P<module>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):(?P<attr>[A-Za-z_][A-Za-z0-9_]*)")
#: The specs seen by :func:`normalize_name` in this process: registered name -> (module, attribute).
_SPECS: dict[str, tuple[str, str]] = {}


def spec_name(spec: str) -> str:
    """The registered name of ``module:Class`` spec ``spec`` (``mypkg.models:MyGCN`` ->
    ``mypkg.models.mygcn``); the spec is remembered so that :func:`spec_of` finds it.

    Raises :class:`ConfigError` on a malformed spec (only identifiers: a spec is never a
    file path, and nothing but importing the named module is ever done with it).
    """
    m = SPEC.fullmatch(spec.strip())
    if m is None:
        raise ConfigError(
            f"{spec!r} is not a module:Class spec: use a dotted module path that is importable and a "
            "class name, e.g. mypkg.models:MyGCN (no file paths)"
        )
    name = f"{m['module']}.{m['attr']}".lower()
    _SPECS[name] = (m["module"], m["attr"])
    return name


def spec_of(name: str) -> tuple[str, str] | None:
    """``(module, attribute)`` of the spec whose registered name is ``name``, when
    :func:`normalize_name` has seen one in this process."""
    return _SPECS.get(name)


def alias_spec(name: str, module: str, attr: str) -> None:
    """Remember ``module:attr`` under registered name ``name`` (a spec with a defense suffix,
    ``mypkg:MyGCN_ln``, names the architecture ``mypkg:MyGCN`` under ``mypkg.mygcn``)."""
    _SPECS[name] = (module, attr)
