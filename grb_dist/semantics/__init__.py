"""Semantics-aware robustness (Gosch et al., "Revisiting Robustness in Graph Machine Learning",
ICLR 2023).

- :mod:`grb_dist.semantics.metrics`: per-node robustness with a reference classifier and the
  reduced metrics R, R(g), R_adv, R_over, F1-rob / F-beta-rob (pure numpy / pandas);
- :mod:`grb_dist.semantics.attacks`: local-budget structure attacks on an inductively added
  node, each giving the order in which it connects edges to the node;
- :mod:`grb_dist.semantics.spec`: a study's settings (job files, checks, graph section) and
  its units; :mod:`grb_dist.semantics.search`: the job's ``search:`` grid;
- :mod:`grb_dist.semantics.data`: the study's graphs, new nodes and Bayes reference;
- :mod:`grb_dist.semantics.flips`: where f and g change their decision along an edge order;
- :mod:`grb_dist.semantics.kernel`: one unit (a plain function), with what units share in
  a process (:mod:`grb_dist.semantics.cache`);
- :mod:`grb_dist.semantics.run`: a study's pending units on Ray or in this process;
- :mod:`grb_dist.semantics.tables`: the rows reduced into the study's tables;
- :mod:`grb_dist.semantics.tune`: the per-K hyper-parameter search;
- :mod:`grb_dist.semantics.plots`: the figures, from the Parquet alone;
"""
