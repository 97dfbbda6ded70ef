"""Targeted attacks: perturbations aimed at the classification of one node at a time.

:mod:`.nettack` (Zügner et al., KDD 2018) on the linearised GCN surrogate, with the two
unnoticeability tests of the paper in :mod:`.plausibility`. They stand beside the other
scenarios on :mod:`grb_dist.attacks.shared` and are not yet in the attack tables.
"""
