"""Executors run verifications: the ``Executor`` protocol (``base``), local and Ray executors."""

from verifyless.executors.base import Executor

__all__ = ["Executor"]
