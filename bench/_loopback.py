"""Shared pieces of the overhead benchmark: the scripted replies and a timed loopback server.

``InstantResponder`` answers every prompt the three frameworks send, at once,
with something each one accepts, and gives every new program a fresh
``VALUE`` so no framework discards a child as a duplicate. It recognises a
request by the reply format the prompt asks for, not by who sent it:

* verifyless roles: brief (``[TASK UNDERSTANDING]``), critic
  (``[IMPROVEMENT]``), summarizer (``120 to 200 words``), implementer or
  repair (a fenced block with the new band), proposer (``## Approach``);
* ShinkaEvolve: ``<NAME>``/``<DESCRIPTION>`` with either ``<CODE>`` (full
  rewrite, crossover) or SEARCH/REPLACE blocks (diff);
* OpenEvolve: SEARCH/REPLACE blocks (diff mode) or a full program in a
  fenced block (rewrite mode).

Diff replies must quote the parent's band verbatim, so the current ``VALUE``
is read from the prompt's "Current program" section (the last one). Replies
are produced with the standard library only and ``busy_seconds`` adds up the
time spent producing them, which the benchmark subtracts from wall time as
"LLM server time".
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

VALUE_RE = re.compile(r"^VALUE = (-?\d+)\s*$", re.MULTILINE)
CURRENT_RE = re.compile(r"^#+ *current program\s*$", re.IGNORECASE | re.MULTILINE)

# Between 120 and 200 words, neutral and descriptive, as the summarizer prompt asks.
_SUMMARY = (
    "The program defines a single module level constant named VALUE inside its editable band and a fixed helper "
    "function, score_value, outside the band. The helper converts the constant to a floating point number and adds "
    "one, so the reported score is always positive and grows linearly with the constant. There is no data loading, "
    "no model, no training loop and no preprocessing: the evaluator imports the file, calls the helper once and "
    "returns the resulting number as the main metric together with the time it spent. The edit in this version "
    "changes only the integer assigned to the constant, setting it to {value}. All names, signatures and return "
    "types used by the fixed part of the file stay exactly as they were, the file has no side effects at import "
    "time, and it needs no third party libraries. Execution is deterministic, uses a single thread and finishes in "
    "well under a millisecond, so memory use and run time are negligible compared to the limits of the task."
)

_BRIEF = """[TASK UNDERSTANDING]
Modality: none; a synthetic benchmark task with a single number.
Metric: combined_score, higher is better.
Data: none; the evaluator imports the program and calls score_value().
Submission interface: the band must assign an integer to VALUE.
Constraints: instant evaluation, standard library only.

[CRITERIA]
1. Value - a larger integer assigned to VALUE.
2. Interface - VALUE stays a module-level integer.
3. Fixed region - nothing outside the band changes.
4. Import safety - the file has no side effects when imported.
"""

_CRITIC = "[IMPROVEMENT] improve --- the constant is larger than the parent's\n[WINTIER] small --- one step up\n"


class InstantResponder:
    """Callable ``ModelRequest -> str`` for ``TestServer``; thread-safe; counts replies by kind."""

    def __init__(self, program_template: str) -> None:
        if not VALUE_RE.search(program_template):
            raise ValueError("the program template must hold a line 'VALUE = <int>' inside its band")
        self.template = program_template
        self.kinds: Counter[str] = Counter()
        self.busy_seconds = 0.0
        self._next = 0
        self._lock = threading.Lock()

    # -- accounting ------------------------------------------------------------
    def snapshot(self) -> tuple[float, dict[str, int]]:
        with self._lock:
            return self.busy_seconds, dict(self.kinds)

    def _fresh_value(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    # -- answering -------------------------------------------------------------
    def __call__(self, request: Any) -> str:
        started = time.perf_counter()
        system = "\n".join(m.content for m in request.messages if m.role == "system")
        user = "\n".join(m.content for m in request.messages if m.role != "system")
        kind, text = self._reply(system, user)
        with self._lock:
            self.kinds[kind] += 1
            self.busy_seconds += time.perf_counter() - started
        return text

    def _reply(self, system: str, user: str) -> tuple[str, str]:
        everything = system + "\n" + user
        if "[TASK UNDERSTANDING]" in everything and "[CRITERIA]" in everything:
            return "vl-brief", _BRIEF
        if "[IMPROVEMENT]" in everything:
            return "vl-critic", _CRITIC
        if "120 to 200 words" in everything:
            return "vl-summary", _SUMMARY.format(value=self._current_value(user))
        if "<NAME>" in system:
            return self._shinka(system, user)
        if "SEARCH/REPLACE" in everything:
            return "openevolve-diff", self._diff(user)
        if "editable band" in system.lower():  # verifyless implementer and repair
            return "vl-implement", f"```python\nVALUE = {self._fresh_value()}\n```\n"
        if "## Approach" in everything:
            value = self._fresh_value()
            return "vl-propose", f"## Approach\nSet VALUE to {value}, a larger constant, so score_value() rises.\n"
        if "program" in everything.lower():  # OpenEvolve full rewrite and anything else asking for code
            return "full-rewrite", f"```python\n{self._program(self._fresh_value())}```\n"
        return "unknown", "I have nothing to add."

    def _shinka(self, system: str, user: str) -> tuple[str, str]:
        value = self._fresh_value()
        head = f"<NAME>\nvalue_{value}\n</NAME>\n\n<DESCRIPTION>\nSet VALUE to {value}.\n</DESCRIPTION>\n\n"
        if "<CODE>" in system:
            return "shinka-full", head + f"<CODE>\n```python\n{self._program(value)}```\n</CODE>\n"
        current = self._current_value(user)
        return "shinka-diff", head + _search_replace(current, value)

    def _diff(self, user: str) -> str:
        return _search_replace(self._current_value(user), self._fresh_value())

    def _current_value(self, text: str) -> int:
        """VALUE of the program under a "Current program" heading (the last one), else the last VALUE seen."""
        heads = list(CURRENT_RE.finditer(text))
        found = VALUE_RE.search(text, heads[-1].end()) if heads else None
        if found is None:
            found = next(reversed(list(VALUE_RE.finditer(text))), None)
        return int(found.group(1)) if found else 0

    def _program(self, value: int) -> str:
        return VALUE_RE.sub(f"VALUE = {value}", self.template, count=1)


def _search_replace(old: int, new: int) -> str:
    return f"<<<<<<< SEARCH\nVALUE = {old}\n=======\nVALUE = {new}\n>>>>>>> REPLACE\n"


def start_server(task_dir: Path):
    """A started ``TestServer`` (caller stops it) answering with an ``InstantResponder`` for ``task_dir``."""
    from verifyless.model.testserver import TestServer

    responder = InstantResponder((Path(task_dir) / "initial_program.py").read_text())
    return TestServer(responder).start(), responder
