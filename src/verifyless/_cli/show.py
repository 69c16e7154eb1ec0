"""What ``runs`` and ``show`` read from a store: one run's row, one run's summary, and the lines they print.

The readers are pure reads of a (read-only) store (``show_data`` is ``show --json``'s record); ``print_show``
prints that record as ``show``'s text. ``_cli/app.py`` owns the commands and their options.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.table import Table

from verifyless import datareport
from verifyless._cli.common import console
from verifyless._cli.progress import REASON_CHARS
from verifyless._cli.terminal import shown
from verifyless.engine.health import stored_role_health
from verifyless.engine.submission import SKIPPED, UNSUPPORTED
from verifyless.events import (
    DataReported,
    Finalised,
    FinalSelected,
    NodeRecorded,
    RunStatusChanged,
    Screened,
    ScreenerLearned,
    Submitted,
    Verified,
)
from verifyless.node import Status
from verifyless.report.peers import ModelShare, NoveltyRates, model_shares, novelty_rates, peers_lines
from verifyless.report.text import number, one_line
from verifyless.report.views.card import resolved_line, run_card
from verifyless.report.views.final import final_view, selection_line
from verifyless.report.views.learned import learned_critic_data, learned_critic_line, screener_audit
from verifyless.report.views.runs import PARSE_OUTCOMES, gpu_seconds, reply_parsing
from verifyless.screen.audit import adaptive_line, audit_line
from verifyless.screen.base import FallbackCount, fallback_line
from verifyless.screen.health import health_by_screener
from verifyless.screen.ttl import run_adapters
from verifyless.search.memory import DENSE_KINDS


def run_row(st, info) -> dict[str, Any]:
    """One run's line for ``runs``: ids, strategy and screener from its stored config, budget used, best node."""
    best = best_row(st, info.run_id)
    config = info.config or {}
    return {
        "run_id": info.run_id,
        "task": info.task,
        "strategy": (config.get("strategy") or {}).get("name"),
        "screener": (config.get("screener") or {}).get("name"),
        "status": info.status,
        "created": info.created,
        "updated": info.updated,
        "nodes": info.n_nodes,
        "verifications": st.budget(info.run_id).verifications,
        "best_node": best["node_id"] if best else None,
        "best_score": best.get("score") if best else None,
        "screener_fallbacks": FallbackCount.of_run(st, info.run_id).fallbacks,
    }


def best_row(st, run_id: str) -> dict[str, Any] | None:
    rows = [r for r in st.node_rows(run_id) if r.get("fitness") is not None]
    return max(rows, key=lambda r: r["fitness"]) if rows else None


def peak_memory(st, run_id: str) -> dict[str, float | None]:
    """The largest peak host and GPU memory (MB) of the run's verifications (GPU: None for a CPU task)."""
    host, gpu = 0.0, None
    for ev in st.events(run_id, Verified):
        v = ev.record.verification
        host = max(host, float(v.peak_memory_mb or 0.0))
        if v.peak_gpu_memory_mb is not None:
            gpu = max(gpu or 0.0, float(v.peak_gpu_memory_mb))
    return {"host_mb": host, "gpu_mb": gpu}


