"""From PyTorch Geometric to a GRB score and back (docs/from-pyg.md).

    python docs/examples/from_pyg.py path/to/cora.npz [RUN_DIR]

1. Build a PyG ``Data`` as PyG code holds a graph: features, edges, labels and
   train / val / test masks (here read from an ``.npz`` graph of the field, e.g. cora).
2. Train a PyG GCN the usual way, inductively as GRB's protocol does: on the subgraph of
   the training nodes, validation on the training + validation nodes.
3. ``grb_dist.benchmark(model, dataset=data)`` attacks it (black-box: the attacks use a
   surrogate that grb-dist trains) and returns the table; the trained module is scored as
   given, not retrained (its rows say ``weights = given``).
4. Read a stored perturbation back as a PyG ``Data`` (``to_pyg``) and score the model on
   it in plain PyG code: the same accuracy as the stored score.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv

import grb_dist
from grb_dist.datasets import load_npz_graph
from grb_dist.datasets.pyg import from_pyg
from grb_dist.models.pyg import to_pyg
from grb_dist.store import RunStore


def pyg_data(path: str, seed: int = 0) -> Data:
    """A PyG graph with random 60/10/30 train/val/test masks."""
    graph, _ = load_npz_graph(path)
    n = graph.num_nodes
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    for mask, part in zip(masks, torch.tensor_split(order, [int(0.6 * n), int(0.7 * n)])):
        mask[part] = True
    return Data(x=torch.from_numpy(graph.features), edge_index=torch.from_numpy(graph.edge_index),
                y=torch.from_numpy(graph.labels), train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])


class GCN(torch.nn.Module):
    def __init__(self, in_channels: int, hidden: int, out_channels: int):
        super().__init__()
        self.conv1, self.conv2 = GCNConv(in_channels, hidden), GCNConv(hidden, out_channels)

    def forward(self, x, edge_index):
        x = F.dropout(F.relu(self.conv1(x, edge_index)), p=0.5, training=self.training)
        return self.conv2(x, edge_index)


def train(data: Data, epochs: int = 200) -> GCN:
    torch.manual_seed(0)
    model = GCN(data.num_features, 64, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    seen = data.subgraph(data.train_mask)  # inductive: the test nodes are never seen in training
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(seen.x, seen.edge_index), seen.y).backward()
        opt.step()
    return model.eval()


def main(path: str, run_dir: str) -> None:
    data = pyg_data(path)
    model = train(data)

    rows = grb_dist.benchmark(
        model, dataset=data, attacks=["rnd", "fgsm"], difficulties=["full"], repeats=1, out=run_dir,
        steps=50, n_inject=30, edges_per_node=20, train={"epochs": 100}, models={"gcn": {"hidden_sizes": [64]}},
    )
    print(rows[["row", "difficulty", "attack", "weights", "accuracy_mean"]].to_string(index=False))

    # every stored score, recomputed in plain PyG code on the perturbed graph as a Data
    graph = from_pyg(data)  # the graph grb-dist scored: these masks, the features as given
    store = RunStore.existing(run_dir)
    scores = store.read_scores()
    for row in scores.itertuples():
        if not isinstance(row.perturbation_id, str):  # the clean row
            perturbed = to_pyg(graph)
        else:
            perturbed = to_pyg(graph, store.read_perturbation(row.perturbation_id))
        mask = perturbed["test_mask" if row.difficulty == "full" else f"test_{row.difficulty}_mask"]
        with torch.no_grad():
            pred = model(perturbed.x, perturbed.edge_index).argmax(1)
        plain = float((pred[mask] == perturbed.y[mask]).float().mean())
        print(f"{row.attack:>5} on {row.difficulty}: stored {row.accuracy:.4f}, plain PyG {plain:.4f}")
        assert np.isclose(plain, row.accuracy, atol=1e-6), (row.attack, plain, row.accuracy)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[1])
    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else str(Path(tmp) / "run"))
