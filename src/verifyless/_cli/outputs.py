"""``verifyless run --out DIR``: what a run returned, written where a person can use it.

``write_outputs`` writes ``DIR/<program file>`` (the final node's program, exactly as verified), ``DIR/submission/``
(that program's output files, e.g. a competition's ``submission.csv``: the program runs once more in the sandbox,
as a verification does, because verifications keep no outputs; that run is not charged to the run's budget) and
``DIR/config.yaml`` (the configuration in force, every ``config_update`` applied).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from verifyless.config import stored_config
from verifyless.sandbox.local import LocalSandbox
from verifyless.verify import verify

__all__ = ["write_outputs"]


async def write_outputs(engine: Any, st: Any, run_id: str, final_id: str | None, out: Path) -> str:
    """Write the run's returned program, its outputs and its configuration into ``out``; one line saying what."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(stored_config(st, run_id), sort_keys=False), encoding="utf-8")
    if final_id is None:
        return f"wrote {out}: config.yaml (the run returned no node)"
    task, program = engine.task, st.candidate(run_id, final_id).program
    (out / Path(task.program_file).name).write_text(program, encoding="utf-8")
    executor = engine.executor
    sandbox = getattr(executor, "sandbox", None) or LocalSandbox()
    with tempfile.TemporaryDirectory(prefix="verifyless-out-") as tmp:
        done = await asyncio.to_thread(
            verify,
            task,
            program,
            sandbox,
            workspace_root=Path(tmp),
            hide=tuple(Path(p) for p in executor.hide),
            keep_workspace=True,
        )
        produced = [ws / "out" for ws in Path(tmp).iterdir() if (ws / "out").is_dir()]
        if produced:
            shutil.copytree(produced[0], out / "submission", dirs_exist_ok=True)
    files = sorted(p.name for p in (out / "submission").iterdir()) if (out / "submission").is_dir() else []
    return (
        f"wrote {out}: {Path(task.program_file).name} (node {final_id}), submission/ ({', '.join(files) or 'no files'}; "
        f"re-run {done.status.value}, {done.run_seconds:.1f} s, not charged), config.yaml"
    )
