"""Name -> object tables with one forgiving lookup.

Names are matched ignoring case, ``-`` and ``_`` (``GCN-LN`` == ``gcn_ln``); a miss raises
:class:`UnknownNameError` listing the valid names.
"""

from __future__ import annotations

from typing import Generic, Iterator, Mapping, TypeVar

from grb_dist.errors import UnknownNameError

T = TypeVar("T")


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
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}"
            ) from None

    def canonical(self, name: str) -> str:
        """The registered spelling of ``name`` (raises on unknown names)."""
        self.get(name)
        return self._display[normalize_name(name)]