def show_data(st, run_id: str, nodes: int) -> dict[str, Any]:
    info = st.run(run_id)
    b = st.budget(run_id)
    rows = [r for r in st.node_rows(run_id) if r.get("status") not in ("implemented",)]
    verified = sorted((r for r in rows if r.get("fitness") is not None), key=lambda r: -r["fitness"])
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    keep = ("node_id", "parent_id", "operator", "status", "score", "test_score", "idea")
    final = [e.record for e in st.events(run_id, Finalised)]
    submission = [e.record for e in st.events(run_id, Submitted)]
    card = run_card(st, run_id)
    return {
        "run_id": run_id,
        "task": info.task,
        "status": info.status,
        "budget": {**dataclasses.asdict(b), "gpu_seconds": gpu_seconds(st, run_id)},
        "peak_memory": peak_memory(st, run_id),
        "final": final[-1].payload() if final else None,
        "submission": submission_summary(submission[-1]) if submission else None,
        "statuses": dict(sorted(counts.items())),
        "best_nodes": [{k: r.get(k) for k in keep} for r in verified[:nodes]],
        "failed_nodes": failed_nodes(rows, nodes),
        "llm_calls": llm_calls(st, run_id),
        "reply_health": reply_health(st, run_id),
        "screener_audit": screener_audit(st, run_id),
        "screener_fallbacks": FallbackCount.of_run(st, run_id).to_dict(),
        **peers_data(st, run_id),
        "adapters": run_adapters(info.config, [e.record.learned for e in st.events(run_id, ScreenerLearned)]),
        "role_health": stored_role_health(e.record for e in st.events(run_id, NodeRecorded)),
        "transfer": transfer_data(st, run_id),
        "run_card": card,
        "stop_reason": stop_reason(st, run_id),
        "data_report": data_report_line(st, run_id),
        "memory": memory_line(info.config),
        "resolved": resolved_line(card["resolved"]),  # the card's pins, redacted
        "learned_critic": learned_critic_data(st, run_id, info.config),
    }


