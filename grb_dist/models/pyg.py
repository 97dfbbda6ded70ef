"""A :class:`~grb_dist.core.graph.Graph`, clean or perturbed, as a PyTorch Geometric ``Data``.

:func:`to_pyg` is the way back of :func:`grb_dist.datasets.pyg.from_pyg`: the features,
both directions of every edge, the labels and the GRB split as boolean masks
(``train_mask``, ``val_mask``, ``test_mask`` = the full test set, ``test_easy_mask``,
``test_medium_mask``, ``test_hard_mask``). With a perturbation (an attack's
:class:`~grb_dist.core.graph.Injection` or :class:`~grb_dist.core.graph.Modification`, as a
run stores it) the ``Data`` is the perturbed graph the defenses were scored on: injected
nodes come after the original ones with label -1, ``False`` in every split mask and
``True`` in ``injected_mask``. Accuracy of a model on ``data.x, data.edge_index`` over
``data.test_*_mask`` is then the score grb-dist stores for that cell.
"""

from __future__ import annotations

import torch

from grb_dist.core.graph import Graph, Injection, Modification
from grb_dist.datasets.pyg import MASKS
from grb_dist.models.tensors import graph_tensors, perturb_tensors


def to_pyg(graph: Graph, perturbation: Injection | Modification | None = None):
    """A ``torch_geometric.data.Data`` of ``graph``, with ``perturbation`` applied if given."""
    from torch_geometric.data import Data

    t = perturb_tensors(graph_tensors(graph), perturbation)
    n, total = graph.num_nodes, int(t.x.shape[0])
    data = Data(x=t.x.clone(), edge_index=t.edge_index.clone(), y=t.y.clone())
    for key, attr in MASKS.items():
        if key in graph.split:
            mask = torch.zeros(total, dtype=torch.bool)
            mask[torch.from_numpy(graph.split[key])] = True
            data[attr] = mask
    if total > n:
        injected = torch.zeros(total, dtype=torch.bool)
        injected[n:] = True
        data.injected_mask = injected
    return data
