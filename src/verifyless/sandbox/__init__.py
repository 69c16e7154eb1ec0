"""Where untrusted candidate code runs: the ``Sandbox`` protocol (``base``) and the local sandbox (``local``)."""

from verifyless.sandbox.base import ExecResult, Sandbox

__all__ = ["ExecResult", "Sandbox"]
