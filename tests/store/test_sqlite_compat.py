"""A store written by the previous release still opens, replays identically and resumes.

The fixture ``fixtures/store-0.1-diabetes-critic.db`` was written by verifyless 0.1.0 at commit
4b521f1's behaviour (before the one-kernel restructuring) with::

    verifyless run diabetes -c critic roles.kind=llm \
        roles.models.default=scripted:examples/scripted/diabetes.yaml --budget 4 --store prev.db

(run from the checkout root, so the stored scripted-model path is relative to it).

Any change to the event fold, the schema or the payloads that breaks this test must either keep
old stores readable or give a clear migration message (docs/design/store-schema.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store-0.1-diabetes-critic.db"
RUN = "20261201-191950-67a390"
ROOT = Path(__file__).resolve().parents[2]


# The old store's configuration says ``auto`` for the memory's embedder (the key did not exist), which meant MiniLM
# where it was installed: its replay runs with the machine's own meaning of auto, not the suite's "hashing".
AS_MADE = {k: v for k, v in os.environ.items() if k != "VERIFYLESS_MEMORY_EMBEDDER"}


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifyless", *args], capture_output=True, text=True, cwd=cwd, timeout=240, env=env
    )


def test_an_old_store_shows_replays_and_resumes(tmp_path):
    store = tmp_path / "old.db"
    shutil.copy(FIXTURE, store)
    # the scripted replies are read from the path stored in the config: run where that path resolves
    shown = cli("show", RUN, "--store", str(store), "--json", cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["status"] == "finished" and data["budget"]["verifications"] == 4
    assert abs(data["best_nodes"][0]["score"] - 50.789590478538244) < 1e-9

    replayed = cli("replay", RUN, "--store", str(store), cwd=ROOT, env=AS_MADE)
    assert replayed.returncode == 0, replayed.stderr + replayed.stdout
    assert "identical" in replayed.stdout

    resumed = cli("run", "--resume", RUN, "--budget", "6", "--store", str(store), cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    after = json.loads(cli("show", RUN, "--store", str(store), "--json", cwd=ROOT).stdout)
    assert after["budget"]["verifications"] == 6
