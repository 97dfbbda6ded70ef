"""Name -> object tables with one forgiving lookup.

Names are matched ignoring case, ``-`` and ``_`` (``GCN-LN`` == ``gcn_ln``); a miss raises
:class:`UnknownNameError` with a one-line message: the closest valid names first ("did you
mean ...?"), then the valid names (cut short when there are many, see
:func:`unknown_name_message`).
"""

from __future__ import annotations

import difflib
from typing import Generic, Iterable, Iterator, Mapping, TypeVar

from grb_dist.errors import UnknownNameError

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
    """Canonical form of a registry name: lower case, ``-`` and spaces become ``_``."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")


class Registry(Generic[T]):
    """An explicit, immutable name -> object table.

    Args:
        kind: what the table holds ("model", "attack", ...), used in error messages.
        entries: the table; keys are normalised with :func:`normalize_name`.
    """

    def __init__(self, kind: str, entries: Mapping[str, T]):
        self.kind = kind
        self._entries = {normalize_name(k): v for k, v in entries.items()}
        self._display = {normalize_name(k): k for k in entries}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_name(name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._display.values())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """The registered spellings, sorted."""
        return sorted(self._display.values())

    def get(self, name: str) -> T:
        key = normalize_name(name)
        try:
            return self._entries[key]
        except KeyError:
            raise UnknownNameError(unknown_name_message(self.kind, name, self.names())) from None

    def canonical(self, name: str) -> str:
        """The registered spelling of ``name`` (raises on unknown names)."""
        self.get(name)
        return self._display[normalize_name(name)]
