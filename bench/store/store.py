"""Score store benchmark: writing and reading 10k, 100k and 1M score rows, before and after.

Run from the repository root::

    python bench/store/store.py                      # 10k, 100k, 1M rows (after); before at 10k
    python bench/store/store.py --rows 10000 --before-rows 10000,100000   # time the old layout at 100k too

Method (a temporary directory on the same disk as the repository; every figure is the
wall time of one run, on whatever else the machine was doing):

* rows: score rows with the real schema, 12 defenses per perturbation, spread over the 4
  difficulties (so 4 partitions), random accuracies; generating the row dicts is included
  in the write time (it is what the driver does).
* before: the grb-dist 0.1.0 layout, one Parquet file per row written by temp file + fsync
  + rename (``scores/<cell_id>.parquet``), read back file by file and concatenated. Timed
  at ``--before-rows`` (10k by default); larger sizes are extrapolated linearly from the
  largest timed size and marked ``(extrapolated)``.
* after: :class:`grb_dist.store.ScoreWriter` with the sweep's defaults (a file every 4096
  rows or 10 s, one file per partition per batch), rows added 12 at a time (one scoring
  result); reads: grb-dist's own reader (``RunStore.read_scores``: file by file, torn or
  foreign files skipped, each cell once), ``RunStore.done_cells`` (the resume check, cell_id
  column only), ``pandas.read_parquet(RUN/scores)``, ``pyarrow.dataset`` and DuckDB
  (``read_parquet('RUN/scores/**/*.parquet', hive_partitioning = true)``, a group-by),
  then ``grb-dist compact`` (RunStore.compact) and the reads again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import timed  # noqa: E402

DIFFS = ("easy", "medium", "hard", "full")
DEFENSES = 12


def rows(n: int, seed: int = 0):
    """``n`` score rows, in chunks of one perturbation (12 defenses)."""
    rng = np.random.default_rng(seed)
    acc = rng.random(n)
    now = dt.datetime.now(dt.timezone.utc)
    base = {
        "config_hash": "0123456789abcdef", "dataset": "csbm", "dataset_fingerprint": "f" * 64,
        "scenario": "injection", "attack": "fgsm", "surrogate": "gcn", "seed": 1000, "defense_seed": 0,
        "n_targets": 200, "n_injected": 20, "n_injected_edges": 200, "n_edges_added": 200, "n_edges_removed": 0, "n_nodes_modified": 0, "attack_seconds": 1.5, "score_seconds": 0.01,
        "defense_train_seconds": 3.0, "version": "0.1.0", "created_at": now,
    }
    chunk = []
    for i in range(n):
        p = i // DEFENSES
        chunk.append({**base, "cell_id": f"{i:016x}", "perturbation_id": f"p{p:015x}", "difficulty": DIFFS[p % 4],
                      "defense": f"d{i % DEFENSES}", "repeat": p // 4, "accuracy": float(acc[i])})
        if len(chunk) == DEFENSES:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def du(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


# ------------------------------------------------------------------ before: grb-dist 0.1.0


def legacy_schema() -> pa.Schema:
    """The 0.1.0 columns: today's, less the fingerprint and the columns added since."""
    from grb_dist.store import schema

    later = {"dataset_fingerprint", *schema.ADDED_DEFAULTS}
    return pa.schema([f for f in schema.SCORES if f.name not in later])


def legacy_write(root: Path, n: int) -> None:
    sch = legacy_schema()
    d = root / "scores"
    d.mkdir(parents=True)
    for chunk in rows(n):
        for r in chunk:
            path = d / f"{r['cell_id']}.parquet"
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            pq.write_table(pa.Table.from_pylist([{k: r[k] for k in sch.names}], schema=sch), tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)


def legacy_read(root: Path) -> int:
    sch = legacy_schema()
    files = sorted(p for p in (root / "scores").glob("*.parquet") if not p.name.startswith("."))
    t = pa.concat_tables([pq.read_table(f, schema=sch) for f in files]).to_pandas()
    return len(t)


# ------------------------------------------------------------------ after


