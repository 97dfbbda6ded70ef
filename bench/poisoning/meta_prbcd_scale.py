"""Meta-gradient PR-BCD poisoning on a large graph: wall time, peak memory and what it does
to a GCN trained on the poisoned graph.

The default graph is the flickr twin (``csbm-grb-flickr``: 89,250 nodes, 448,755 edges, 500
features, GRB's flickr split), the budget 5% of its edges. A GCN surrogate is trained
transductively on the clean graph (its predictions label the unlabelled nodes, as in a
sweep); then ``meta_prbcd`` runs in a subprocess of its own, so that its peak resident memory
(``resource.getrusage``, the child's maximum RSS, which includes the loaded graph and the
surrogate) is its own, and its wall time covers ``attack()`` alone. With ``--score`` a GCN is
trained transductively on the clean and on the poisoned graph (same seed) and its accuracy on
the full test set printed for both.

    python bench/poisoning/meta_prbcd_scale.py                         # flickr twin, 5%
    python bench/poisoning/meta_prbcd_scale.py --set steps=20 --score
    python bench/poisoning/meta_prbcd_scale.py --dataset csbm-grb-aminer --set steps=2

``--set key=value`` overrides an attack parameter (``steps``, ``train_iters``, ``block_size`` ...).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, peak_rss_gib, run_child, setting, timed  # noqa: E402


def _gcn(graph, epochs: int, seed: int = 0):
    from grb_dist.defenses import train_defense
    from grb_dist.models.train import TrainConfig

    return train_defense("gcn", graph, {"hidden_sizes": [64]}, TrainConfig(epochs=epochs, patience=20, seed=seed),
                         transductive=True).model


def attack(args) -> None:
    """Child: train the surrogate, time the attack, write the perturbation's flips."""
    import numpy as np
    import torch

    from grb_dist.attacks import build_attack
    from grb_dist.datasets import load_dataset

    torch.set_num_threads(args.threads)
    graph = load_dataset(args.dataset)
    surrogate = _gcn(graph, args.epochs).eval()
    params = {"ratio_edge_mod": args.rate, "seed": 0, **dict(args.set)}
    seconds, mod = timed(build_attack("meta_prbcd", params, "poisoning").attack, graph, surrogate)
    peak = peak_rss_gib() * 2**30
    np.savez(args.flips, added=mod.added, removed=mod.removed)
    emit({"seconds": seconds, "peak_bytes": peak, "flips": int(mod.n_edge_flips), "params": params})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="csbm-grb-flickr")
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--set", type=setting, action="append",
                        default=[], metavar="KEY=VALUE")
    parser.add_argument("--epochs", type=int, default=100, help="surrogate (and scoring GCN) epochs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--score", action="store_true")
    parser.add_argument("--flips", default=str(Path(tempfile.gettempdir()) / "meta_prbcd_flips.npz"),
                        help="where the attack process leaves its flips for --score (removed afterwards)")
    parser.add_argument("--mode", choices=["main", "attack"], default="main")
    args = parser.parse_args()
    if args.mode == "attack":
        return attack(args)
    cmd = [__file__, "--mode", "attack", "--dataset", args.dataset, "--rate", str(args.rate),
           "--epochs", str(args.epochs), "--threads", str(args.threads), "--flips", args.flips]
    for key, value in args.set:
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    result = run_child(cmd, check=True)
    print(f"meta_prbcd on {args.dataset} at {args.rate:.0%}: {result['flips']:,} flips in {result['seconds']:.1f} s, "
          f"peak RSS {result['peak_bytes'] / 2**30:.2f} GiB (whole process), {args.threads} threads; "
          f"params {result['params']}")
    if args.score:
        import numpy as np
        import torch

        from grb_dist.core.graph import Modification, modified_graph
        from grb_dist.datasets import load_dataset
        from grb_dist.evaluation.evaluate import difficulty_accuracy, predict_tensors
        from grb_dist.models.tensors import graph_tensors

        torch.set_num_threads(args.threads)
        graph = load_dataset(args.dataset)
        flips = np.load(args.flips)
        mod = Modification.build(flips["removed"], flips["added"], graph.num_nodes, graph.num_features)
        for label, g in (("clean", graph), ("poisoned", modified_graph(graph, mod))):
            model = _gcn(g, args.epochs)
            acc = difficulty_accuracy(predict_tensors(model, graph_tensors(g, "cpu")), g, ["full"])["full"]
            print(f"GCN trained on the {label} graph: test accuracy {acc:.4f}")
    Path(args.flips).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
