"""Exceptions for infrastructure and user-input problems.

Candidate failures are never exceptions: they are data (a ``Status`` and a
reason on a record). These classes are for things the user or operator must
fix. Every message should say what is wrong *and* how to fix it; the CLI
prints ``str(exc)`` without a traceback and exits with ``exit_code``.
"""

from __future__ import annotations


class VerifylessError(Exception):
    """Base class. ``exit_code`` is what the CLI returns for this error."""

    exit_code = 1


class ConfigError(VerifylessError):
    """A configuration file or override is invalid."""

    exit_code = 2


class TaskError(VerifylessError):
    """A task folder is missing or malformed."""

    exit_code = 3


class SandboxUnavailable(VerifylessError):
    """The sandbox itself is broken (not the candidate)."""

    exit_code = 4


class StoreError(VerifylessError):
    """The run store is missing, corrupt or of an unknown schema version."""

    exit_code = 5


class ModelUnavailable(VerifylessError):
    """An LLM endpoint cannot be used (unreachable, bad key, unknown model, retries exhausted)."""

    exit_code = 6


class ParseError(VerifylessError):
    """An LLM reply could not be parsed into the expected structure."""

    exit_code = 7


class UnparseableReplies(VerifylessError):
    """A screener's model produced no parseable reply for several screenings in a row.

    The run stops instead of going on as a random screener; the message names
    the screener, the model, the reply format expected and what the model wrote.
    """

    exit_code = 8


class BudgetExhausted(VerifylessError):
    """A hard budget cap was reached; the run stops cleanly."""

    exit_code = 0
