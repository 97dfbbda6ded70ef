"""Seconds and peak memory of the non-gradient modification attacks on a large graph.

Runs FLIP (degree, eigenvector, and betweenness with few sources), NEA and STACK once each
on the calibrated aminer twin (659,574 nodes, 2,878,895 edges; full-difficulty targets, a 5%
edge budget) and prints, per attack, the wall seconds, the flips made and the process's peak
resident memory during the attack (VmHWM, reset before each attack through
``/proc/self/clear_refs``; on systems without it, the process peak so far).

    python bench/attacks/modification_simple.py [--dataset csbm-grb-aminer] [--sources 8]

Figures of ``python bench/attacks/modification_simple.py`` on a 2-core machine shared with
other jobs (load average 3 to 5, so the seconds are inflated), 197,871 targets, 143,945 flips
each (all removals), process RSS 0.90 GiB after loading:

    attack                         seconds   peak GiB
    flip degree                        9.1       1.11
    flip eigenvector                  20.7       1.12
    flip betweenness, 8 sources       31.8       1.23
    nea (k=32)                       157.6       1.61
    stack (k=32)                     114.5       1.61

About 10 s of every row is the base class's audit (two ``np.isin`` over the 2.9M clean
edge keys). NEA / STACK are dominated by ARPACK: the 32 largest-magnitude non-trivial
eigenvalues of the twin are clustered in [0.865, 0.928], and ``eigsh`` needs about 620
products with the deflated operator (47 ms each, about 30 s) plus its restarts
(O(N ncv^2) each, ncv = 65), the bulk of the time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from grb_dist.attacks.registry import MODIFICATION
from grb_dist.datasets import load_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import peak_rss_gib, timed  # noqa: E402


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter of this process; False where unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_gib() -> float:
    """Peak resident memory (GiB) since the last reset (VmHWM), else since start."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return peak_rss_gib()


def rss_gib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


class Features(torch.nn.Module):
    """Stand-in surrogate (none of the measured attacks evaluates it)."""

    def __init__(self, d: int, c: int):
        super().__init__()
        self.lin = torch.nn.Linear(d, c)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--sources", type=int, default=8, help="BFS sources of FLIP betweenness")
    ap.add_argument("--ratio", type=float, default=0.05, help="edge budget as a share of the edges")
    args = ap.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    load_s, g = timed(load_dataset, args.dataset)
    targets = g.targets("full")
    print(f"{g.name}: {g.num_nodes:,} nodes, {g.num_edges:,} edges, {targets.size:,} targets; "
          f"loaded in {load_s:.1f} s, RSS {rss_gib():.2f} GiB")
    model = Features(g.num_features, g.num_classes)
    runs = [
        ("flip", {"variant": "degree"}),
        ("flip", {"variant": "eigenvector"}),
        ("flip", {"variant": "betweenness", "betweenness_sources": args.sources}),
        ("nea", {}),
        ("stack", {}),
    ]
    resettable = reset_peak()
    print(f"peak memory: {'VmHWM reset per attack' if resettable else 'process peak so far'}")
    print(f"{'attack':<28}{'seconds':>9}{'flips':>10}{'removed':>10}{'peak GiB':>10}")
    for name, options in runs:
        cls = MODIFICATION.get(name)
        attack = cls(cls.Config(ratio_edge_mod=args.ratio, **options))
        reset_peak()
        dt, mod = timed(attack.attack, g, model, targets)
        label = name + ("" if not options else " " + ",".join(f"{k}={v}" for k, v in options.items()))
        print(f"{label:<28}{dt:>9.1f}{mod.n_edge_flips:>10,}{mod.removed.shape[1]:>10,}{peak_gib():>10.2f}",
              flush=True)


if __name__ == "__main__":
    main()
