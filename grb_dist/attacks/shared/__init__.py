"""What the attack scenarios share, one floor below all of them (``injection``,
``modification`` and ``poisoning`` sit side by side above it and never import each other):

- :mod:`.surrogate`: a surrogate's receptive field, its targets' subgraph and clean pass,
  and the cache that computes them once for several attacks;
- :mod:`.incremental`: the surrogate's declared program evaluated on the rows a
  perturbation reaches;
- :mod:`.weighted`: the surrogate differentiable in edge weights (the clean structure built
  once), for every attack that relaxes edge flips;
- :mod:`.flips`: the base of the attacks that flip edges (modification and poisoning): the
  configuration, the budget, the context and the candidate pairs;
- :mod:`.relaxed`: the relaxed block search of PR-BCD, shared by PR-BCD, PGD, GR-BCD and
  meta-PR-BCD.
"""
