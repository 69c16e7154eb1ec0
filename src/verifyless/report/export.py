"""Trace export: every node of a run as one flat, versioned record (JSONL or Parquet).

``export_run(store, run_id, out, fmt)`` writes one row per node, in creation order, a companion
file of the run's LLM calls (``<out>.calls.jsonl`` / ``.calls.parquet``) and the run card (``<out>.card.json``). Both load with
``datasets.load_dataset("json" | "parquet", data_files=...)``; the schema (``SCHEMA_VERSION``) is
documented in docs/design/trace-export.md. OpenEvolve's ``evolution_trace`` is the anchor: lineage,
the idea, the code change, the evaluation, plus what verifyless adds (the neutral summary, the
screening evidence, costs).

What is never written: hidden test scores and metrics, unless ``include_test=True`` (the field is
then present; without it the field does not exist, so a consumer cannot read a null as a score),
and never a ``test_*`` / ``hidden_*`` key among the validation ``metrics`` (``task.base.HIDDEN_PREFIXES``);
API keys (the stored config is redacted by the store already, and calls carry no headers).
Columns whose content varies in shape (metrics, evidence, idea parameters) are JSON strings, so
every row has the same Arrow schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from verifyless.errors import ConfigError
from verifyless.events import LlmCalled
from verifyless.program import BandError, extract
from verifyless.report.views.card import run_card
from verifyless.report.views.nodes import node_details
from verifyless.task.base import HIDDEN_PREFIXES
from verifyless.task.home import load_run_task

__all__ = ["SCHEMA_VERSION", "Exported", "call_rows", "export_run", "node_rows"]

SCHEMA_VERSION = 1
Format = Literal["jsonl", "parquet"]


def node_rows(store: Any, run_id: str, *, include_test: bool = False) -> Iterator[dict[str, Any]]:
    """One export row per node (creation order); see the module docstring for what is left out."""
    info = store.run(run_id)
    band = _band(store, run_id)
    calls = _calls_by_node(store, run_id)
    for d in node_details(store, run_id):
        row: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "task": info.task,
            "node_id": d.id,
            "parent_id": d.parent_id,
            "reference_ids": list(d.reference_ids),
            "operator": d.operator,
            "round": d.round,
            "island": d.island,
            "status": d.status,
            "reason": d.reason,
            "tags": list(d.tags),
            "idea": d.idea,
            "summary": d.summary,
            "band": _band_text(d.program, band),
            "diff": "\n".join(line for _, line in d.diff),
            "score": d.score,
            "metrics": json.dumps(_validation(d.metrics), sort_keys=True, default=str),
            "screened_in": d.screened_in,
            "critiques": list(d.critiques),
            "screening_evidence": d.evidence,
            "verifications": len(d.logs),
            "evaluator_seconds": round(sum(log.seconds for log in d.logs), 6),
            "llm_calls": calls.get(d.id, []),
        }
        if include_test:
            hidden = {k: v for k, v in d.metrics.items() if k.startswith(HIDDEN_PREFIXES)}  # stored before quarantine
            row["test_score"] = d.test_score
            row["test_metrics"] = json.dumps({**hidden, **d.test_metrics}, sort_keys=True, default=str)
        yield row


def _validation(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The validation metrics, never a hidden-named key (a run stored before the loader's quarantine may hold
    undeclared ``test_*`` / ``hidden_*`` scorer keys among them)."""
    return {k: v for k, v in metrics.items() if not str(k).startswith(HIDDEN_PREFIXES)}


def call_rows(store: Any, run_id: str, *, inline: bool = False) -> Iterator[dict[str, Any]]:
    """Every ``llm_call`` event of the run: role, model, tokens, cost, prompt hash (+ prompt and reply if ``inline``)."""
    cached = _cache_rows(store, run_id) if inline else {}
    for ev in store.events(run_id, LlmCalled):
        p = ev.record
        row: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "seq": ev.seq,
            "node_id": ev.node_id,
            "role": str(p.role or ""),
            "model": str(p.model or ""),
            "prompt_hash": str(p.prompt_hash or ""),
            "prompt_tokens": int(p.prompt_tokens or 0),
            "completion_tokens": int(p.completion_tokens or 0),
            "cost": float(p.cost or 0.0),
            "cached": bool(p.cached),
            "error": str(p.error or ""),
        }
        if inline:
            request, replies = cached.get(row["prompt_hash"], ("", []))
            row["request"], row["replies"] = request, replies
        yield row


def export_run(
    store: Any,
    run_id: str,
    out: Path,
    fmt: Format = "jsonl",
    *,
    include_test: bool = False,
    inline_calls: bool = False,
) -> Exported:
    """Write the node trace to ``out``, the calls and the run card (``views.card.run_card``) beside it."""
    nodes = list(node_rows(store, run_id, include_test=include_test))
    calls = list(call_rows(store, run_id, inline=inline_calls))
    stem = out.name.removesuffix(out.suffix)
    calls_path = out.with_name(stem + f".calls{out.suffix or '.' + fmt}")
    card_path = out.with_name(stem + ".card.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = _write_parquet if fmt == "parquet" else _write_jsonl
    writer(nodes, out)
    writer(calls, calls_path)
    tmp = card_path.with_name(card_path.name + ".tmp")
    tmp.write_text(json.dumps(run_card(store, run_id), indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(card_path)
    return Exported(out, calls_path, card_path)


class Exported(NamedTuple):
    """The files ``export_run`` wrote."""

    nodes: Path
    calls: Path
    card: Path


def _write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pyarrow comes with the `data` extra (through `datasets`)
        raise ConfigError(
            "--format parquet needs pyarrow: pip install 'verifyless[data]', or use --format jsonl"
        ) from exc
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)


def _band(store: Any, run_id: str) -> Any:
    """The task's band, when the task still loads (a task folder gone from where the run was made only costs the band
    column)."""
    try:
        return load_run_task(store, run_id).band
    except Exception:  # noqa: BLE001 - an export never fails because the task folder moved
        return None


def _band_text(program: str, band: Any) -> str | None:
    if band is None or not program:
        return None
    try:
        return extract(program, band)
    except BandError:
        return None


def _calls_by_node(store: Any, run_id: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ev in store.events(run_id, LlmCalled):
        if ev.node_id:
            out.setdefault(ev.node_id, []).append(str(ev.record.prompt_hash or ""))
    return out


def _cache_rows(store: Any, run_id: str) -> dict[str, tuple[str, list[str]]]:
    """prompt hash -> (request JSON, reply texts) from the response cache, for the hashes this run's calls name.

    The cache is shared by the runs of a store (a reply is reused across runs), so it is joined on the
    prompt hash of the run's ``llm_call`` events rather than on a run id.
    """
    rows = store._read(
        "SELECT c.prompt_hash, c.request_json, c.choice_json FROM llm_cache c WHERE c.prompt_hash IN "
        "(SELECT DISTINCT json_extract(payload, '$.prompt_hash') FROM events WHERE run_id = ? AND kind = 'llm_call') "
        "ORDER BY c.prompt_hash, c.sample_index",
        (run_id,),
    )
    out: dict[str, tuple[str, list[str]]] = {}
    for digest, request, choice in rows:
        _, replies = out.setdefault(str(digest), (str(request), []))
        replies.append(_reply_text(choice))
    return out


def _reply_text(choice_json: str) -> str:
    try:
        choice = json.loads(choice_json)
    except (TypeError, ValueError):
        return str(choice_json)
    message = choice.get("message") if isinstance(choice, dict) else None
    return str((message or {}).get("content") or choice.get("text") or "") if isinstance(choice, dict) else str(choice)
