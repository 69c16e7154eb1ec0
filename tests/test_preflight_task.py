"""The pre-flight estimate from this task's own prompt (issue 46, item 5): a rendered prompt instead of a flat
3,000 tokens, screeners an ``adaptive`` wraps counted, and a warning when a prompt exceeds a model's context."""

from __future__ import annotations

import shutil

from cli_runs import in_process

from verifyless.config import load_config
from verifyless.preflight import PROMPT_TOKENS, plan, prompt_tokens
from verifyless.task import builtin_tasks_dir, load_task


def _big_task(tmp_path, columns: int = 5000):
    """A copy of diabetes whose statement carries a column table as wide as ``task new`` writes for a wide CSV."""
    root = tmp_path / "wide"
    shutil.copytree(builtin_tasks_dir() / "diabetes", root)
    table = "".join(f"| feature_{i:05d} | float | 0.0 | 1.0 |\n" for i in range(columns))
    (root / "statement.md").write_text((root / "statement.md").read_text() + "\n## Columns\n\n" + table)
    return load_task(str(root))


def _cfg(*over: str, **values):
    spec = {"provider": "scripted", "script": "x.yaml", **values}
    base = {"budget.verifications": 7, "roles.kind": "llm", "roles.models": {"default": spec}}
    return load_config(overrides=list(over), values=base)


def test_the_prompt_estimate_is_this_task_s_rendered_prompt(tmp_path):
    small, big = load_task("diabetes"), _big_task(tmp_path)
    assert prompt_tokens(small) != PROMPT_TOKENS
    assert prompt_tokens(big) > 40_000 > prompt_tokens(small), (prompt_tokens(big), prompt_tokens(small))
    cfg = _cfg("screener.name=random")
    flat, mine = plan(cfg), plan(cfg, big)
    assert mine.prompt_tokens == prompt_tokens(big) and flat.prompt_tokens == PROMPT_TOKENS
    assert mine.tokens is not None and flat.tokens is not None and mine.tokens > 10 * flat.tokens
    assert any("rendered" in line and f"{prompt_tokens(big):,}" in line for line in mine.lines()), mine.lines()


def test_a_screener_adaptive_wraps_is_counted():
    critic = plan(_cfg("screener.name=critic"))
    wrapped = plan(_cfg("screener.name=adaptive", "screener.options.screener=critic"))
    assert critic.llm_calls is not None and wrapped.llm_calls is not None
    assert wrapped.llm_calls > critic.llm_calls, "the wrapped critic's calls, plus its canaries"
    alone = plan(_cfg("screener.name=random")).llm_calls
    assert alone is not None and wrapped.llm_calls > alone


def test_a_prompt_longer_than_a_model_s_context_is_a_warning(tmp_path, monkeypatch, capsys):
    big = _big_task(tmp_path)
    p = plan(_cfg("screener.name=random", context_tokens=8192), big)
    assert any("roles.models.default" in w and "8,192" in w and "context" in w for w in p.warnings), p.warnings
    assert not any("context" in w for w in plan(_cfg("screener.name=random", context_tokens=8192)).warnings)
    script = tmp_path / "s.yaml"
    script.write_text("mode: sequence\nreplies: []\n")
    spec = f"roles.models.default={{provider: scripted, script: {script}, context_tokens: 8192}}"
    out = in_process(monkeypatch, capsys, "run", str(big.root), "roles.kind=llm", spec, "--dry-run", "--budget", "5")
    assert out.returncode == 0, out.stderr
    assert "rendered" in out.stdout and "warning:" in out.stdout and "context" in out.stdout, out.stdout


def test_the_context_a_server_states_is_read_when_the_spec_gives_none(tmp_path, monkeypatch):
    """Issue 53: vLLM states ``max_model_len`` in ``GET /models``; the pre-flight warns from it, for the implied
    ``env`` spec too, before anything is paid."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "small", "max_model_len": 2048}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("VERIFYLESS_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        monkeypatch.setenv("VERIFYLESS_MODEL", "small")
        cfg = load_config(values={"budget.verifications": 7, "roles.kind": "llm", "screener.name": "random"})
        warnings = plan(cfg, _big_task(tmp_path)).warnings
    finally:
        server.shutdown()
    assert any("roles.models.default" in w and "2,048" in w for w in warnings), warnings
