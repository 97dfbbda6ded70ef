"""Name -> object tables with one forgiving lookup.

Names are matched ignoring case, ``-`` and ``_`` (``GCN-LN`` == ``gcn_ln``); a miss raises
:class:`UnknownNameError` with a one-line message: the closest valid names first ("did you
mean ...?"), then the valid names (cut short when there are many, see
:func:`unknown_name_message`).

Tables hold the built-in entries they are created with; :meth:`Registry.add` registers more
(user models, defenses and attacks, see :mod:`grb_dist.extensions`), and a table may be
given a *resolver* that is asked, on a miss, whether it can provide the name (entry points
of installed packages, ``module:Class`` specs); a table without one never imports anything.

A ``module:Class`` spec (``mypkg.models:MyGCN``) normalises to the name it is registered
under, ``<module>.<class>`` in lower case (``mypkg.models.mygcn``): names of specs contain a
dot, plain registered names never do, so the two cannot clash. :func:`normalize_name`
remembers the spec (nothing is imported), and the resolver of the table that is asked for
the name imports the module (:func:`spec_of`).
"""

from __future__ import annotations

import difflib
import re
from typing import Callable, Generic, Iterable, Iterator, Mapping, TypeVar

from grb_dist.errors import ConfigError, UnknownNameError

T = TypeVar("T")

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


def is_spec(value: object) -> bool:
    """Whether ``value`` is a well-formed ``module:Class`` spec."""
    return isinstance(value, str) and SPEC.fullmatch(value.strip()) is not None


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


#: Names that :meth:`Registry.add` accepts: letters, digits, ``_``, ``-`` and ``.`` (not
#: first), no ``..``, at most 128 characters; never a path.
_ADD_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")


class Registry(Generic[T]):
    """A name -> object table: the built-in entries it is created with, and those added
    with :meth:`add`.

    Args:
        kind: what the table holds ("model", "attack", ...), used in error messages.
        entries: the built-in table; keys are normalised with :func:`normalize_name`.
    """

    def __init__(self, kind: str, entries: Mapping[str, T]):
        self.kind = kind
        self._entries = {normalize_name(k): v for k, v in entries.items()}
        self._display = {normalize_name(k): k for k in entries}
        self._builtin = frozenset(self._entries)
        self._resolver: Callable[[str], bool] | None = None
        self._available: Callable[[], Iterable[str]] | None = None
        self._resolving: set[str] = set()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(normalize_name(name))

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._display.values()))

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """The registered spellings, sorted."""
        return sorted(self._display.values())

    def get(self, name: str) -> T:
        key = normalize_name(name)
        if self._lookup(key):
            return self._entries[key]
        raise UnknownNameError(unknown_name_message(self.kind, name, self._choices()))

    def canonical(self, name: str) -> str:
        """The registered spelling of ``name`` (raises on unknown names)."""
        self.get(name)
        return self._display[normalize_name(name)]

    # ------------------------------------------------------------ extension

    def find(self, name: str) -> T | None:
        """The entry of ``name`` when it is registered, else ``None`` (no resolver asked)."""
        return self._entries.get(normalize_name(name))

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is one of the entries the table was created with."""
        return normalize_name(name) in self._builtin

    def add(self, name: str, value: T, *, replace: bool = False) -> str:
        """Register ``value`` under ``name``; return the normalised name.

        ``name`` must be a plain name (letters, digits, ``_``, ``-``, ``.``; never a path).
        A name that is taken (a built-in or an earlier registration of another object)
        raises :class:`ConfigError` unless ``replace``; registering the same object again
        under the same name is a no-op.
        """
        if not isinstance(name, str):
            raise ConfigError(f"a {self.kind} name must be a string, got {type(name).__name__}")
        key = normalize_name(name)
        if not _ADD_NAME.fullmatch(key) or ".." in key:
            raise ConfigError(
                f"{self.kind} name {name!r} is not a plain name: use letters, digits, '_' and '-' "
                "(no path separators, no spaces)"
            )
        if key in self._entries and not replace and self._entries[key] is not value:
            what = "a built-in" if key in self._builtin else "already registered"
            raise ConfigError(f"{self.kind} name {key!r} is {what}; choose another name or pass replace=True")
        self._entries[key] = value
        self._display[key] = key
        return key

    def remove(self, name: str) -> None:
        """Forget an added entry (built-ins cannot be removed)."""
        key = normalize_name(name)
        if key in self._builtin:
            raise ConfigError(f"{self.kind} {key!r} is a built-in and cannot be removed")
        self._entries.pop(key, None)
        self._display.pop(key, None)

    def set_resolver(self, resolve: Callable[[str], bool] | None,
                     available: Callable[[], Iterable[str]] | None = None) -> None:
        """Ask ``resolve(normalised name)`` on a miss; it registers the name with :meth:`add`
        when it can provide it (and returns whether it did). ``available()`` names what it
        could provide without importing anything (listed in unknown-name messages)."""
        self._resolver, self._available = resolve, available

    def _lookup(self, key: str) -> bool:
        if key in self._entries:
            return True
        if self._resolver is None or key in self._resolving:
            return False
        self._resolving.add(key)
        try:
            self._resolver(key)
        finally:
            self._resolving.discard(key)
        return key in self._entries

    def _choices(self) -> list[str]:
        names = set(self._display.values())
        if self._available is not None:
            names.update(normalize_name(n) for n in self._available())
        return sorted(names)
