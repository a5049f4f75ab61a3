"""Private decentralized algorithms, one module each; importing this package registers them."""

from privaudit.defenses import dpdl, dpsgd, lt_admm_dp, muffliato, ternary, tvss
from privaudit.defenses.base import DEFENSES, Defense, register

__all__ = ["DEFENSES", "Defense", "register", "dpdl", "dpsgd", "lt_admm_dp", "muffliato", "ternary", "tvss"]
