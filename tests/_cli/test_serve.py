"""``verifyless serve`` refuses what it cannot serve in one line (issue 53); serving itself is an opt-in check
(``tests/e2e/test_real_model.py``) because it needs the weights and a built engine."""

from __future__ import annotations

from cli_runs import in_process


def test_an_unknown_model_is_one_line_naming_the_catalogue(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("VERIFYLESS_HOME", str(tmp_path))
    out = in_process(monkeypatch, capsys, "serve", "gpt-5")
    assert out.returncode == 6
    assert out.stderr.strip().count("\n") == 0 and "use one of: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b" in out.stderr
    assert list(tmp_path.iterdir()) == []  # nothing downloaded or written


def test_the_help_says_what_the_first_call_costs(monkeypatch, capsys):
    out = in_process(monkeypatch, capsys, "serve", "--help")
    text = " ".join(out.stdout.replace("│", " ").split())
    assert out.returncode == 0 and "sha256" in text and "30 minutes" in text and "6 minutes" in text
