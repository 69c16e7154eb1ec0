"""A critic learnt in the run (issue 45): how it started, how often it refitted, how well it ranks the run's pairs.

Read from the run's ``warm_start`` event, the head tags its screenings carry and the screener audit (the same
pairwise accuracy as the report's audit table); ``show``, the report and the dashboard print the same line.
"""

from __future__ import annotations

from typing import Any

from verifyless.events import Screened, WarmStarted
from verifyless.screen.audit import audit_from_store
from verifyless.store.protocol import RunStoreProtocol


def screener_audit(st: RunStoreProtocol, run_id: str) -> dict[str, Any] | None:
    """The online audit of the screener (``screen/audit.py``) as a row; None before the first screening."""
    audit = audit_from_store(st, run_id)
    return audit.row() if audit.screenings else None


def learned_critic_data(st: RunStoreProtocol, run_id: str, config: Any = None) -> dict[str, Any] | None:
    """A critic-rm learnt in the run (issue 45): how it started (the ``warm_start`` event, or cold), the heads its
    screenings used in order (``<start>+N``: refitted on the run's first N paid pairs), and its live pairwise
    accuracy on the run's own paid sibling pairs (the audit's, ranked before the outcomes were known); None for
    any other screener."""
    if config is None:
        config = st.run(run_id).config
    screener = (config or {}).get("screener") or {}
    options = screener.get("options") or {}
    inner = options if screener.get("name") == "critic-rm" else options.get("options") or {}
    wraps = screener.get("name") == "critic-rm" or (
        screener.get("name") == "adaptive" and options.get("screener", "critic-rm") == "critic-rm"
    )
    if not wraps or inner.get("path") or "warm" not in inner:
        return None
    warm = [_start(e.record) for e in st.events(run_id, WarmStarted)]
    heads: list[str] = []
    gate: dict[str, Any] | None = None
    for e in st.events(run_id, Screened):
        for evidence in (e.record.screening.evidence or {}).values():
            tag = (evidence.detail or {}).get("weights")
            if tag and (not heads or heads[-1] != tag) and tag not in heads:
                heads.append(tag)
            gate = (evidence.detail or {}).get("gate") or gate
    audit = screener_audit(st, run_id)
    start = warm[0] if warm else {"line": "cold start: no earlier run of the task to learn from", "tag": "cold"}
    return {
        "start": {k: start.get(k) for k in ("line", "tag", "runs", "verdict")},
        "pairs": len(start.get("pairs") or ()),
        "heads": heads,
        "refits": sum("+" in h for h in heads),
        "pairwise": (audit or {}).get("pairwise"),
        "gate": gate_said(gate),
    }


def gate_said(note: dict[str, Any] | None) -> str | None:
    """What the critic's gate did (``screen/gate.py``), from the last screening's note: "abstained throughout
    (random picks)", "ranking since paid outcome 14", "ranking from the start"; None for a run without a gate."""
    if not note:
        return None
    switches = note.get("switches") or []
    if note.get("state") == "ranking":
        return f"ranking since paid outcome {switches[-1]['told']}" if switches else "ranking from the start"
    if switches:
        return f"abstaining (random picks) again since paid outcome {switches[-1]['told']}"
    return "abstained throughout (random picks): its record never credibly beat chance"


def _start(record: WarmStarted) -> dict[str, Any]:
    """What ``learned_critic_data`` shows of a ``warm_start`` record (lists as they were stored)."""
    return {
        "line": record.line,
        "tag": record.tag,
        "runs": list(record.runs),
        "verdict": record.verdict,
        "pairs": list(record.pairs),
    }


def learned_critic_line(data: dict[str, Any]) -> str:
    """One line about a critic learnt in the run (``show``, the report and the dashboard)."""
    pw = data.get("pairwise") or {}
    live = "-" if pw.get("value") is None else f"{pw['value']:.2f}"
    if pw.get("low") is not None and pw.get("high") is not None:
        live += f" [{pw['low']:.2f}, {pw['high']:.2f}]"
    last = data["heads"][-1] if data["heads"] else "none yet"
    gate = f"; gate: {data['gate']}" if data.get("gate") else ""
    return (
        f"learned critic: {data['start']['line']}; {data['refits']} refits in the run (last head {last}); live "
        f"pairwise accuracy on this run's paid sibling pairs {live} n={pw.get('n', 0)}{gate}"
    )


__all__ = ["gate_said", "learned_critic_data", "learned_critic_line", "screener_audit"]
