"""User-facing errors: a mistake in what the user gave us (config, path, task file).

The CLI prints these as one line and exits with status 2, without a traceback. Everything else
is a bug or an environment failure and keeps its traceback.
"""


class UserError(Exception):
    """A mistake in user input; the message names the input and what was expected."""


class ConfigError(UserError):
    """A config file or override is wrong (unknown key, wrong type, missing file)."""
