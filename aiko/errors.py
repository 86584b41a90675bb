"""Exceptions for problems a user can fix. The CLI prints them as one line and exits with status 2."""


class AikoError(Exception):
    """Bad user input: a missing file, a malformed or out-of-range setting, an unknown name."""


class ConfigError(AikoError):
    """An experiment file, robot description or command-line override that fails validation."""


class HardwareError(AikoError):
    """A device that cannot be opened or that answers outside its contract."""
