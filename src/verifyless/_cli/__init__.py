"""The command line: every ``verifyless`` command module and command body lives here.

Private by design: library code never imports from ``_cli``; the commands import the library.
"""

from verifyless._cli.app import app, main

__all__ = ["app", "main"]
