"""The live progress line of ``verifyless run``: budget bar, ETA, best score, parse rates and the screener's audit;
a line per verification with its score, or, when it failed, its reason (one clipped line, control characters
escaped: it quotes the program's stderr)."""

from __future__ import annotations

import datetime
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from verifyless._cli.terminal import shown
from verifyless.events import RoundStarted, Screened, ScreenerFellBack, ScreenerLearned, Verified, WarmStarted
from verifyless.report.text import one_line
from verifyless.screen.audit import LiveAudit, audit_segment, state_change_lines
from verifyless.screen.health import reply_stats

REASON_CHARS = 100  # a failed verification's reason on its progress line and in ``show``: one short line


class _TwoLines(Progress):
    """rich's ``Progress`` drawing the description (round, parse rates, audit) on its own line, folded to the
    terminal's width, above the bar, count, best score and ETA: at 80 columns nothing is cut to an ellipsis."""

    def get_renderables(self) -> Any:
        for task in self.tasks:
            yield Text(task.description, style="bold", overflow="fold")
        yield self.make_tasks_table(self.tasks)


class LiveProgress:
    """A compact live line per event: round, budget used of its cap, an ETA, best validation score, latest verdicts.

    ``cap``: the run's verification cap (``budget.verifications``; None when only seconds or cost cap it), so
    the bar reads ``0/30`` from the start. The ETA is the mean wall time per verification so far times the
    verifications left. Once the cap is reached the bar says the run is choosing its final node (and, for
    ``mcgs`` with ``submit_ensemble``, scoring the ensemble submission), which the progress events do not cover.
    ``clock``: seconds, injectable for tests (default ``time.monotonic``).

    The ledger's and engine's progress tags for an event they just stored are that event's kind, so they are
    matched against the record classes' ``KIND``; ``start`` and ``resume`` are progress-only tags.
    """

    def __init__(self, out: Console, cap: int | None = None, clock: Any = None) -> None:
        self.out = out
        self.cap = cap
        self.clock = clock or time.monotonic
        self.started = self.clock()
        self.bar = _TwoLines(
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=out,
            transient=True,
            get_time=self.clock,
        )
        self.task_id: Any = None  # rich's TaskID once started
        self.audit = ""  # the adaptive screener's live audit (screen/audit.audit_segment), from its last screening
        self.live = LiveAudit()  # any screener's: its picks' scores against their paid labels
        self.finish = "budget spent: choosing the final node"
        self.fallbacks = ""  # " · screener fell back 2/5" once the screener's endpoint failed (engine/fallback.py)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "start":
            self.out.print(f"run [bold]{data['run_id']}[/] on task [bold]{shown(data['task'])}[/]")
            self.started = self.clock()
            self.bar.start()
            self.task_id = self.bar.add_task("verifications", total=self.cap, info="", count=self._count(0), eta="")
            return
        if kind == WarmStarted.KIND:  # the composition root's one line about critic-rm's starting head
            self.out.print(data["line"], highlight=False, soft_wrap=True)
            return
        if kind == "resume":
            paid = f"{data['verifications']} of {data['cap']}" if data.get("cap") is not None else data["verifications"]
            self.out.print(f"resuming at round {data['round']}: {paid} verifications paid", highlight=False)
            return
        budget = data.get("budget") or {}
        if self.task_id is not None and budget:
            self._update(budget)
        if kind == ScreenerLearned.KIND:
            for line in state_change_lines(data):
                self.out.print(f"  {line}", highlight=False, soft_wrap=True)
        if kind == ScreenerFellBack.KIND:
            self.fallbacks = f" · screener fell back {data['fallbacks']}/{data['screenings']}"
            self.out.print(  # the reason is in the stored event and the library's WARNING
                f"  r{data['round']} screener fell back to a seeded random pick "
                f"({data['fallbacks']} of {data['screenings']} screenings so far)",
                highlight=False,
            )
        if kind == RoundStarted.KIND and self.task_id is not None:
            short = _replies_text(data.get("replies"))
            audit = self.audit or self.live.segment()
            self.bar.update(self.task_id, description=f"round {data['round']}{short}{self.fallbacks}{audit}")
        elif kind == Verified.KIND:
            self.live.verification(data)
            score = data.get("score")
            outcome = f"{score:.6g}" if score is not None else one_line(data.get("reason") or "", REASON_CHARS)
            self.out.print(
                f"  verified {data['node_id']:<10} {data['status']:<18} {outcome}", highlight=False, markup=False
            )
        elif kind == Screened.KIND:
            self.live.screening(data)
            ev = data.get("evidence", {})
            chosen = data.get("chosen", [])
            if chosen and chosen[0] in ev:
                e = ev[chosen[0]]
                self.audit = audit_segment((e.get("detail") or {}).get("adaptive"))
                votes = ", ".join(f"{k} {v:.2f}" for k, v in (e.get("votes") or {}).items())
                extra = f"  ({votes}, u={e.get('uncertainty', 1.0):.2f})" if votes else ""
                replies = reply_stats(ev)
                if replies.total:
                    extra += f"  replies parsed {replies.parsed}/{replies.total}"
                self.out.print(
                    f"  r{data['round']} {data['screener']}: chose {', '.join(chosen)}{extra}", highlight=False
                )

    def _update(self, budget: dict[str, Any]) -> None:
        best = budget.get("best")
        done = int(budget.get("verifications", 0) or 0)
        self.cap = budget.get("cap", self.cap)
        self.bar.update(
            self.task_id,
            completed=done,
            total=self.cap,
            count=self._count(done),
            info=f"best {best:.5g}" if best is not None else "",
        )
        task = self.bar.tasks[0]
        if self.cap is not None and done >= self.cap:
            self.bar.update(self.task_id, description=self.finish, eta="")
        else:
            self.bar.update(self.task_id, eta=self.eta(task))

    def _count(self, done: int) -> str:
        return f"{done}/{self.cap}" if self.cap is not None else f"{done} verified"

    def eta(self, task: Any) -> str:
        """``ETA h:mm:ss`` from the mean time per verification so far; '' before the first or without a cap."""
        done = int(task.completed)
        if self.cap is None or done <= 0:
            return ""
        left = max(0, self.cap - done) * (self.clock() - self.started) / done
        return f"ETA {datetime.timedelta(seconds=round(left))}"

    def close(self) -> None:
        self.bar.stop()


def _replies_text(replies: dict[str, Any] | None) -> str:
    """`` · implementer parsed 3/10`` for each child-making role whose replies fell short (all parsed: nothing)."""
    short = {role: h for role, h in (replies or {}).items() if h["parsed"] < h["total"]}
    return "".join(f" · {role} parsed {h['parsed']}/{h['total']}" for role, h in short.items())


__all__ = ["LiveProgress"]
