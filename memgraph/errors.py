"""User-facing errors.

A :class:`MemgraphError` carries one line that names the bad value and says what to do.
The CLI prints it without a traceback (unless ``--debug``) and exits non-zero.
"""


class MemgraphError(Exception):
    """An error caused by the user's input, reported as one line."""


class TraceError(MemgraphError):
    """Running the training step on the meta device failed at a known op and module."""
