"""``RunState`` from a snapshot older than some of its fields: each missing field gets its default on unpickling."""

from __future__ import annotations

import pickle

from verifyless.ledger.fold import RunState
from verifyless.screen.base import FallbackCount


class _Older(RunState):
    """A ``RunState`` pickled without the fields added after the first snapshots (as an old snapshot holds it)."""

    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in {"low_fidelity", "data_report", "fallbacks"}}
        return (RunState.__new__, (RunState,), state)


def test_a_snapshot_older_than_a_field_unpickles_with_its_default():
    state = _Older()
    state.rounds_done = 7
    restored = pickle.loads(pickle.dumps(state))
    assert type(restored) is RunState and restored.rounds_done == 7
    assert restored.low_fidelity == {} and restored.low_fidelity_result("h", "smoke", "quick") is None
    assert restored.data_report is None and restored.data_report_text() == ""
    assert isinstance(restored.fallbacks, FallbackCount)
    fresh = pickle.loads(pickle.dumps(RunState()))
    assert fresh.__dict__.keys() == restored.__dict__.keys()
