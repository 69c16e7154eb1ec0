"""``verifyless demo --help`` says what the demo does and where its worlds are (issue 54, item 10): it said
"surrogate-screened" and named a ``bench/worlds`` folder that does not exist."""

from __future__ import annotations

from cli_runs import in_process

from verifyless._cli.demo import world_tasks
from verifyless.builtin import worlds_dir


def test_demo_help_names_what_it_runs_and_the_tasks_with_a_pool_world(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "250")  # one line per option: the list is not wrapped between box borders
    out = in_process(monkeypatch, capsys, "demo", "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "surrogate" not in text and "bench/worlds" not in text
    assert "warm-started adaptive screening (critic-rm)" in text
    assert "affairs_gbm" in world_tasks() and all((worlds_dir() / f"{t}.jsonl").is_file() for t in world_tasks())
    assert ", ".join(world_tasks()) in text
