"""``grb-dist datasets``: the dataset catalogue (no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.table import Table

import grb_dist.cli.base as base
from grb_dist.cli.base import DataDir, app, handle_errors


@app.command()
@handle_errors
def datasets(data_dir: Optional[Path] = DataDir) -> None:
    """List the dataset catalogue and whether each dataset is available locally."""
    from grb_dist.datasets import CATALOG, is_available

    table = Table(title="grb-dist datasets")
    for col in ("name", "nodes", "edges", "features", "classes", "source", "local"):
        table.add_column(col, justify="right" if col in ("nodes", "edges", "features", "classes") else "left", no_wrap=True)
    for name in CATALOG:
        info = CATALOG.get(name)
        local = "generated" if info.source == "csbm" else ("yes" if is_available(info, data_dir) else "no")
        table.add_row(info.name, f"{info.nodes:,}", f"{info.edges:,}", str(info.features), str(info.classes), info.source, local)
    base.console.print(table)
