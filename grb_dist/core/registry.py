"""Name -> entry tables: the one registry type of grb_dist.

Each package owns its table, built from this type (the models and defenses of
:mod:`grb_dist.models.registry`, the attacks of each scenario in
:mod:`grb_dist.attacks.registry`); ``register_*`` functions add to them. A table never
imports anything of grb_dist: what it knows of its entries comes from the hooks its owner
gives it.

- **Lookup.** Names are matched ignoring case, ``-`` and ``_`` (``GCN-LN`` == ``gcn_ln``); a
  miss raises :class:`UnknownNameError` with one line: the closest valid names first ("did
  you mean ...?"), then the valid names (cut short when there are many).
- **Adding.** :meth:`Registry.add` takes a plain name (never a path) and an entry; a taken
  name needs ``replace=True``. :meth:`Registry.admit` turns an object (a class, a factory)
  into an entry with the owner's ``admit`` hook, which checks its base class.
- **Resolution on a miss.** A name the table does not hold may be provided by an installed
  package's entry point (the table's ``groups``), or by a ``module:Class`` spec
  (``mypkg.models:MyGCN``, normalised to ``mypkg.models.mygcn``, see
  :func:`~grb_dist.core.names.normalize_name`). The module is imported and the attribute
  must be a **class** the owner's hook admits (a subclass of the table's base): a spec can
  never name a function such as ``os:system`` or ``builtins:print``. Importing a module runs
  its code, so name only modules you trust, as with any Python import.
- **Snapshot and restore.** :func:`snapshot` collects what was added to every table of this
  process (user registrations, resolved specs and entry points); :func:`restore` adds it
  back in another process (a Ray worker), also to tables created later.
"""

from __future__ import annotations

import inspect
from importlib import import_module, metadata
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, TypeVar

from grb_dist.core.errors import ConfigError, UnknownNameError
from grb_dist.core.names import is_plain_name, is_registry_key, normalize_name, spec_of, unknown_name_message

T = TypeVar("T")


#: ``admit(name, obj, where) -> entry``: an owner's check of an object found for a name.
Admit = Callable[[str, Any, str], Any]


