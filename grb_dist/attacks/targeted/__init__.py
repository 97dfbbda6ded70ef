"""Targeted attacks: perturbations aimed at the classification of one node at a time.

Every attack here derives from :mod:`.base` (each target attacked alone, within a budget of
its own, direct flips at the target) and is in the tables of the ``targeted`` and
``targeted-poisoning`` scenarios: :mod:`.nettack` (Zügner et al., KDD 2018) on the
linearised GCN surrogate, with the two unnoticeability tests of the paper in
:mod:`.plausibility`; :mod:`.fga` (gradient flips at the target), :mod:`.prbcd` (local PR-BCD,
Geisler et al. 2021), :mod:`.rnd` and :mod:`.dice` (baselines).
"""
