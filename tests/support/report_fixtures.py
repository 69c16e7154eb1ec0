"""Fixture run stores for the report and dashboard tests, made by the real engine.

Scripted LLM roles (``examples/scripted/circle_packing.yaml``) on the built-in
``circle_packing`` task, the critic screener, the local sandbox and the SQLite
store. ``hostile_script`` rewrites the script so that ideas, summaries,
critiques and the programs' stdout/stderr carry markup payloads that call
``window.__xss(...)`` if they ever run.

Also runnable: ``python tests/support/report_fixtures.py live STORE GATE`` starts a
run that pauses after the baseline's verification until the file GATE exists
(the browser test uses it to watch progress advance deterministically).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.store import RunStore
from verifyless.store.readonly import open_readonly
from verifyless.store.records import Charge

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "scripted" / "circle_packing.yaml"
PAYLOADS = (
    '<script>window.__xss && window.__xss("script")</script>',
    "<img src=x onerror=\"window.__xss && window.__xss('onerror')\">",
    "<svg onload=\"window.__xss && window.__xss('svg')\"></svg>",
)
SECRET = "sk-report-test-SECRET-0123456789abcdef"


def overrides(store: Path, script: Path, budget: int) -> list[str]:
    return [
        "task=circle_packing",
        "screener.name=critic",
        "screener.options.k=4",
        f"budget.verifications={budget}",
        "engine.candidates=3",
        "strategy.name=greedy",
        "strategy.options.num_drafts=1",
        f"store={store}",
        "roles.kind=llm",
        f"roles.models.default=scripted:{script}",
    ]


def hostile_script(folder: Path) -> Path:
    """A copy of the circle-packing script whose model- and program-produced text carries markup payloads."""
    data = yaml.safe_load(SCRIPT.read_text())
    payload = " ".join(PAYLOADS)
    for rule in data["rules"]:
        role = rule.get("role")
        if role == "proposer":
            rule["replies"] = [f"{r} {payload}" for r in rule["replies"]]
        elif role == "summarizer":
            rule["reply"] = f"{rule['reply']} {payload}"
        elif role == "critic":
            rule["replies"] = [f"{payload}\n{r}" for r in rule["replies"]]
        elif role in ("implementer", "repair"):
            rule["replies"] = [_printing(r) for r in rule["replies"]]
    out = folder / "hostile.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _printing(reply: str) -> str:
    """Make the program print the payloads to stdout and stderr when it is imported."""
    code = "import sys as _sys\n" + "".join(f"print({p!r})\nprint({p!r}, file=_sys.stderr)\n" for p in PAYLOADS)
    return reply.replace("```python\n", "```python\n" + code, 1)


async def _run(store_path: Path, over: list[str], progress: Any = None) -> str:
    from verifyless.config import load_config
    from verifyless.store import RunStore
    from verifyless.wiring import build_engine

    cfg = load_config(overrides=over)
    with RunStore(store_path) as store:
        engine = build_engine(cfg, store, progress=progress)
        try:
            result = await engine.run()
        finally:
            engine.executor.close()
    return result.run_id


def build(folder: Path) -> dict[str, Any]:
    """Two finished runs (plain and hostile) plus a run whose config holds a fake API key; returns their ids."""
    store = folder / "fixture.db"
    plain = asyncio.run(_run(store, overrides(store, SCRIPT, 3)))
    hostile = asyncio.run(_run(store, overrides(store, hostile_script(folder), 2)))
    from verifyless.store import RunStore

    with RunStore(store) as st:
        secret = st.create_run(
            "circle_packing",
            {"roles": {"api_key": SECRET, "models": {"default": "openai:x"}}, "note": f"Bearer {SECRET}"},
        )
    return {"store": store, "plain": plain, "hostile": hostile, "secret": secret}


_CACHE: dict[str, dict[str, Any]] = {}


def cached_build(tmp_path_factory: Any) -> dict[str, Any]:
    """``build`` once per test session (several test modules share the stores; they must not write to them)."""
    if "built" not in _CACHE:
        _CACHE["built"] = build(tmp_path_factory.mktemp("report-fixture"))
    return _CACHE["built"]


class _Gate:
    """Progress hook that holds the run after the baseline's verification until ``gate`` exists (at most 60 s)."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "verification" and data.get("node_id") == "root":
            deadline = time.monotonic() + 60
            while not self.gate.exists() and time.monotonic() < deadline:
                time.sleep(0.05)


if __name__ == "__main__" and sys.argv[1:2] == ["live"]:
    store_arg, gate_arg = Path(sys.argv[2]), Path(sys.argv[3])
    print(asyncio.run(_run(store_arg, overrides(store_arg, SCRIPT, 3), progress=_Gate(gate_arg))), flush=True)


def _candidate(st, run_id, cid, parent, program, refs=()):
    operator = Operator.REFERENCE if refs else Operator.IMPROVE
    st.add_candidate(
        run_id,
        Candidate(
            cid,
            parent,
            operator,
            Idea(f"idea {cid}"),
            program,
            content_hash(program),
            summary=f"summary {cid}",
            reference_ids=tuple(refs),
            round=1,
        ),
    )


def _verify(st, run_id, cid, score, program):
    st.add_verification(
        run_id,
        cid,
        Verification(
            Status.OK,
            metrics={"m": score},
            score=score,
            test_score=score - 1,
            run_seconds=1.0,
            program_hash=content_hash(program),
        ),
        score,
    )


def _with_submission(path):
    with RunStore(path) as st:
        rid = st.create_run("not-a-task", {"screener": {"name": "critic"}, "strategy": {"name": "mcgs"}})
        for cid, score in (("root", 1.0), ("c1", 2.0)):
            _candidate(st, rid, cid, None if cid == "root" else "root", f"a = {cid!r}\n")
            _verify(st, rid, cid, score, f"a = {cid!r}\n")
        st.append(rid, "final", {"node_id": "c1", "stopped": "budget"})
        submission = {
            "members": ["c1", "root"],
            "combined": ["c1", "root"],
            "status": "ok",
            "reason": "",
            "score": 2.5,
            "test_score": 2.25,
            "seconds": 3.5,
            "combine": "mean",
            "metrics": {"m": 2.5},
            "test_metrics": {"m": 2.25},
            "member_runs": [],
        }
        st.append(rid, "submission", submission, charge=Charge(evaluator_seconds=3.5))
    return rid


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """``(built, store)``: the runs of ``cached_build`` and a read-only store on them, once per test module."""
    built = cached_build(tmp_path_factory)
    with open_readonly(built["store"]) as st:
        yield built, st
