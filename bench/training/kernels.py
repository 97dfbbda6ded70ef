"""The training path's kernels against torch's own, at a training graph's shape.

    python bench/training/kernels.py                      # csbm-grb-aminer's training graph
    python bench/training/kernels.py --dataset csbm --threads 2
    python bench/training/kernels.py --accuracy 10        # cora-legacy test accuracy, 10 seeds

On the subgraph induced by the training nodes (what an epoch trains on), with 128 columns:

- dropout: ``F.dropout`` (bernoulli noise, float noise kept) against
  ``grb_dist.models.dropout.dropout`` (SFC64 mask, bool mask kept), forward only, and the
  bytes each keeps for the backward pass;
- one propagation forward and backward with the GCN-normalised adjacency:
  ``torch.sparse.mm`` under autograd against ``grb_dist.models.propagation.propagate``
  (kept transpose, output written in place), with the largest difference;
- the bytes a training forward keeps for the backward pass, per model of the job.

Times are medians of 5 runs after a warm-up, runs of the two sides interleaved.

``--accuracy SEEDS`` instead trains each model of :data:`ACCURACY_MODELS` on cora-legacy
(found in the data folders of ``bench/common.py``, or ``--data``) with seeds 0..SEEDS-1
(200 epochs, patience 50, default hyper-parameters, 1 thread) and prints the mean and
standard deviation of the full test set's accuracy: a change to the training kernels that
alters random draws (the dropout masks) is compared with the commit before it this way.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from grb_dist.core import allocator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import cora_legacy, interleaved, require  # noqa: E402

CORA = cora_legacy()
#: The models that propagate with the CSR kernels compared here (gcnsvd_sparse: GCN-SVD's
#: variant on the edges; the dense gcnsvd propagates with a dense product).
ACCURACY_MODELS = ("gcn", "rgcn", "gnnguard", "gcnsvd_sparse", "appnp", "sgc")


def medians(fns: dict, runs: int = 5) -> dict[str, float]:
    """Median seconds of each of ``fns``, interleaved, after a warm-up."""
    return {name: statistics.median(t) for name, t in interleaved(fns, runs, warmup=True).items()}


def saved_bytes(fn) -> int:
    """Bytes of the distinct tensors autograd keeps during ``fn()`` (sparse ones not counted)."""
    seen: dict[int, int] = {}

    def pack(t):
        if t.layout == torch.strided:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def accuracy(seeds: int, data: Path) -> None:
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.models.train import TrainConfig

    torch.set_num_threads(1)
    g = load_dataset(str(require(data, "cora-legacy")))
    x, edges = torch.as_tensor(g.features), torch.as_tensor(g.edge_index)
    test, labels = torch.as_tensor(g.split["test_full"]), torch.as_tensor(g.labels)
    print("command:", f"python bench/training/kernels.py --accuracy {seeds}")
    print(f"cora-legacy, {test.numel()} test nodes, seeds 0..{seeds - 1}, 200 epochs, patience 50\n")
    print("| model | test accuracy (mean ± sd) | per seed |\n|---|---:|---|")
    for name in ACCURACY_MODELS:
        params, _ = resolve_params(name, {})
        accs = []
        for seed in range(seeds):
            model = train_defense(name, g, params, TrainConfig(epochs=200, patience=50, seed=seed)).model
            with torch.no_grad():
                accs.append(float((model(x, edges)[test].argmax(1) == labels[test]).float().mean()))
        sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
        print(f"| {name} | {statistics.mean(accs):.4f} ± {sd:.4f} | {', '.join(f'{a:.4f}' for a in accs)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--accuracy", type=int, metavar="SEEDS", help="cora-legacy test accuracy over this many seeds")
    ap.add_argument("--data", type=Path, default=CORA, help="the cora-legacy folder (GRB layout)")
    args = ap.parse_args()
    if args.accuracy:
        accuracy(args.accuracy, args.data)
        return
    torch.set_num_threads(args.threads)

    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params
    from grb_dist.models.dropout import dropout
    from grb_dist.models.gcn import normalized_adjacency_t
    from grb_dist.models.propagation import propagate
    from grb_dist.models.grammar import build_model
    from grb_dist.models.views import induced
    from grb_dist.sweep.job import default_job_path, load_job

    spec = load_job(default_job_path(args.dataset))
    g = load_dataset(args.dataset, normalize=spec.normalize, seed=spec.seed)
    view = induced(g, g.split["train"], g.split["train"], "cpu")
    allocator.release()
    n = int(view.x.shape[0])
    print("command:", f"python bench/training/kernels.py --dataset {args.dataset} --threads {args.threads}")
    print(f"{args.dataset}: training graph of {n:,} nodes, {int(view.edge_index.shape[1]):,} directed edges; "
          f"{args.threads} threads; N x 128 float32 = {n * 128 * 4 / 2**20:.0f} MiB\n")

    h = torch.randn(n, 128, requires_grad=True)
    t = medians({"F.dropout": lambda: F.dropout(h.detach(), 0.5, True),
                     "models.dropout": lambda: dropout(h.detach(), 0.5, True)})
    kept = {"F.dropout": saved_bytes(lambda: F.dropout(h, 0.5, True)),
            "models.dropout": saved_bytes(lambda: dropout(h, 0.5, True))}
    print("| dropout, p = 0.5 | seconds | kept for backward |\n|---|---:|---:|")
    for name in t:
        print(f"| {name} | {t[name]:.3f} | {kept[name] / 2**20:.0f} MiB |")
    print(f"speed-up {t['F.dropout'] / t['models.dropout']:.2f}x\n")

    adj = normalized_adjacency_t(view.edge_index, n)
    grad = torch.randn(n, 128)

    def through(fn):
        def run():
            out = fn(adj, h)
            out.backward(grad)
            h.grad = None
            return out
        return run

    torch_mm, ours = through(torch.sparse.mm), through(propagate)
    with torch.no_grad():
        diff = float((torch.sparse.mm(adj, h) - propagate(adj, h)).abs().max())
    t = medians({"torch.sparse.mm": torch_mm, "models.propagation.propagate": ours})
    print("| propagation, forward + backward | seconds |\n|---|---:|")
    for name, seconds in t.items():
        print(f"| {name} | {seconds:.3f} |")
    print(f"speed-up {t['torch.sparse.mm'] / t['models.propagation.propagate']:.2f}x; "
          f"largest forward difference {diff:g}\n")

    print("| model (job's architecture) | kept by a training forward |\n|---|---:|")
    for name in ("gcn", "gnnguard", "rgcn"):
        params, _ = resolve_params(name, spec.models)
        model = build_model(name, g.num_features, g.num_classes, params).train()
        torch.manual_seed(0)
        b = saved_bytes(lambda: model(view.x, view.edge_index))
        print(f"| {name} {params.get('hidden_sizes', '')} | {b / 2**30:.2f} GiB |")


if __name__ == "__main__":
    main()
