"""LLM calls for the dashboard: each ``llm_call`` event with its prompt and replies, and the calls that made a node.

The engine records a call as an ``llm_call`` event (role, model, prompt hash,
tokens, cost, cached) without a node id; the prompt and the replies live in the
response cache's ``llm_cache`` table of the same SQLite file (one row per
sample, keyed by the full request identity). Nothing here writes; the link is
derived from what is already stored:

* **event -> cache entry.** The rows of one request identity (same prompt hash
  and settings, samples ``0..n-1``) form a group. Events are taken in seq order;
  each takes the earliest group with its prompt hash that was written during
  this run (``created_at`` between the run's first event and the call's own
  event) and that no earlier event took. A call with no such group (a cache hit
  on an entry written before, or by an earlier call) shows the latest group
  written before it. A call whose prompt is not in the cache (a cache in
  another file, a call that failed) shows its usage without text.
* **call -> node.** A call made the node when it lies in the node's round
  (after the ``round`` event that opened it, the run start for round 0, and
  before the next ``round`` event after the node's own ``node`` event) and
  states the node's idea text: a proposer in one of its replies (its prompt
  may quote earlier ideas as inspirations), any other role in its prompt or a
  reply. That covers the proposer, the implementer, repair and summarizer
  (their prompts state the idea) and critics whose prompt quotes it. A role
  whose call was skipped (a summary reused for a program seen before) is
  simply absent.

Limits: a node whose idea text is shorter than ``MIN_IDEA`` characters gets no
calls (too unspecific to match); two runs of the same prompts written into one
store at the same time can swap prompt texts between their calls (usage is
always the event's own). Every prompt and reply string goes through ``redact``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verifyless.events import LlmCalled, NodeRecorded, RoundStarted
from verifyless.report.text import num, redact

MIN_IDEA = 12


@dataclass(frozen=True)
class CallView:
    """One ``llm_call`` event with the prompt and replies the response cache holds for it."""

    seq: int
    role: str
    model: str
    prompt_hash: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    cached: bool
    latency_s: float
    n: int
    error: str
    messages: tuple[tuple[str, str], ...]  # (chat role, content); empty when the cache lacks the prompt
    replies: tuple[str, ...]  # one text per sample, in sample order


@dataclass(frozen=True)
class NodeCalls:
    """The calls that made one node, with their summed usage."""

    node_id: str
    calls: tuple[CallView, ...]
    prompt_tokens: int
    completion_tokens: int
    cost: float
    note: str  # why there are no calls, when there are none


@dataclass(frozen=True)
class _Group:
    created: float
    messages: tuple[tuple[str, str], ...]
    replies: tuple[str, ...]


def run_calls(store: Any, run_id: str) -> list[CallView]:
    """Every ``llm_call`` event of the run in seq order, joined with its cache entry (see module docstring)."""
    events = list(store.events(run_id, LlmCalled))
    groups = _cache_groups(store, {str(ev.record.prompt_hash or "") for ev in events})
    start = next(iter(store.events(run_id)), None)
    start_ts = start.ts if start is not None else 0.0
    taken: set[tuple[str, int]] = set()
    out = []
    for ev in events:
        p: LlmCalled = ev.record
        p_hash = str(p.prompt_hash or "")
        group = _take(p_hash, groups.get(p_hash, []), taken, start_ts, ev.ts)
        out.append(
            CallView(
                seq=ev.seq,
                role=str(p.role),
                model=str(p.model),
                prompt_hash=p_hash,
                prompt_tokens=int(p.prompt_tokens or 0),
                completion_tokens=int(p.completion_tokens or 0),
                cost=num(p.cost) or 0.0,
                cached=bool(p.cached),
                latency_s=num(p.latency_s) or 0.0,
                n=int(p.n or 1),
                error=str(p.error or ""),
                messages=group.messages if group else (),
                replies=group.replies if group else (),
            )
        )
    return out


def _take(p_hash: str, options: list[_Group], taken: set[tuple[str, int]], start_ts: float, ts: float) -> _Group | None:
    """The earliest untaken group written during the run before ``ts``; else the latest one written before ``ts``."""
    slack = 1.0  # seconds: the cache row and the event are written by one process, the row first
    for i, g in enumerate(options):
        if (p_hash, i) not in taken and start_ts - slack <= g.created <= ts + slack:
            taken.add((p_hash, i))
            return g
    before = [g for g in options if g.created <= ts + slack]
    return before[-1] if before else None


def _cache_groups(store: Any, hashes: set[str]) -> dict[str, list[_Group]]:
    """prompt hash -> its request identities' sample groups, oldest first (empty when the file has no cache)."""
    hashes.discard("")
    if not hashes or not _has_cache(store):
        return {}
    rows: list[tuple[Any, ...]] = []
    ordered = sorted(hashes)
    for i in range(0, len(ordered), 500):
        chunk = ordered[i : i + 500]
        rows += store._read(
            "SELECT prompt_hash, request_json, sample_index, choice_json, created_at FROM llm_cache "
            f"WHERE prompt_hash IN ({','.join('?' * len(chunk))}) ORDER BY created_at, rowid",
            tuple(chunk),
        )
    samples: dict[tuple[str, str], dict[int, str]] = {}
    created: dict[tuple[str, str], float] = {}
    for p_hash, request_json, index, choice_json, at in rows:
        key = (str(p_hash), str(request_json))
        samples.setdefault(key, {}).setdefault(int(index), _choice_text(choice_json))
        created.setdefault(key, float(at))
    out: dict[str, list[_Group]] = {}
    for key in sorted(samples, key=lambda k: created[k]):
        texts = samples[key]
        out.setdefault(key[0], []).append(
            _Group(created[key], _messages(key[1]), tuple(str(redact(texts[i])) for i in sorted(texts)))
        )
    return out


