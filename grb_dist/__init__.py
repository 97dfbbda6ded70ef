"""grb-dist: the Graph Robustness Benchmark as a Ray-distributed sweeper.

Bring your own defense, model or attack (``docs/extending.md``): :func:`benchmark`,
:func:`register_defense`, :func:`register_model`, :func:`register_attack`. They are loaded
on first use, so ``import grb_dist`` stays light (no torch).
"""

from typing import Any

from grb_dist.core.version import __version__

#: Names re-exported from :mod:`grb_dist.api`, imported when first used.
_API = ("benchmark", "register_attack", "register_defense", "register_model")


def __getattr__(name: str) -> Any:
    if name in _API:
        from grb_dist import api

        return getattr(api, name)
    raise AttributeError(f"module 'grb_dist' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


__all__ = ["__version__", *_API]
