"""The ``grb-dist`` command line: argument parsing and dispatch only, one thin module per
command group.

* :mod:`.base`: the app, global options (``-v``, ``--version``), consoles, error handling
* :mod:`.data`: ``datasets``
* :mod:`.train`: ``train``
* :mod:`.sweep`: ``sweep``
* :mod:`.plan`: ``plan`` (also ``sweep --plan``); :mod:`.options`: the job options both take
* :mod:`.results`: ``leaderboard``, ``report``, ``compact`` (read a run; no torch, no Ray)
* :mod:`.study`: ``study``, ``study-tune``, ``study-plot``

A command module imports what does the work (torch, the sweep, Ray) inside its command, so
that ``--help`` and the read-only commands load none of it. Errors of grb_dist (bad input)
are printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

from grb_dist.cli.base import app
# each module registers its commands on ``app``; the order is that of ``grb-dist --help``
from grb_dist.cli import data, train, sweep, plan, results, study  # noqa: E402,F401,I001


def main() -> None:
    app()


__all__ = ["app", "main"]
