"""Poisoning attacks: the graph is perturbed *before* the defender trains on it.

:mod:`~grb_dist.attacks.poisoning.base` holds their base class and the helpers every one
shares (the nodes a poisoning attack fights, global candidate pairs, self-training labels);
each attack is one module and one line in ``POISONING`` of
:mod:`grb_dist.attacks.registry`. Every modification attack is a poisoning perturbation too
(the same table row): computed on the surrogate against the unlabelled nodes, then trained on.
"""
