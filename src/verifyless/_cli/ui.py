"""``verifyless ui``: serve the read-only dashboard over a run store."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import typer

from verifyless._cli.common import console, read_store
from verifyless.config import DEFAULT_STORE
from verifyless.errors import ConfigError
from verifyless.ui.app import create_app

LOOPBACK = "127.0.0.1"


def ui_command(
    store: Path = typer.Option(DEFAULT_STORE, "--store", help="run store to show"),
    port: int = typer.Option(8765, "--port", help="TCP port"),
    host: str = typer.Option(LOOPBACK, "--host", help="interface to bind (default: this machine only)"),
) -> None:
    """Serve a read-only dashboard of the run store (runs, live progress, reports, comparisons)."""

    try:
        import uvicorn

    except ImportError as exc:
        raise ConfigError(
            f"the dashboard needs the ui extra ({exc}); install it with: pip install 'verifyless[ui]'"
        ) from None
    if not 0 < port < 65536:
        raise ConfigError(f"--port {port} is not a TCP port; pick one between 1 and 65535")
    _check_free(host, port)
    shown = f"[{host}]" if ":" in host else host
    console.print(f"verifyless dashboard (read-only) of {store} at [bold]http://{shown}:{port}/[/]")
    if host == LOOPBACK:
        console.print(
            f"bound to {LOOPBACK}: only this machine can open it (ssh -L {port}:{LOOPBACK}:{port} to reach it "
            "from elsewhere). Stop with Ctrl-C.",
            highlight=False,
        )
    else:
        console.print(
            f"[yellow]bound to {host}: anyone who can reach this address can read these runs "
            "(ideas, code, logs). There is no login.[/]",
            highlight=False,
        )
    if store.exists():
        read_store(store).close()  # a store that does not open fails here, in one line; a read-only one says so
    else:
        console.print(
            f"[yellow]{store} does not exist yet; runs appear once `verifyless run --store {store}` starts.[/]",
            highlight=False,
        )
    uvicorn.run(create_app(store), host=host, port=port, log_level="warning")


def _check_free(host: str, port: int) -> None:
    """Raise ``ConfigError`` (exit 2, one line, a ``--port`` hint) when ``host:port`` cannot be bound.

    Binds and releases a socket with ``SO_REUSEADDR``, as uvicorn does, before anything is printed.
    Limit: another process may still take the port between this check and uvicorn's bind.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            reason = "is already in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
            other = port + 1 if port < 65535 else 8765
            raise ConfigError(
                f"port {port} on {host} {reason}: stop the other dashboard or pick another with --port {other}"
            ) from None
