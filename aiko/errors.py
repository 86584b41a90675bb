"""Placeholder of the lead's contract (issue 2); main's version wins on merge."""


class AikoError(Exception):
    """Bad user input or configuration; the CLI prints it on one line and exits 2."""


class ConfigError(AikoError):
    """An invalid configuration table or value."""


class HardwareError(AikoError):
    """A device is missing or misbehaves."""
