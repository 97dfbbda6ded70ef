"""Semantics-aware robustness (seed 002, "Revisiting Robustness in Graph Machine Learning").

- :mod:`grb_dist.semantics.metrics`: per-node robustness with a reference classifier and the
  reduced metrics R, R(g), R_adv, R_over, F1-rob / F-beta-rob (pure numpy / pandas);
- :mod:`grb_dist.semantics.attacks`: local-budget structure attacks on an inductively added
  node, each giving the order in which it connects edges to the node;
- :mod:`grb_dist.semantics.study`: the study's work units (plain functions), the Ray
  wrapper, the reduced tables;
- :mod:`grb_dist.semantics.plots`: the figures, from the Parquet alone.
"""
