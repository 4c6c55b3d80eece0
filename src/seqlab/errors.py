"""Exceptions with messages meant for the user: what is wrong, where, and what was expected."""


class SeqlabError(Exception):
    """Base class; the command line prints the message alone (no traceback) and exits with 2."""


class ConfigError(SeqlabError):
    """A configuration file or command-line override is invalid."""


class DataError(SeqlabError):
    """A dataset is missing, corrupt or malformed."""


class CheckpointError(SeqlabError):
    """A checkpoint is missing, corrupt, or was written by something else."""


class TrainingInterrupted(SeqlabError):
    """Ctrl-C during training: the message says what was saved and how to resume (exit 130)."""
