"""Exceptions for infrastructure and user-input problems.

Candidate failures are never exceptions: they are data (a ``Status`` and a
reason on a record). These classes are for things the user or operator must
fix. Every message should say what is wrong *and* how to fix it; the CLI
prints ``str(exc)`` without a traceback and exits with ``exit_code``.
"""

from __future__ import annotations

from collections.abc import Iterable


class VerifylessError(Exception):
    """Base class. ``exit_code`` is what the CLI returns for this error.

    A subclass names its own code in its class line (``class X(VerifylessError, exit_code=3)``);
    one that names none keeps its base's.
    """

    exit_code = 1

    def __init_subclass__(cls, exit_code: int | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code


class ConfigError(VerifylessError, exit_code=2):
    """A configuration file or override is invalid."""


class TaskError(VerifylessError, exit_code=3):
    """A task folder is malformed, or its evaluator failed (a task argument that names no folder at all is bad input:
    ``task.loader.MissingTask``, exit 2)."""


class SandboxUnavailable(VerifylessError, exit_code=4):
    """The sandbox itself is broken (not the candidate)."""


class StoreError(VerifylessError, exit_code=5):
    """The run store is missing, corrupt or of an unknown schema version."""


class ModelUnavailable(VerifylessError, exit_code=6):
    """An LLM endpoint cannot be used (unreachable, bad key, unknown model, retries exhausted)."""


class ParseError(VerifylessError, exit_code=7):
    """An LLM reply could not be parsed into the expected structure."""


class UnparseableReplies(VerifylessError, exit_code=8):
    """A screener's model produced no parseable reply for several screenings in a row.

    The run stops instead of going on as a random screener; the message names
    the screener, the model, the reply format expected and what the model wrote.
    """


class RunHeld(VerifylessError, exit_code=10):
    """Another live process holds the run (its lease in the store, ``store/lease.py``): one process at a time pays
    for a run. The message names the holder (pid, host, since when) and how to go on."""


class InvalidSubmission(Exception):
    """A candidate's output breaks the task's submission contract (wrong columns, rows or ids; values of the
    wrong kind). Not a ``VerifylessError``: it is a candidate failure. A trusted scorer raises it with one line
    saying what is wrong; ``verify`` records the candidate as ``contract-violation`` with that reason (MLE-bench's
    ``InvalidSubmissionError``, where such a submission simply gets no score)."""


def listed(names: Iterable[object], limit: int = 12) -> str:
    """Names for a one-line message: all of them (``'a', 'b'``), or the first ``limit`` and how many more, so a
    message never drops names silently."""
    items = [repr(str(n)) for n in names]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more
