"""Reading a job file: a regular file of bounded size, safe YAML without a key given twice,
bounded once YAML aliases are expanded, and ``module:Class`` specs only with the user's
consent. Every defect is one :class:`~grb_dist.core.errors.ConfigError` line.

==========================  ===================  =============================================
value                       bound                why
==========================  ===================  =============================================
job file                    1 MiB, 1 MiB JSON    YAML aliases can expand a small file
==========================  ===================  =============================================
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from grb_dist.core.errors import ConfigError
from grb_dist.core.names import SPEC
from grb_dist.core.paths import special_file_kind

#: Largest job file read, in bytes.
MAX_JOB_BYTES = 1 << 20
#: Largest job after YAML alias expansion, in characters of its JSON form.
MAX_JOB_SIZE = 1 << 20


def read_job_text(path: Path) -> str:
    """The text of a job file, at most :data:`MAX_JOB_BYTES`; a FIFO or a device is refused
    before it is opened (reading one could block forever or never end)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(f"cannot read job file {path}: {exc.strerror or exc}") from None
    kind = special_file_kind(mode)
    if kind:
        raise ConfigError(f"job file {path} is {kind}, not a regular file; give a YAML file")
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_JOB_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read job file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_JOB_BYTES:
        raise ConfigError(f"job file {path} is larger than {MAX_JOB_BYTES // 1024} KiB; a job is a short YAML document")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"job file {path} is not UTF-8 text") from None


class _StrictLoader(yaml.SafeLoader):
    """``yaml.safe_load`` that refuses a key given twice in one mapping (YAML would keep the
    last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise ConfigError(f"key {key!r} is given twice in one mapping (line {key_node.start_mark.line + 1}); "
                                  "keep one")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_job_document(path: Path, *, allow_import: bool = False) -> Any:
    """The YAML document of job file ``path``: a regular file of at most
    :data:`MAX_JOB_BYTES`, safely loaded (no Python objects), no key twice in a mapping, at
    most :data:`MAX_JOB_SIZE` once aliases are expanded, and no ``module:Class`` spec unless
    ``allow_import`` (:func:`refuse_specs`). Every defect is one :class:`ConfigError` line."""
    text = read_job_text(path)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as exc:
        raise ConfigError(f"job file {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"job file {path} is not valid YAML{at}") from None
    except RecursionError:
        raise ConfigError(f"job file {path} is nested too deeply") from None
    document_size(data)
    if not allow_import:
        refuse_specs(data, f"job file {path}")
    return data


def named_specs(obj: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """``(key path, spec)`` of every ``module:Class`` spec in a parsed job document: a string
    value or mapping key that is one (``defenses: [mypkg.models:MyGCN]``)."""
    stack = [(where, obj)]
    while stack:
        at, o = stack.pop()
        if isinstance(o, Mapping):
            for k, v in o.items():
                key = f"{at}.{k}" if at else str(k)
                if isinstance(k, str) and SPEC.fullmatch(k.strip()):
                    yield key, k
                stack.append((key, v))
        elif isinstance(o, (list, tuple)):
            stack.extend((f"{at}[{i}]", v) for i, v in enumerate(o))
        elif isinstance(o, str) and SPEC.fullmatch(o.strip()):
            yield at, o


def refuse_specs(document: Any, where: str) -> None:
    """A job file may name ``module:Class`` specs only with the user's consent
    (``--allow-import``): importing the module runs its code, and a job file may come from
    anyone. Names typed on the command line and installed entry points need no consent."""
    for at, spec in named_specs(document):
        raise ConfigError(
            f"{where} names {spec!r} at {at}: importing a module runs its code, so specs in job files need "
            "--allow-import (pass it if you trust the module; or install it as a package with an entry point)"
        )


def document_size(obj: Any, limit: int = MAX_JOB_SIZE) -> int:
    """Approximate length of the JSON form of ``obj`` with every shared (aliased) part counted
    each time it appears; stops and raises :class:`ConfigError` as soon as it passes ``limit``
    (so it takes time proportional to ``limit`` at most, also for recursive documents)."""
    total = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, Mapping):
            total += 2 + 2 * len(o)
            if total <= limit:
                stack.extend(o.keys())
                stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            total += 2 + len(o)
            if total <= limit:
                stack.extend(o)
        elif isinstance(o, str):
            total += len(o) + 2
        elif isinstance(o, bool) or o is None:
            total += 5
        elif isinstance(o, int):
            total += 1 + o.bit_length() * 3 // 10
        else:
            total += 24
        if total > limit:
            raise ConfigError(
                f"the job expands to more than {limit // 1024} KiB (YAML aliases repeat their anchor's "
                "content); write the job out without nested aliases"
            )
    return total


__all__ = ["MAX_JOB_BYTES", "MAX_JOB_SIZE", "document_size", "load_job_document", "named_specs", "read_job_text", "refuse_specs"]