def failed_nodes(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The last ``n`` nodes (in creation order) whose paid verification gave no score: id, status and the stored
    reason (as ``export`` has it; ``show`` prints it as one clipped line)."""
    failed = [r for r in rows if r.get("status") in _BUGGY]
    return [{k: r.get(k) for k in ("node_id", "status", "reason")} for r in failed[-n:]] if n > 0 else []


_BUGGY = {s.value for s in Status if s.buggy}


def llm_calls(st, run_id: str) -> list[dict[str, Any]]:
    """``llm_usage`` rows, each with ``parsed``: ``{first, reminder, never}`` replies of that role and model."""
    parsing = reply_parsing(st, run_id)
    return [{**row, "parsed": parsing.get((str(row["role"]), str(row["model"])), {})} for row in st.llm_usage(run_id)]


def memory_line(config: dict[str, Any]) -> str:
    """How the run's search memory retrieved (from its stored configuration): off, or which rankings it fused."""
    engine, strategy = config.get("engine") or {}, config.get("strategy") or {}
    on = engine.get("memory")
    if on is None:
        on = strategy.get("name", "mcgs") == "mcgs"
    if not on:
        return "memory: off"
    embedder = str(engine.get("memory_embedder") or "auto")
    kind = DENSE_KINDS.get(embedder, "BM25 + the embedder 'auto' chose when the run started (not recorded)")
    return f"memory: on ({embedder}): {kind}"


def transfer_data(st, run_id: str) -> dict[str, Any]:
    """The baseline, the returned node and (when a final selection returned another node) the strategy's own pick
    on validation, the selection split and the hidden test, and the warning when the validation gain did not
    transfer (``FinalView.transfer_warning``)."""
    f = final_view(st, run_id)
    held = f.held_out
    return {
        "baseline": {
            "node_id": "root",
            "validation": f.baseline_score,
            "selection": f.baseline_selection_score,
            "test": f.baseline_test_score,
        },
        "final": {"node_id": f.node_id, "validation": f.score, "selection": f.selection_score, "test": f.test_score},
        "strategy_pick": dataclasses.asdict(f.strategy_pick) if f.strategy_pick else None,
        "selection_metric": f.selection_metric,
        "chosen_on_selection": {
            "pool": list(held.pool),
            "eligible": list(held.eligible),
            "winner": held.winner,
            "strategy_best": held.strategy_best,
        }
        if held
        else None,
        "warning": f.transfer_warning,
    }


def transfer_lines(data: dict[str, Any]) -> list[str]:
    """``show``'s lines for ``transfer_data``: the baseline, the returned node and the strategy's pick (when it is
    another node) side by side, how the selection split chose, then the warning if any."""
    held = data.get("selection_metric")
    nodes = [("baseline", data["baseline"]), ("returned", data["final"])]
    if data.get("strategy_pick"):
        nodes.append(("strategy's pick", data["strategy_pick"]))
    lines = [
        f"{label} {node['node_id']}: validation {number(node['validation'], 6)}"
        + (f" · selection split {number(node.get('selection'), 6)}" if held else "")
        + f" · hidden test {number(node['test'], 6)}"
        for label, node in nodes
    ]
    chosen = data.get("chosen_on_selection")
    if chosen:
        winner = chosen.get("winner", data["final"]["node_id"])
        lines.append(selection_line(winner, chosen["strategy_best"], len(chosen["pool"]), len(chosen["eligible"])))
    return lines + ([f"[yellow]warning:[/] {data['warning']}"] if data["warning"] else [])


def data_report_line(st, run_id: str) -> str:
    """One line about the run's data report: computed from which files, or what could not be computed."""
    stored = [e.record for e in st.events(run_id, DataReported)]
    return datareport.status_line(stored[-1] if stored else None)


def peers_data(st, run_id: str) -> dict[str, Any]:
    """The novelty gate's rates and the ensembles' shares (report/peers.py)."""

    rates = novelty_rates(st, run_id)
    return {
        "novelty": rates.to_dict() if rates else None,
        "ensembles": [m.to_dict() for m in model_shares(st, run_id)],
    }


def stop_reason(st, run_id: str) -> str | None:
    """Why a ``failed`` run stopped (stored with its status), or None."""
    statuses = [e.record for e in st.events(run_id, RunStatusChanged)]
    last = statuses[-1] if statuses else None
    return last.reason if last is not None and last.status == "failed" else None


def submission_summary(sub: Submitted) -> dict[str, Any]:
    """The ensemble submission's members, score and cost (evaluator seconds), without the member re-runs: its stored
    keys, None for those the stored event left out (``show --json`` has always shown them so)."""
    keys = ("members", "combined", "combine", "status", "reason", "score", "test_score", "seconds", "beats_final")
    stored = sub.payload()
    out = {k: stored.get(k) for k in keys}
    if stored.get("selection_score") is not None:  # only where the task holds a selection split out
        out["selection_score"] = stored["selection_score"]
    return out


def submission_line(sub: dict[str, Any]) -> str:
    """One line: the ensemble's members, validation score and cost, and whether it beats the final node."""
    if sub.get("status") == SKIPPED:
        return f"ensemble submission: skipped ({sub.get('reason')})"
    if sub.get("status") == UNSUPPORTED:
        return f"ensemble submission: none ({sub.get('reason')})"
    held = sub.get("selection_score")
    selection = "" if held is None else f" · selection split {number(held, 6)}"
    verdict: dict[Any, str] = {
        True: " (better than the final node)",
        False: " (worse than the final node: submit the node)",
    }
    return (
        f"ensemble submission: {sub['status']} · members {', '.join(sub.get('members') or [])} "
        f"({sub.get('combine')} of {len(sub.get('combined') or [])}) · validation {number(sub.get('score'), 6)}"
        f"{selection}{verdict.get(sub.get('beats_final'), '')} · cost {sub.get('seconds') or 0:.1f} evaluator s"
    )


def reply_health(st, run_id: str) -> dict[str, Any]:
    """Replies parsed / total per LLM screener (and the final round-robin), from the stored screenings."""

    finals = [e.record for e in st.events(run_id, FinalSelected)]
    return health_by_screener(
        (e.record.screening for e in st.events(run_id, Screened)), finals[-1].matches if finals else ()
    )


def peers_text(data: dict[str, Any]) -> list[str]:
    rates = data["novelty"]
    novelty = (
        NoveltyRates(*(rates[k] for k in ("checked", "rejected", "audited", "audited_improved"))) if rates else None
    )
    return peers_lines(novelty, [ModelShare(**m) for m in data["ensembles"]])


def print_show(data: dict[str, Any]) -> None:
    """``show``'s text: ``show_data``'s record as the run's header, its best nodes, and one line per finding."""
    b = data["budget"]
    console.print(f"[bold]{data['run_id']}[/]  task {shown(data['task'])}  status {data['status']}")
    if data["stop_reason"]:
        console.print(f"[red]stopped:[/] {shown(data['stop_reason'])}", highlight=False, soft_wrap=True)
    console.print(
        f"verifications {b['verifications']} · evaluator {b['evaluator_seconds']:.1f}s"
        + (f" · GPU {b['gpu_seconds']:.1f}s" if b.get("gpu_seconds") else "")
        + f" · tokens {b['tokens_in'] + b['tokens_out']} · cost {b['cost']:.4f}"
    )
    table = Table(box=None, header_style="bold")
    for col in ("node", "parent", "operator", "status", "validation", "test", "idea"):
        table.add_column(col)
    for r in data["best_nodes"]:
        table.add_row(
            r["node_id"],
            r.get("parent_id") or "",
            r["operator"],
            r["status"],
            number(r.get("score"), 6),
            number(r.get("test_score"), 6),
            shown((r.get("idea") or "")[:70]),
        )
    console.print(table)
    for line in transfer_lines(data["transfer"]):
        console.print(line, highlight=False, soft_wrap=True)
    console.print("statuses: " + ", ".join(f"{k} {v}" for k, v in data["statuses"].items()))
    for r in data["failed_nodes"]:  # the reason quotes the program's stderr: one clipped line, escaped, no markup
        line = f"  {r['node_id']} {r['status']}: {one_line(r.get('reason') or '(no reason stored)', REASON_CHARS)}"
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    peak = data["peak_memory"]
    gpu_peak = f", GPU {peak['gpu_mb']:.0f} MB" if peak["gpu_mb"] is not None else ""
    console.print(f"peak memory of a verification: host {peak['host_mb']:.0f} MB{gpu_peak}", highlight=False)
    console.print(data["data_report"], highlight=False, soft_wrap=True, markup=False)
    console.print(data["memory"], highlight=False, soft_wrap=True, markup=False)
    if data["resolved"]:
        console.print(data["resolved"], highlight=False, soft_wrap=True, markup=False)
    for a in data["adapters"]:  # the adapter each critic screened with, by the hash of its weights
        what = (
            f"{a['folder']} ({a['tag'] or 'folder gone'})" if "folder" in a else f"v{a['version']} from {a['origin']}"
        )
        console.print(f"adapter {a['role']}: {what}", highlight=False, markup=False)
    if data["submission"]:
        console.print(submission_line(data["submission"]), highlight=False)
    if data["llm_calls"]:
        calls = Table(box=None, header_style="bold", title="LLM calls")
        for col in ("role", "model", "calls", "cached", "tokens in", "tokens out", "cost", "seconds"):
            calls.add_column(col)
        parsed = any(c.get("parsed") for c in data["llm_calls"])
        if parsed:
            calls.add_column("parsed first/reminder/never")
        for c in data["llm_calls"]:
            shares = "/".join(str((c.get("parsed") or {}).get(k, 0)) for k in PARSE_OUTCOMES) if c.get("parsed") else ""
            calls.add_row(
                str(c["role"]),
                str(c["model"]),
                str(c["calls"]),
                str(c["cached"]),
                str(c["prompt_tokens"]),
                str(c["completion_tokens"]),
                f"{c['cost'] or 0:.4f}",
                f"{c.get('latency') or 0:.1f}",
                *([shares] if parsed else []),
            )
        console.print(calls)
    health = {**data["reply_health"], **data["role_health"]}
    if health:
        console.print(
            "replies parsed: "
            + ", ".join(f"{name} {h['parsed']}/{h['total']} ({100 * h['rate']:.0f}%)" for name, h in health.items())
        )
    if data["learned_critic"]:
        console.print(learned_critic_line(data["learned_critic"]), highlight=False, soft_wrap=True)
    if data["screener_audit"]:
        console.print(audit_line(data["screener_audit"]), highlight=False)
        if adaptive_line(data["screener_audit"]):
            console.print(adaptive_line(data["screener_audit"]), highlight=False)
    if fallback_line(**data["screener_fallbacks"]):
        console.print(f"[red]{fallback_line(**data['screener_fallbacks'])}[/]", highlight=False, soft_wrap=True)
    for line in peers_text(data):
        console.print(line, highlight=False)


__all__ = [
    "best_row",
    "data_report_line",
    "failed_nodes",
    "peers_data",
    "peers_text",
    "print_show",
    "reply_health",
    "run_row",
    "show_data",
    "stop_reason",
    "submission_line",
    "submission_summary",
    "selection_line",
    "transfer_data",
    "transfer_lines",
]
