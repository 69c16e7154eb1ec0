"""Critic-dataset schema rows for the critic-data tests (no collection needed)."""

from __future__ import annotations

from typing import Any

from verifyless.critic_data.schema import SCHEMA_VERSION


def row(
    task: str,
    parent: str,
    child: str,
    label3: str,
    *,
    label5: str | None = None,
    source: str = "collect-sft",
    run_id: str = "r1",
    stratum: str | None = None,
    critique: str | None = None,
    delta: float = 0.0,
    parent_hash: str | None = None,
) -> dict[str, Any]:
    return {
        "example_id": f"{run_id}/{child}",
        "task": task,
        "run_id": run_id,
        "parent_id": parent,
        "child_id": child,
        "task_description": f"Maximise the score of {task}.",
        "understanding": "Tabular regression, small data.",
        "criteria": ["model capacity", "regularisation"],
        "parent_summary": f"parent {parent} of {task}",
        "child_summary": f"{child}: a changed model",
        "idea": f"idea of {child}",
        "parent_score": 1.0,
        "child_score": 1.0 + delta,
        "delta": delta,
        "higher_is_better": True,
        "label3": label3,
        "label5": label5,
        "critique": critique,
        "stratum": stratum,
        "schema_version": SCHEMA_VERSION,
        "source": source,
        "parent_hash": parent_hash if parent_hash is not None else f"h-{task}-{parent}",
        "child_hash": f"h-{child}",
        "created": "2026-12-01T00:00:00Z",
        "data_report": "",
    }


LABELS3 = ("improve", "tie", "lose")


def many(
    task: str, parents: int, children: int, *, source: str = "collect-sft", run_id: str = "r1", offset: int = 0
) -> list[dict[str, Any]]:
    out = []
    for p in range(parents):
        for c in range(children):
            lab = (
                LABELS3[(p + c) % 3]
                if source != "collect-grpo"
                else ("improve" if c % 4 == 0 else "lose" if c % 4 != 3 else "tie")
            )
            out.append(
                row(
                    task,
                    f"p{p + offset}",
                    f"p{p + offset}c{c}",
                    lab,
                    source=source,
                    run_id=run_id,
                    delta={"improve": 0.1, "tie": 0.0, "lose": -0.1}[lab],
                )
            )
    return out
