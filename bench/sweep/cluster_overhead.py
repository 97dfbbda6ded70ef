"""The driver's pure overhead per cell on a simulated multi-node Ray cluster.

    python bench/sweep/cluster_overhead.py                          # 1, 2, 4, 8 nodes x 100, 1000, 10000 cells
    python bench/sweep/cluster_overhead.py --nodes 1,8 --cells 1000

``ray.cluster_utils.Cluster`` starts a head and ``nodes - 1`` worker nodes on this machine,
each with one logical CPU (a tiny share of the real cores). The graph (``--dataset``, the
default csbm graph's arrays) is put into the object store once; every cell is a task that takes its
reference and returns a score row of the sweep's shape without computing anything, so the
figures are what Ray and the driver cost per cell: submitted with at most ``--window``
cells in flight (as the sweep keeps a bounded window), collected with ``ray.wait``.

Printed per (nodes, cells): wall seconds, cells/s, the driver's CPU milliseconds per cell
(``time.process_time``), and the graph's bytes moved per cell: each node pulls the graph
once (its first task there), so ``graph bytes x nodes used / cells``; result rows are a
few hundred bytes, which Ray returns inline to the driver, not through the object store.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="1,2,4,8")
    ap.add_argument("--cells", default="100,1000,10000")
    ap.add_argument("--window", type=int, default=256, help="cells in flight at most")
    ap.add_argument("--dataset", default="csbm", help="the graph put into the object store (default: csbm)")
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from grb_dist.datasets import load_dataset

    g = load_dataset(args.dataset)
    arrays = {"features": g.features, "edge_index": g.edge_index, "labels": g.labels}
    graph_bytes = sum(a.nbytes for a in arrays.values())
    print(f"graph: {g.name}, {g.num_nodes:,} nodes, {graph_bytes / 2**20:.1f} MiB of arrays; window {args.window}\n")
    print("| nodes | cells | wall s | cells/s | driver CPU ms/cell | graph bytes moved/cell | nodes used |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n_nodes in (int(v) for v in args.nodes.split(",")):
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        for _ in range(n_nodes - 1):
            cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        cluster.wait_for_nodes()

        @ray.remote(num_cpus=1)
        def cell(graph, i):  # noqa: ANN001 - a no-op cell: reads the graph's shape, returns a row
            return {"cell_id": f"{i:016x}", "accuracy": float(graph["labels"][i % graph["labels"].size] >= 0),
                    "node": ray.get_runtime_context().get_node_id()}

        ref = ray.put(arrays)
        ray.get([cell.remote(ref, i) for i in range(n_nodes * 4)])  # warm every node's worker and its copy
        for n_cells in (int(v) for v in args.cells.split(",")):
            nodes_used: set[str] = set()
            start, cpu = time.perf_counter(), time.process_time()
            pending, submitted = [], 0
            while submitted < n_cells or pending:
                while submitted < n_cells and len(pending) < args.window:
                    pending.append(cell.remote(ref, submitted))
                    submitted += 1
                done, pending = ray.wait(pending, num_returns=min(len(pending), 64), timeout=None)
                nodes_used.update(row["node"] for row in ray.get(done))
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            print(f"| {n_nodes} | {n_cells:,} | {wall:.2f} | {n_cells / wall:,.0f} | {1000 * cpu / n_cells:.2f} | "
                  f"{graph_bytes * len(nodes_used) / n_cells:,.0f} | {len(nodes_used)} |", flush=True)
        ray.shutdown()
        cluster.shutdown()
    print("\ncells/s = pure overhead (no cell computes anything); the graph is pulled once per node, "
          "so its bytes per cell fall as 1 / cells")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
