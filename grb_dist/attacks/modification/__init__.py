"""Graph modification attacks (GRB modification scenario): one module per attack, one
registry line each.

Every attack subclasses :class:`~grb_dist.attacks.modification.base.ModificationAttack`
and returns an audited :class:`~grb_dist.core.graph.Modification`.
"""

from __future__ import annotations

from grb_dist.attacks.modification.base import ModificationAttack, ModificationConfig
from grb_dist.attacks.modification.dice import DICE
from grb_dist.attacks.modification.fga import FGA
from grb_dist.attacks.modification.flip import FLIP
from grb_dist.attacks.modification.grbcd import GRBCD
from grb_dist.attacks.modification.nea import NEA
from grb_dist.attacks.modification.pgd import PGD
from grb_dist.attacks.modification.prbcd import PRBCD
from grb_dist.attacks.modification.rnd import RND
from grb_dist.attacks.modification.stack import STACK
from grb_dist.core.registry import Registry

#: Registered modification attacks: name -> class (names are the paper acronyms).
MODIFICATION_ATTACKS: Registry[type[ModificationAttack]] = Registry("modification attack", {
    "rnd": RND,
    "dice": DICE,
    "flip": FLIP,
    "nea": NEA,
    "stack": STACK,
    "fga": FGA,
    "pgd": PGD,
    "prbcd": PRBCD,
    "grbcd": GRBCD,
})

__all__ = ["MODIFICATION_ATTACKS", "ModificationAttack", "ModificationConfig"]
