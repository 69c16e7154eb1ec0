"""What several command modules share: the consoles they print to, the read-only store opener, the warning filter.

Kept apart so command modules import it and never each other (``train`` mounts ``policy``; neither reaches back).
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import typer

from verifyless._cli.terminal import TerminalConsole
from verifyless.config import DEFAULT_STORE
from verifyless.errors import ConfigError
from verifyless.store.readonly import ReadOnlyStore, open_readonly

# The one output and error console of every command. Tables fit the terminal (160 columns when piped);
# printed lines are never broken by rich, so paths and commands in them can be copied whole. Neither writes a
# control character it did not make (``_cli/terminal.py``: candidate output never reaches the terminal raw).
console = TerminalConsole(width=None if sys.stdout.isatty() else 160, soft_wrap=True)
err = TerminalConsole(stderr=True, width=None if sys.stderr.isatty() else 160, soft_wrap=True)

# Parameters several commands share, written once.
STORE = typer.Option(DEFAULT_STORE, "--store", help="run store")  # the --store of the commands that read runs
RUN_ID = typer.Argument(..., help="run id (or a unique prefix)", show_default=False)
TASK = typer.Argument(..., help="built-in task name or task folder", show_default=False)


def read_store(path: Path) -> ReadOnlyStore:
    """The store opened read-only, for commands that only read; says on stderr (one line) when it is not writable.

    A store on read-only media opens ``immutable`` (see ``verifyless.store.readonly``).
    """
    store = open_readonly(path)
    if store.notice:
        err.print(store.notice, highlight=False, soft_wrap=True, markup=False)
    return store


def quiet() -> None:
    """Library deprecation chatter (transformers/TRL FutureWarnings) is not for the person training."""
    warnings.filterwarnings("ignore", category=FutureWarning)


def key_values(items: list[str]) -> dict[str, Any]:
    """``--option KEY=VALUE`` items as a mapping; a VALUE that parses as JSON is taken as JSON, else as text."""
    opts: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--option {item!r} must look like KEY=VALUE")
        key, raw = item.split("=", 1)
        try:
            opts[key] = json.loads(raw)
        except json.JSONDecodeError:
            opts[key] = raw
    return opts


def _check_out(path: Path, *, folder: bool) -> Path:
    """``path`` if a command can write its output there; a ``BadParameter`` (one usage line, exit 2) if not.

    Checked before any work, and without creating anything: ``path`` must not be a file where a folder is
    wanted (or a folder where a file is), and the deepest folder that exists on the way to it must accept a
    new file (a probe file, removed at once: permissions alone miss read-only mounts and pseudo-filesystems).
    """
    kind = "folder" if folder else "file"
    if path.exists() and path.is_dir() != folder:
        raise typer.BadParameter(f"{path} is a {'file' if folder else 'folder'}; give a {kind} path for the output")
    existing = path if folder and path.is_dir() else path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is not a folder")
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise typer.BadParameter(
            f"cannot write the output {kind} {path} ({existing}: {reason}); choose a place you can write to"
        ) from None
    return path


def out_folder(path: Path | None) -> Path | None:
    """Typer callback for ``--out FOLDER`` options (None: the command's default, checked where it is made)."""
    return None if path is None else _check_out(path, folder=True)


def out_file(path: Path | None) -> Path | None:
    """Typer callback for ``--out FILE`` options."""
    return None if path is None else _check_out(path, folder=False)


__all__ = ["console", "err", "key_values", "out_file", "out_folder", "quiet", "read_store"]