class Registry(Generic[T]):
    """A name -> entry table: the built-in entries it is created with, and those added.

    Args:
        kind: what the table holds ("model", "attack", ...), used in error messages; also
            the key of the table in :func:`snapshot`.
        entries: the built-in table; keys are normalised with :func:`normalize_name`.
        admit: the owner's hook that turns an object found for a name (a spec, an entry
            point, a ``register_*`` call) into an entry, or raises :class:`ConfigError`.
        groups: entry-point groups asked on a miss (installed packages).
        choices: names listed in unknown-name messages instead of the table's keys (a table
            of base names lists the names its owner derives from them).
    """

    def __init__(self, kind: str, entries: Mapping[str, T], *, admit: Admit | None = None,
                 groups: Iterable[str] = (), choices: Callable[[Iterable[str]], Iterable[str]] | None = None):
        self.kind = kind
        self._entries = {normalize_name(k): v for k, v in entries.items()}
        self._display = {normalize_name(k): k for k in entries}  # the built-ins' own spelling
        self._builtin = frozenset(self._entries)
        self._admit = admit
        self._groups = tuple(groups)
        self._choices_of = choices
        self._resolving: set[str] = set()
        _TABLES[kind] = self
        pending = _PENDING.pop(kind, None)
        if pending:
            self.restore(pending)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(normalize_name(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """The registered names (a built-in in its own spelling, ``grb-aminer``), sorted."""
        return sorted(self._display.get(k, k) for k in self._entries)

    def get(self, name: str) -> T:
        """The entry of ``name`` (asking the resolver on a miss); raises
        :class:`UnknownNameError` with the closest valid names."""
        key = normalize_name(name)
        if self._lookup(key):
            return self._entries[key]
        raise UnknownNameError(unknown_name_message(self.kind, name, self.choices()))

    def canonical(self, name: str) -> str:
        """The registered spelling of ``name`` (raises on unknown names)."""
        self.get(name)
        key = normalize_name(name)
        return self._display.get(key, key)

    def find(self, name: str) -> T | None:
        """The entry of ``name`` when it is registered, else ``None`` (nothing resolved)."""
        return self._entries.get(normalize_name(name))

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is one of the entries the table was created with."""
        return normalize_name(name) in self._builtin

    def choices(self) -> list[str]:
        """The names an unknown-name message lists (with what entry points could provide)."""
        names = set(self.names()) | set(self.available())
        return sorted(self._choices_of(names) if self._choices_of else names)

    # ------------------------------------------------------------------ adding

    def add(self, name: str, value: T, *, replace: bool = False) -> str:
        """Register entry ``value`` under ``name``; return the normalised name.

        ``name`` must be a plain name (letters, digits, ``_``, ``-``, ``.``; never a path).
        A taken name (a built-in, or an earlier registration of another entry) raises
        :class:`ConfigError` unless ``replace``; the same entry again is a no-op.
        """
        if not isinstance(name, str):
            raise ConfigError(f"a {self.kind} name must be a string, got {type(name).__name__}")
        key = normalize_name(name)
        if not is_registry_key(key):
            raise ConfigError(
                f"{self.kind} name {name!r} is not a plain name: use letters, digits, '_' and '-' "
                "(no path separators, no spaces)"
            )
        if key in self._entries and self._entries[key] != value:
            if key in self._builtin and not replace:
                raise ConfigError(f"{self.kind} name {key!r} is a built-in; choose another name (or pass "
                                  "replace=True to replace the built-in)")
            if not replace:
                raise ConfigError(f"{self.kind} name {key!r} is already registered; choose another name or pass "
                                  "replace=True")
        self._entries[key] = value
        return key

    def admit(self, name: str, obj: Any, where: str) -> T:
        """The entry the owner's hook makes of ``obj`` (checked), found for ``name``."""
        if self._admit is None:
            raise ConfigError(f"{where}: the {self.kind} table takes no additions")
        return self._admit(name, obj, where)

    def remove(self, name: str) -> None:
        """Forget an added entry (built-ins cannot be removed)."""
        key = normalize_name(name)
        if key in self._builtin:
            raise ConfigError(f"{self.kind} {key!r} is a built-in and cannot be removed")
        self._entries.pop(key, None)

    def added(self) -> dict[str, T]:
        """The entries added in this process (not the built-ins)."""
        return {k: v for k, v in self._entries.items() if k not in self._builtin}

    def restore(self, entries: Mapping[str, T]) -> None:
        """Add ``entries`` (from :meth:`added` in another process), replacing what is there."""
        for key, value in entries.items():
            if key not in self._builtin:
                self._entries[key] = value

    # ------------------------------------------------------------------ resolution

    def available(self) -> list[str]:
        """Names that entry points could provide (nothing is loaded)."""
        return [n for g in self._groups for n in (normalize_name(ep.name) for ep in entry_points(g)) if is_plain_name(n)]

    def _lookup(self, key: str) -> bool:
        if key in self._entries:
            return True
        if self._admit is None or key in self._resolving:
            return False
        self._resolving.add(key)
        try:
            found = self._resolve(key)
        finally:
            self._resolving.discard(key)
        if found is not None:
            self._entries[key] = found
        return key in self._entries

    def _resolve(self, key: str) -> T | None:
        spec = spec_of(key)
        if spec is not None:
            return self.admit(key, import_class(*spec), f"spec '{spec[0]}:{spec[1]}'")
        if not is_plain_name(key):
            return None
        for group in self._groups:
            for ep in entry_points(group):
                if normalize_name(ep.name) != key:
                    continue
                where = f"entry point {ep.name} = {ep.value} ({group})"
                try:
                    obj = ep.load()
                except Exception as exc:  # noqa: BLE001 - any import error of the plugin, in one line
                    raise ConfigError(f"cannot load entry point {ep.name!r} ({ep.value}) of group {group}: "
                                      f"{type(exc).__name__}: {first_line(exc)}") from None
                return self.admit(key, obj, where)
        return None


def plain_name(name: Any, what: str) -> str:
    """``name`` normalised, when it can be registered (:func:`is_plain_name`); else
    :class:`ConfigError`."""
    if not isinstance(name, str):
        raise ConfigError(f"a {what} name must be a string, got {type(name).__name__}")
    key = name.lower()
    if not is_plain_name(key):
        raise ConfigError(
            f"{what} name {name!r} is not a plain name: use letters, digits, '_' and '-' (at most 64; no dots, "
            "no spaces, no path separators; dotted names belong to module:Class specs)"
        )
    return normalize_name(key)


def import_class(module_name: str, attr: str) -> type:
    """The class ``attr`` of module ``module_name`` (imported); anything that is not a
    class is refused, so a spec can never name a function to call."""
    spec = f"{module_name}:{attr}"
    try:
        module = import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a missing module or a failing import, in one line
        raise ConfigError(f"cannot import {module_name!r} of spec {spec!r}: {type(exc).__name__}: {first_line(exc)} "
                          "(the module must be importable: installed, or on PYTHONPATH)") from None
    if not hasattr(module, attr):
        raise ConfigError(f"spec {spec!r}: module {module_name!r} has no attribute {attr!r}")
    obj = getattr(module, attr)
    if not inspect.isclass(obj):
        what = "a function" if callable(obj) else f"a value of type {type(obj).__name__}"
        raise ConfigError(f"spec {spec!r} names {what}, not a class: a spec names a class (a model, defense or "
                          "attack) and is never called; register factories in your own code with register_defense")
    return obj


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group`` (reads package metadata; imports nothing)."""
    try:
        return list(metadata.entry_points(group=group))
    except Exception:  # noqa: BLE001 - broken metadata of another package must not break lookups
        return []


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def describe(obj: Any) -> str:
    """``class mod.Name`` of a class, else the object's repr (for error messages)."""
    if inspect.isclass(obj):
        return f"class {obj.__module__}.{obj.__qualname__}"
    return repr(obj)


# ---------------------------------------------------------------------- snapshot / restore

#: Every table of this process by kind (tables register themselves when created).
_TABLES: dict[str, Registry] = {}
#: Restored entries of tables not created yet in this process (added when they are).
_PENDING: dict[str, dict[str, Any]] = {}


def snapshot() -> dict[str, dict[str, Any]]:
    """What was added to every table of this process: ``{kind: {name: entry}}`` (what the
    sweep ships to its Ray workers, once per run)."""
    return {kind: added for kind, table in _TABLES.items() if (added := table.added())}


def restore(snap: Mapping[str, Mapping[str, Any]]) -> None:
    """Add a :func:`snapshot` of another process to this one's tables; tables that do not
    exist yet get it when they are created."""
    for kind, entries in snap.items():
        table = _TABLES.get(kind)
        if table is None:
            _PENDING.setdefault(kind, {}).update(entries)
        else:
            table.restore(entries)


__all__ = ["Registry", "describe", "entry_points", "first_line", "import_class", "plain_name", "restore", "snapshot"]