def new_store(root: Path):
    from grb_dist.store import RunLock, RunStore

    lock = RunLock(root).acquire()
    ds = {"label": "csbm", "source": "csbm", "fingerprint": "f" * 64, "parts": {}, "normalize": "arctan"}
    return RunStore.open(root, dataset=ds, components={}, config={}, config_hash="h", lock=lock), lock


def fmt_bytes(b: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1024 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return str(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="10000,100000,1000000", help="row counts (comma-separated)")
    ap.add_argument("--before-rows", default="10000", help="row counts at which the old layout is timed")
    ap.add_argument("--dir", default=None, help="parent of the temporary run directories (default: the system's)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.rows.split(",")]
    before_sizes = [int(x) for x in args.before_rows.split(",")]
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(__doc__.split("Method")[1].split("\n", 1)[1].rstrip(), "\n")

    try:
        import duckdb
    except ImportError:  # optional: pip install -e .[bench]
        duckdb = None
    table = []
    before = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        tmp = Path(tmp)
        for n in sorted(set(before_sizes)):
            root = tmp / f"before-{n}"
            w, _ = timed(lambda: legacy_write(root, n))
            r, got = timed(lambda: legacy_read(root))
            assert got == n
            files, size = du(root / "scores")
            before[n] = (w, r, files, size)
            shutil.rmtree(root)
        timed_max = max(before)
        for n in sizes:
            if n in before:
                w, r, files, size = before[n]
                note = ""
            else:
                k = n / timed_max
                w, r, files, size = (x * k for x in before[timed_max])
                note = " (extrapolated)"
            table.append((f"{n:,}", "before", "write (1 file/row, fsync each)", f"{w:.1f} s{note}",
                          f"{files:,.0f}", fmt_bytes(size)))
            table.append((f"{n:,}", "before", "read (file by file)", f"{r:.2f} s{note}", "", ""))

            root = tmp / f"after-{n}"
            store, lock = new_store(root)

            def write():
                writer = store.score_writer()
                for chunk in rows(n):
                    writer.add(chunk)
                writer.flush()
                return writer

            w, writer = timed(write)
            files, size = du(root / "scores")
            table.append((f"{n:,}", "after", "write (ScoreWriter, 4096 rows/batch)", f"{w:.2f} s", f"{files:,}",
                          fmt_bytes(size)))
            reads = [
                ("read: RunStore.read_scores", lambda: len(store.read_scores())),
                ("read: RunStore.done_cells (resume)", lambda: len(store.done_cells())),
                ("read: pandas.read_parquet(scores)", lambda: len(__import__("pandas").read_parquet(root / "scores"))),
                ("read: pyarrow.dataset", lambda: __import__("pyarrow.dataset").dataset.dataset(
                    root / "scores", format="parquet", partitioning="hive").to_table().num_rows),
            ]
            if duckdb is not None:
                q = (f"SELECT difficulty, defense, avg(accuracy) FROM read_parquet('{root}/scores/**/*.parquet', "
                     "hive_partitioning = true) GROUP BY ALL")
                reads.append(("read: DuckDB group-by", lambda: len(duckdb.sql(q).fetchall())))
            for label, fn in reads:
                r, got = timed(fn)
                assert got == n or label.startswith("read: DuckDB"), (label, got)
                table.append((f"{n:,}", "after", label, f"{r:.2f} s", "", ""))
            c, stats = timed(lambda: store.compact())
            files, size = du(root / "scores")
            table.append((f"{n:,}", "after", "grb-dist compact", f"{c:.2f} s", f"{files:,}", fmt_bytes(size)))
            r, got = timed(lambda: len(store.read_scores()))
            assert got == n
            table.append((f"{n:,}", "after", "read after compact: RunStore.read_scores", f"{r:.2f} s", "", ""))
            lock.release()
            shutil.rmtree(root)
            print(f"done {n:,} rows", file=sys.stderr, flush=True)
    print("| rows | layout | operation | time | files | bytes |")
    print("|---:|---|---|---:|---:|---:|")
    for row in table:
        print("| " + " | ".join(row) + " |")
    if duckdb is None:
        print("\n(DuckDB not installed: pip install -e '.[bench]' for its row)")


if __name__ == "__main__":
    main()
