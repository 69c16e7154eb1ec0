"""``stored_role_health`` reads a run's stored ``node`` records (issue 48: typed event records)."""

from __future__ import annotations

from verifyless.engine.health import stored_role_health
from verifyless.events import NodeRecorded
from verifyless.node import Status


def stored(node_id: str, idea: str, status: str | None) -> NodeRecorded:
    """A ``node`` event as the store reads it back (payload keys as the ledger writes them)."""
    payload = {"id": node_id, "parent_id": "root", "operator": "improve", "idea": {"text": idea}, "program_hash": ""}
    return NodeRecorded.parse(payload if status is None else {**payload, "status": status})


def test_role_health_counts_children_and_skips_the_root_repairs_model_errors_and_status_less_nodes() -> None:
    records = [
        stored("root", "", Status.OK.value),
        stored("n1", "try ridge", Status.OK.value),  # implementer parsed (so did the proposer)
        stored("n2", "try lasso", Status.PARSE_ERROR.value),  # implementer did not parse
        stored("n3", "", Status.PARSE_ERROR.value),  # the proposal never parsed
        stored("n1f1", "try ridge", Status.PARSE_ERROR.value),  # a repair: not a reply of its own
        stored("n4", "try trees", Status.MODEL_ERROR.value),  # the endpoint failed: no reply
        stored("n5", "try knn", None),  # no status stored
    ]
    assert stored_role_health(records) == {
        "proposer": {"parsed": 2, "total": 3, "rate": 2 / 3},
        "implementer": {"parsed": 1, "total": 2, "rate": 0.5},
    }


def test_a_run_whose_model_made_nothing_that_verified_says_so_in_one_line() -> None:
    from verifyless.engine.health import weak_model_line

    made = {"root": Status.OK, "n1": Status.PARSE_ERROR, "n2": Status.GUARD_FAILED, "n3": Status.PARSE_ERROR}
    line = weak_model_line(made, llm=True)
    assert line is not None and "\n" not in line
    assert line.startswith("no child the model wrote verified ok (3 made: 2 parse-error, 1 guard-failed)")
    assert weak_model_line({**made, "n4": Status.OK}, llm=True) is None  # one child verified: useful
    assert weak_model_line(made, llm=False) is None  # the idea-space roles are not a model
    assert weak_model_line({"root": Status.OK}, llm=True) is None  # nothing made yet: nothing to judge
