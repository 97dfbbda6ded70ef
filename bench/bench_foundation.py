"""Foundation benchmarks: CSBM generation and one GCN training epoch at a dataset's shape.

Usage:
    python bench/bench_foundation.py [--dataset csbm-grb-aminer] [--epochs 3]

Each case runs in a fresh subprocess; time is wall-clock (time.perf_counter) inside it,
peak memory is that process's maximum resident set size (getrusage ru_maxrss), which
includes the Python interpreter and torch (about 0.3 GB on its own).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CASES = {
    "generate": """
import json, resource, time
from grb_dist.datasets.catalog import CATALOG
from grb_dist.datasets.csbm import sample_csbm
info = CATALOG.get({dataset!r})
t = time.perf_counter()
g, _ = sample_csbm(info.csbm, seed=0, name=info.name)
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "nodes": g.num_nodes, "edges": g.num_edges,
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}}))
""",
    "gcn_epoch": """
import json, resource, time
import torch
from grb_dist.datasets import load_dataset
from grb_dist.models import build_model
from grb_dist.models.views import induced
from grb_dist.models.tensors import graph_tensors
g = load_dataset({dataset!r})
torch.manual_seed(0)
model = build_model("gcn", g.num_features, g.num_classes, {{"hidden_sizes": [128, 128, 128]}})
view = induced(g, g.split["train"], g.split["train"], "cpu")
opt = torch.optim.Adam(model.parameters(), lr=0.01)
times = []
for _ in range({epochs}):
    t = time.perf_counter()
    model.train(); opt.zero_grad()
    out = model(view.x, view.edge_index)
    loss = torch.nn.functional.cross_entropy(out[view.mask_idx], view.y[view.mask_idx])
    loss.backward(); opt.step()
    times.append(time.perf_counter() - t)
t = time.perf_counter()
model.eval()
with torch.no_grad():
    full = graph_tensors(g)
    model(full.x, full.edge_index)
inference = time.perf_counter() - t
print(json.dumps({{"epoch_seconds_median": sorted(times)[len(times) // 2], "epochs": len(times),
                  "train_nodes": int(view.x.shape[0]), "full_graph_inference_seconds": inference,
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}}))
""",
}


def run(case: str, **kw) -> dict:
    code = CASES[case].format(**kw)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    print(f"# command: python bench/bench_foundation.py --dataset {args.dataset} --epochs {args.epochs}")
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
