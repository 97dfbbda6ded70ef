"""The robust architectures: defenses that are models of their own, each one module with a
:class:`~grb_dist.models.base.GraphModel` subclass and its ``Config``.

- :mod:`~grb_dist.models.robust.rgcn`: R-GCN, Gaussian-based graph convolution;
- :mod:`~grb_dist.models.robust.gnnguard`: GNNGuard and GATGuard, edges re-weighted by
  feature similarity;
- :mod:`~grb_dist.models.robust.svd`: GCN-SVD, a low-rank adjacency;
- :mod:`~grb_dist.models.robust.jaccard`: GCN-Jaccard, dissimilar edges dropped;
- :mod:`~grb_dist.models.robust.softmedian`: Soft-Median GDC, a robust aggregation;
- :mod:`~grb_dist.models.robust.prognn`: Pro-GNN, a structure learned with the weights.

They live on the models floor, not in :mod:`grb_dist.defenses`, because the model table
(:data:`grb_dist.models.registry.ROBUST_MODELS`) names them and the floors below the
defenses (the attacks' surrogates, the evaluation) build and differentiate them like any
other model; :mod:`grb_dist.defenses` re-exports their classes. This package imports
nothing itself: take the module you need.
"""
