"""Children that a test interrupts get SIGINT's default disposition, whatever the test runner inherited.

A shell's ``&`` (without job control), ``nohup`` and some CI runners start ``make test`` with SIGINT ignored;
children inherit an ignored signal across ``exec``, and Python does not install its KeyboardInterrupt handler
for a signal that is ignored at start, so a child would never see the test's Ctrl-C. ``preexec_fn`` could reset
it but is unsafe in a process with threads; this tiny launcher resets it and execs the real command instead.

The product does not reset SIGINT itself: a user who starts ``nohup verifyless run ... &`` asked for it to be
ignored.
"""

from __future__ import annotations

import sys

_LAUNCHER = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"


def with_default_sigint(argv: list[str]) -> list[str]:
    """``argv`` run through a launcher that sets SIGINT to ``SIG_DFL`` and then execs it (``argv[0]`` a path)."""
    return [sys.executable, "-c", _LAUNCHER, *argv]
