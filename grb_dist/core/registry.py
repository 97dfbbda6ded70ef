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

import re
from typing import Callable, Generic, Iterable, Iterator, Mapping, TypeVar

from grb_dist.core.errors import ConfigError, UnknownNameError
from grb_dist.core.names import close_matches, normalize_name, spec_name, spec_of, unknown_name_message

T = TypeVar("T")

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
