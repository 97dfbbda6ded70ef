"""Graph modification attacks (GRB modification scenario): one module per attack, one line
each in :data:`grb_dist.attacks.registry.MODIFICATION`.

Every attack subclasses :class:`~grb_dist.attacks.shared.flips.ModificationAttack`
and returns an audited :class:`~grb_dist.core.graph.Modification`.
"""
