"""Foundation benchmarks: CSBM generation and one GCN training epoch at a dataset's shape.

Usage:
    python bench/training/foundation.py [--dataset csbm-grb-aminer] [--epochs 3]

Each case runs in a fresh subprocess; time is wall-clock (time.perf_counter) inside it,
peak memory is that process's maximum resident set size (getrusage ru_maxrss), which
includes the Python interpreter and torch (about 0.3 GB on its own).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, peak_rss_gib, run_child, timed  # noqa: E402


def generate(dataset: str) -> dict:
    """Sample the catalogue's CSBM of ``dataset`` once."""
    from grb_dist.datasets.catalog import CATALOG
    from grb_dist.datasets.csbm import sample_csbm

    info = CATALOG.get(dataset)
    dt, (g, _) = timed(sample_csbm, info.csbm, seed=0, name=info.name)
    return {"seconds": dt, "nodes": g.num_nodes, "edges": g.num_edges, "peak_gb": peak_rss_gib()}


def gcn_epoch(dataset: str, epochs: int) -> dict:
    """Train a GCN [128, 128, 128] for ``epochs`` steps on the inductive training subgraph, then
    one inference on the whole graph."""
    import torch

    from grb_dist.datasets import load_dataset
    from grb_dist.models import build_model
    from grb_dist.models.tensors import graph_tensors
    from grb_dist.models.views import induced

    g = load_dataset(dataset)
    torch.manual_seed(0)
    model = build_model("gcn", g.num_features, g.num_classes, {"hidden_sizes": [128, 128, 128]})
    view = induced(g, g.split["train"], g.split["train"], "cpu")
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step() -> None:
        model.train()
        opt.zero_grad()
        out = model(view.x, view.edge_index)
        torch.nn.functional.cross_entropy(out[view.mask_idx], view.y[view.mask_idx]).backward()
        opt.step()

    def inference() -> None:
        model.eval()
        with torch.no_grad():
            full = graph_tensors(g)
            model(full.x, full.edge_index)

    times = [timed(step)[0] for _ in range(epochs)]
    return {"epoch_seconds_median": sorted(times)[len(times) // 2], "epochs": len(times),
            "train_nodes": int(view.x.shape[0]), "full_graph_inference_seconds": timed(inference)[0],
            "peak_gb": peak_rss_gib()}


CASES = {"generate": generate, "gcn_epoch": gcn_epoch}


def run(case: str, **kw) -> dict:
    """``case`` in a fresh process (its peak memory its own)."""
    args = [__file__, "--case", case] + [f"--{k}={v}" for k, v in kw.items()]
    return run_child(args, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # internal: one case in this process
    args = ap.parse_args()
    if args.case:
        emit(generate(args.dataset) if args.case == "generate" else gcn_epoch(args.dataset, args.epochs))
        return
    print(f"# command: python bench/training/foundation.py --dataset {args.dataset} --epochs {args.epochs}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, torch CPU, each case in its own process")
    gen = run("generate", dataset=args.dataset)
    print(f"CSBM generation ({args.dataset}: {gen['nodes']:,} nodes, {gen['edges']:,} edges): "
          f"{gen['seconds']:.1f} s, peak RSS {gen['peak_gb']:.2f} GB")
    ep = run("gcn_epoch", dataset=args.dataset, epochs=args.epochs)
    print(f"GCN [128,128,128] training epoch on the inductive training subgraph ({ep['train_nodes']:,} nodes): "
          f"{ep['epoch_seconds_median']:.2f} s (median of {ep['epochs']}); full-graph inference "
          f"{ep['full_graph_inference_seconds']:.2f} s; peak RSS {ep['peak_gb']:.2f} GB (includes loading the dataset)")


if __name__ == "__main__":
    main()
