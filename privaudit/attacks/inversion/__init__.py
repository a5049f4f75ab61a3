"""Gradient inversion: reconstruct a victim's private batch from one intercepted target.

    base               the interface (`Inversion`, `Reconstruction`) and the registry (`INVERSIONS`)
    gradient_matching  DLG, iDLG, Inverting Gradients and batch inversion (optimising)
    analytic           the closed form through a first fully connected layer
    labels             a batch's labels read off the last layer's gradient
    replay             what a candidate batch would have released, as the defense releases it

Importing the package registers the shipped attacks.
"""

# Registered in the order campaigns' errors and `privaudit list` name them.
from privaudit.attacks.inversion import gradient_matching  # isort: skip
from privaudit.attacks.inversion import analytic  # isort: skip
from privaudit.attacks.inversion.base import INVERSIONS, Inversion, Reconstruction, register_inversion

__all__ = ["INVERSIONS", "Inversion", "Reconstruction", "analytic", "gradient_matching", "register_inversion"]
