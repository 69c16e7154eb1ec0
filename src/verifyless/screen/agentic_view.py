"""What the agentic RPM shows its models: candidates, context nodes, the workspace and the device.

* ``CandidateView.describe``: each candidate as its plan plus its program
  (``show="code"``, the paper's judges saw code) or plan plus neutral summary
  (``show="summary"``); programs longer than ``program_chars`` are cut (the
  full file is in the pilot workspace).
* ``CandidateView.context``: executed, non-buggy solutions found by BFS from
  the parent (parent first when it qualifies), each with its validation score
  and program, added nearest first while the running total stays within
  ``context_tokens`` (estimated as characters / 4). The first node that does
  not fit ends the list, so K is "as many as fit". Program text comes from
  ``ScreenContext.program_of``; without it (or when it fails for a node) the
  node is shown by its summary or idea.
* ``detect_device``: the hardware line of the prompts and pilot records.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from verifyless.node import Candidate, Node, Status
from verifyless.screen.base import ScreenContext
from verifyless.task.base import Limits, Task

SHOW_MODES = ("code", "summary")
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class CandidateView:
    """How candidates and context nodes are rendered (see module doc)."""

    show: str = "code"
    program_chars: int = 12000
    context_tokens: int = 8000

    def describe(self, task: Task, candidates: Sequence[Candidate], *, plan_only: bool = False) -> str:
        suffix = Path(task.program_file).suffix or ".py"
        parts = []
        for i, cand in enumerate(candidates, 1):
            lines = [f"### Candidate {i} (file candidate_{i}{suffix})", f"Plan: {cand.idea.text.strip() or '(none)'}"]
            if not plan_only:
                if self.show == "code":
                    lines.append("Program:\n```\n" + _clipped(cand.program, self.program_chars) + "\n```")
                elif cand.summary.strip():
                    lines.append(f"Summary: {cand.summary.strip()}")
            parts.append("\n".join(lines))
        return "\n\n".join(parts)

    def context(self, ctx: ScreenContext) -> list[tuple[str, str]]:
        """``[(node id, rendered text)]`` of the context nodes that fit the token budget."""
        out: list[tuple[str, str]] = []
        budget = self.context_tokens * CHARS_PER_TOKEN
        for node in bfs_executed(ctx):
            text = self._render_node(ctx, node, len(out) + 1)
            if len(text) > budget:
                break
            budget -= len(text)
            out.append((node.id, text))
        return out

    def _render_node(self, ctx: ScreenContext, node: Node, number: int) -> str:
        head = f"### Solution {number} (validation {ctx.task.metric.name}: {node.score:.6g})"
        plan = node.idea.strip() or "(no stated plan)"
        program = None
        if ctx.program_of is not None:
            try:
                program = ctx.program_of(node.id)
            except (KeyError, LookupError, OSError):
                program = None
        if program:
            return f"{head}\nPlan: {plan}\nProgram:\n```\n{_clipped(program, self.program_chars)}\n```"
        summary = ctx.summaries.get(node.id, "").strip()
        return f"{head}\nPlan: {plan}" + (f"\nSummary: {summary}" if summary else "")


def bfs_executed(ctx: ScreenContext) -> Iterator[Node]:
    """OK nodes with a validation score, in BFS order over parent and child edges from the parent.

    The walk passes through buggy nodes (a good grandchild of a crash is still
    reached) but yields only usable ones; the parent comes first when it qualifies.
    """
    start = ctx.parent.id
    if start is None or start not in ctx.nodes:
        return
    children: dict[str, list[str]] = {}
    for node in ctx.nodes.values():  # insertion order: deterministic neighbour order
        if node.parent_id is not None:
            children.setdefault(node.parent_id, []).append(node.id)
    seen = {start}
    queue = deque([start])
    while queue:
        node = ctx.nodes[queue.popleft()]
        if node.status is Status.OK and node.score is not None:
            yield node
        for nid in ([node.parent_id] if node.parent_id else []) + children.get(node.id, []):
            if nid in ctx.nodes and nid not in seen:
                seen.add(nid)
                queue.append(nid)


def format_context_nodes(context: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join(text for _, text in context) if context else "(no executed solutions to show)"


def _clipped(program: str, limit: int) -> str:
    text = program.rstrip("\n")
    if len(text) > limit:
        text = text[:limit] + "\n... (truncated; the full program is in the workspace)"
    return text


# ---------------------------------------------------------------------- workspace and parent


def prepare_workspace(ctx: ScreenContext, candidates: Sequence[Candidate], root_dir: Path | None) -> Path:
    """A fresh scratch folder: ``public/`` copies, candidate programs, the parent and an empty ``out/``."""
    task = ctx.task
    root = Path(tempfile.mkdtemp(prefix="verifyless-pilots-", dir=root_dir))
    public = root / "public"
    public.mkdir()
    for path in task.public_data:
        if path.is_dir():
            shutil.copytree(path, public / path.name)
        elif path.exists():
            shutil.copy2(path, public / path.name)
    suffix = Path(task.program_file).suffix or ".py"
    for i, cand in enumerate(candidates, 1):
        (root / f"candidate_{i}{suffix}").write_text(cand.program, encoding="utf-8")
    if ctx.parent.program:
        (root / f"parent{suffix}").write_text(ctx.parent.program, encoding="utf-8")
    if task.evaluator_in_sandbox and task.evaluator is not None and task.evaluator.exists():
        shutil.copy2(task.evaluator, root / "evaluator.py")
    (root / "out").mkdir()
    return root


def describe_workspace(root: Path) -> str:
    entries = []
    for path in sorted(root.iterdir()):
        if path.is_dir():
            inner = sorted(p.name for p in path.iterdir())
            shown = ", ".join(inner[:20]) + (" ..." if len(inner) > 20 else "")
            entries.append(f"- {path.name}/" + (f" ({shown})" if shown else " (empty)"))
        else:
            entries.append(f"- {path.name}")
    return "\n".join(entries)


def describe_parent(ctx: ScreenContext) -> str:
    parts = []
    if ctx.parent.score is not None:
        parts.append(f"Validation score of the parent: {ctx.parent.score:.6g}")
    if ctx.parent.summary.strip():
        parts.append(ctx.parent.summary.strip())
    return "\n".join(parts) or "(no parent information)"


# ---------------------------------------------------------------------- device


def detect_device(limits: Limits) -> str:
    """The hardware pilots run on, in words: the GPUs found, else the CPU core count, plus per-pilot limits.

    GPUs are found with ``nvidia-smi`` when it is on PATH, else with
    ``torch.cuda`` when torch is installed. Whether a pilot can use a GPU also
    depends on the sandbox backend exposing the device nodes.
    """
    gpus = gpu_names()
    cores = _cpu_cores()
    per_pilot = f"each pilot limited to {limits.threads} CPU thread(s) and {limits.memory_mb} MB of memory"
    if gpus:
        return f"GPU: {', '.join(gpus)}; {cores} CPU core(s); {per_pilot}"
    return f"CPU only ({cores} core(s), no GPU); {per_pilot}"


@lru_cache(maxsize=1)
def gpu_names() -> tuple[str, ...]:
    """Names of the visible NVIDIA GPUs (cached for the process; empty when there are none)."""
    if shutil.which("nvidia-smi"):
        try:
            done = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0:
            names = tuple(line.strip() for line in done.stdout.splitlines() if line.strip())
            if names:
                return names
    return _torch_gpus()


def _torch_gpus() -> tuple[str, ...]:
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
        return ()
    try:
        import torch

        if not torch.cuda.is_available():
            return ()
        return tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    except Exception:  # a broken CUDA install is "no GPU" for the prompt, not a crash
        return ()


def _cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


__all__ = [
    "CandidateView",
    "SHOW_MODES",
    "bfs_executed",
    "describe_parent",
    "describe_workspace",
    "detect_device",
    "format_context_nodes",
    "gpu_names",
    "prepare_workspace",
]
