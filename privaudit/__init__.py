"""privaudit: audit what an eavesdropper learns from private decentralized learning."""

__version__ = "0.1.0"
