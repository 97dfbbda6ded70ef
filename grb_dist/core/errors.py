"""Exceptions raised by grb_dist.

Every error carries a one-line message that names the problem and the fix; the CLI prints
that line and exits non-zero.
"""


class GrbDistError(Exception):
    """Base class of every error that grb_dist raises on bad input."""


class DatasetError(GrbDistError):
    """A dataset is unknown, missing, truncated or malformed."""


class ConfigError(GrbDistError):
    """A configuration (job file, CLI flag, hyper-parameter) is invalid."""


class UnknownNameError(ConfigError, KeyError):
    """A registry lookup failed; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class AuditError(GrbDistError):
    """A perturbation violates the threat model."""


class StoreError(GrbDistError):
    """A result store is inconsistent with the requested run."""


class ExtensionTypeError(ConfigError, TypeError):
    """An object of the wrong kind was registered (not a GraphModel, Module or attack class)."""
