"""The README's ``verifyless ...`` commands, as written, at tiny budgets.

Every command in a ```bash block of README.md is either run here (placeholders such as RUN replaced by real
ids, budgets and sizes shrunk by ``SHRINK``) or listed in ``SKIPPED`` with the reason. Commands that pay for
verifications or LLM calls are marked slow (``--runslow``); the rest run with the fast suite. Each runs in a
scratch folder where ``examples/`` and ``bench/`` are links to the repository's, so the relative paths the
README uses resolve and its default stores and outputs (``runs/``, ``reports/``) stay out of the tree.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

# command prefix -> why it is not run here
SKIPPED = {
    "verifyless verify path/to/openevolve_folder": "placeholder paths (the OpenEvolve folder is tested in _cli/test_app.py)",
    "verifyless ui": "serves until stopped (its start-up and port checks are in _cli/test_report.py)",
    "verifyless serve": "downloads a gigabyte and builds an engine for minutes, then serves until stopped (opt-in: "
    "tests/e2e/test_real_model.py; refusals in _cli/test_serve.py, assembly in model/test_served.py)",
    "verifyless run diabetes roles.kind=llm --screener critic": "needs an LLM endpoint (VERIFYLESS_BASE_URL)",
    "verifyless tune screener": "needs an LLM endpoint (--model openai:MODEL)",
    "verifyless run diabetes -c critic --config run.yaml": "needs the tuned prompt of the skipped tune command",
    "verifyless train critic-sft": "trains SmolLM2-135M: about 8 GB and many minutes (GPU machine)",
    "verifyless train critic-grpo": "trains SmolLM2-135M from the skipped SFT adapter (GPU machine)",
    "verifyless train policy-grpo": "trains a SmolLM2 policy for minutes (GPU machine)",
    "verifyless run bench/tasks/policy_space": "needs the skipped policy adapter and its policy-run.yaml",
    "verifyless train critic-rm diabetes": "needs the diabetes runs above in runs/warm.db (minutes of verification); "
    "tests/screen/test_reward.py runs the same runs -> train -> screened run on tests/data_task",
    "verifyless run diabetes --strategy greedy --screener critic-rm": "needs the skipped critic-rm artifact",
    "verifyless show RUN --store runs/warm.db": "needs the skipped critic-rm run",
}
# budgets and sizes: (pattern, replacement), applied in order
SHRINK = (
    (r"--budget \d+", "--budget 3"),
    (r"engine\.candidates=\d+", "engine.candidates=2"),
    (r"screener\.options\.k=\d+", "screener.options.k=2"),
    (r"--option k=\d+", "--option k=2"),
    (r"--parents \d+", "--parents 1"),
    (r"--children \d+", "--children 2"),
    (r"--n \d+", "--n 2"),
)
# commands that pay for verifications or model calls: minutes in all on a shared machine
SLOW = ("verifyless run ", "verifyless propose", "verifyless data ", "verifyless collect-pools", "verifyless bench ")
FAST_BENCH = ("verifyless bench selection", "verifyless bench compare")  # read stored runs only


def readme_commands(text: str) -> list[str]:
    """The ``verifyless ...`` command lines of the README's bash blocks, continuations joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith("verifyless "):
                commands.append(" ".join(line.split()))
    return commands


def skip_reason(command: str) -> str | None:
    return next((why for prefix, why in SKIPPED.items() if command.startswith(prefix)), None)


def shrink(command: str) -> str:
    """``SHRINK`` applied; a ``run`` that names no budget (and resumes nothing) gets ``--budget 3``."""
    for pattern, replacement in SHRINK:
        command = re.sub(pattern, replacement, command)
    if command.startswith("verifyless run ") and "--budget" not in command and "--resume" not in command:
        command += " --budget 3"
    return command


def concrete(command: str, run1: str, run2: str) -> str:
    """Placeholders filled: RUN1 and RUN2 by the two scratch runs; RUN by the first, or the second when it is
    resumed (a resumed run no longer replays as identical, which ``replay RUN`` checks on the first)."""
    command = re.sub(r"\bRUN1\b", run1, re.sub(r"\bRUN2\b", run2, shrink(command)))
    return re.sub(r"\bRUN\b", run2 if "--resume" in command else run1, command)


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))


def test_every_readme_command_is_run_or_skipped_with_a_reason():
    assert len(COMMANDS) >= 20, "the README's bash blocks were not found"
    for prefix in SKIPPED:
        assert any(c.startswith(prefix) for c in COMMANDS), f"{prefix!r} is no longer in the README: drop it"
    for command in COMMANDS:
        for path in re.findall(r"(examples/\S+\.ya?ml)", command):
            assert (ROOT / path).is_file(), f"{command!r} names {path}, which the repository does not ship"
        config = re.search(r"--config (\S+)", command)
        if config and skip_reason(command) is None:
            assert (ROOT / config.group(1)).is_file(), f"{command!r} needs {config.group(1)}, never shown"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, request):
    """A folder like a fresh checkout's root, with two tiny runs in the default store (for RUN, RUN1, RUN2).

    With ``--runslow``: two critic-screened runs (``bench critic RUN`` needs critiques). Without it only
    commands that read a stored run are run: the session's finished run, copied in, is RUN, RUN1 and RUN2.
    """
    folder = tmp_path_factory.mktemp("readme")
    for name in ("examples", "bench"):
        (folder / name).symlink_to(ROOT / name)
    if not request.config.getoption("--runslow"):
        finished = request.getfixturevalue("finished_run")
        (folder / "runs").mkdir()
        shutil.copy(finished.store, folder / "runs" / "verifyless.db")
        return folder, [finished.run_id, finished.run_id]
    ids = []
    scripted = "roles.kind=llm roles.models.default=scripted:examples/scripted/circle_packing.yaml"
    for seed in (0, 1):  # critic-screened, so `bench critic RUN` has critiques to score
        out = _cli(f"verifyless run circle_packing -c critic --budget 2 --seed {seed} --quiet {scripted}", folder)
        assert out.returncode == 0, out.stderr
        ids.append(out.stdout.split("verifyless show ")[1].split()[0])
    return folder, ids


def _cli(command: str, cwd: Path) -> subprocess.CompletedProcess:
    args = shlex.split(command)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("VERIFYLESS_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "verifyless", *args[1:]], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


def _params():
    for i, command in enumerate(COMMANDS):
        why = skip_reason(command)
        slow = command.startswith(SLOW) and not command.startswith(FAST_BENCH)
        marks = [pytest.mark.skip(reason=why)] if why else ([pytest.mark.slow] if slow else [])
        yield pytest.param(command, marks=marks, id=f"{i:02d}-{command[:60]}")


@pytest.mark.parametrize("command", list(_params()))
def test_readme_command_runs_as_written(command, scratch):
    folder, (run1, run2) = scratch
    line = concrete(command, run1, run2)
    out = _cli(line, folder)
    assert out.returncode == 0, f"{line}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    assert "Traceback" not in out.stderr


def test_the_readme_screener_table_lists_every_registered_screener():
    from verifyless.screen.registry import SCREENERS

    text = README.read_text()
    table = text.split("## Screeners", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"`([a-z-]+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:])))
    assert set(SCREENERS) <= listed, f"missing from the README screener table: {sorted(set(SCREENERS) - listed)}"


def test_the_design_note_index_lists_every_note_once():
    notes = sorted(p.name for p in (ROOT / "docs" / "design").glob("*.md") if p.name != "README.md")
    index = (ROOT / "docs" / "design" / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([\w-]+\.md)` \|", index, flags=re.MULTILINE)
    assert sorted(listed) == notes