def _has_cache(store: Any) -> bool:
    return bool(store._read("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'llm_cache'", ()))


def _choice_text(choice_json: str) -> str:
    try:
        raw = json.loads(choice_json)
    except ValueError:
        return str(choice_json)
    text = str(raw.get("text") or "")
    calls = raw.get("tool_calls") or []
    if calls:
        text += "".join(f"\n[tool call {c.get('name')}] {c.get('arguments')}" for c in calls if isinstance(c, Mapping))
    return text


def _messages(request_json: str) -> tuple[tuple[str, str], ...]:
    try:
        messages = json.loads(request_json).get("messages") or []
    except (ValueError, AttributeError):
        return ()
    return tuple(
        (str(m.get("role", "")), str(redact(_content(m.get("content"))))) for m in messages if isinstance(m, Mapping)
    )


def _content(content: Any) -> str:
    """A message's text; multi-part contents are joined, non-text parts named."""
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", f"[{p.get('type', 'part')}]")) if isinstance(p, Mapping) else str(p) for p in content
        )
    return "" if content is None else str(content)


def node_calls(store: Any, run_id: str, node_id: str, calls: list[CallView] | None = None) -> NodeCalls:
    """The calls that made ``node_id`` (see module docstring); ``calls`` reuses a ``run_calls`` result."""
    row = next((r for r in store.node_rows(run_id) if r["node_id"] == node_id), None)
    return _node_calls(
        node_id, row or {}, _Rounds(store, run_id), calls if calls is not None else run_calls(store, run_id)
    )


def calls_by_node(store: Any, run_id: str, calls: list[CallView] | None = None) -> dict[str, NodeCalls]:
    """``node_calls`` of every node in creation order, reading the store once."""
    rounds = _Rounds(store, run_id)
    calls = run_calls(store, run_id) if calls is None else calls
    return {r["node_id"]: _node_calls(r["node_id"], r, rounds, calls) for r in store.node_rows(run_id)}


def _node_calls(node_id: str, row: Mapping[str, Any], rounds: _Rounds, calls: list[CallView]) -> NodeCalls:
    idea = " ".join(str(row.get("idea") or "").split())
    if len(idea) < MIN_IDEA:
        return NodeCalls(node_id, (), 0, 0, 0.0, "this node's idea is too short to find the calls that made it")
    low, high = rounds.window(node_id, int(row.get("round") or 0))
    mine = tuple(c for c in calls if low < c.seq < high and _mentions(c, idea))
    note = "" if mine else "no stored call in this node's round states its idea (or the calls' texts are not cached)"
    return NodeCalls(
        node_id,
        mine,
        sum(c.prompt_tokens for c in mine),
        sum(c.completion_tokens for c in mine),
        sum(c.cost for c in mine),
        note,
    )


class _Rounds:
    """The seqs of the run's ``round`` events and of each node's ``node`` event (read once)."""

    def __init__(self, store: Any, run_id: str) -> None:
        self.rounds = [(ev.seq, int(ev.record.round or 0)) for ev in store.events(run_id, RoundStarted)]
        self.made: dict[str, int] = {}
        for ev in store.events(run_id, NodeRecorded):  # only the seq and node id: the record is not parsed
            self.made.setdefault(str(ev.node_id), ev.seq)

    def window(self, node_id: str, round_no: int) -> tuple[int, float]:
        """(seq that opened the node's round, seq of the next ``round`` event after the node's ``node`` event)."""
        made = self.made.get(node_id)
        low, high = 0, float("inf")
        for seq, number in self.rounds:
            if number == round_no:
                low = seq
            elif made is not None and seq > made:
                high = seq
                break
        return low, high


def _mentions(call: CallView, idea: str) -> bool:
    prompt = [] if "propos" in call.role else [content for _, content in call.messages]
    texts = prompt + list(call.replies)
    return any(idea in " ".join(t.split()) for t in texts)


def last_seq(store: Any, run_id: str) -> int:
    """The run's last committed event seq (0 for none): a cheap marker to reuse derived views until it moves."""
    rows = store._read("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,))
    return int(rows[0][0] or 0) if rows else 0
