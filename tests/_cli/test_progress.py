"""The live line of a failed verification says why it failed (issue 54, item 6): one clipped line, control
characters escaped (the reason quotes the program's stderr), never read as markup."""

from __future__ import annotations

import io

from rich.console import Console

from verifyless._cli.progress import LiveProgress
from verifyless.events import Verified


def test_a_failed_verification_s_line_carries_its_reason_clipped_and_escaped():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=200), cap=4)
    reason = "ValueError: Expected n_neighbors <= n_samples_fit [/]\n\x1b]0;pwned\x07 " + "y" * 300
    progress(Verified.KIND, {"node_id": "n3", "status": "failed", "score": None, "reason": reason})
    progress(Verified.KIND, {"node_id": "n4", "status": "ok", "score": 0.8125, "reason": ""})
    failed, ok = out.getvalue().splitlines()
    assert failed.startswith("  verified n3") and "failed" in failed, failed
    assert "ValueError: Expected n_neighbors <= n_samples_fit [/] \\x1b]0;pwned\\x07 yyy" in failed, failed
    assert failed.endswith("…") and len(failed) < 160, failed
    assert ok.split()[-1] == "0.8125", ok
