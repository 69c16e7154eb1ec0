"""Who may pay for a run: the lease, held by one live process at a time (docs/design/store-schema.md, "Leases").

A lease is one row of the ``leases`` table: the run, the holder's pid, host and process start time, when it was
taken and a random token. ``take`` writes it inside the caller's ``BEGIN IMMEDIATE`` transaction, so two
processes that race for a run are ordered by SQLite's write lock: the second sees the first's row.

A row whose holder is gone does not bind: a ``kill -9`` leaves its row behind, and the next taker replaces it.
Gone means, on this host, that the pid no longer runs or now belongs to another process (its start time differs:
Linux ``/proc/PID/stat`` field 22 with the boot id, so a reboot counts as gone too). A holder on another host
cannot be checked from here: its lease binds until ``take_over``. Where the start time cannot be read (not Linux),
a live pid is taken for the holder (a reused pid then blocks until ``take_over``).

The holder of a lease checks its token before each of its writes (``check``), so a process whose lease was taken
over stops at its next write instead of paying for the run beside the new holder.
"""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verifyless.errors import RunHeld, StoreError
from verifyless.processes import alive

__all__ = ["Holder", "Leases", "check", "gone", "give_back", "process_start", "read", "take", "this_process"]


@dataclass(frozen=True)
class Holder:
    """One process's lease on one run: pid, host, process start time ('' where unknown), since (epoch seconds),
    and the token that tells this lease from a later one."""

    run_id: str
    pid: int
    host: str
    started: str
    since: float
    token: str

    def describe(self) -> str:
        """``pid 4242 on host lab-3 since 2026-12-07 05:07:03 UTC``."""
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"pid {self.pid} on host {self.host} since {when}"


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as ``<boot id>:<start ticks>`` (Linux); None when no such process runs, ''
    where this system does not say (no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else ("" if alive(pid) else None)
    except OSError:
        return "" if alive(pid) else None
    fields = stat[stat.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses
    if fields[0] == "Z":  # a zombie: killed, not yet reaped by its parent
        return None
    return f"{_boot_id()}:{fields[19]}"  # field 22 of the line is the 20th after the name


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def this_process(run_id: str) -> Holder:
    """A new lease on ``run_id`` for this process, with a fresh token."""
    pid = os.getpid()
    return Holder(run_id, pid, socket.gethostname(), process_start(pid) or "", time.time(), secrets.token_hex(8))


def gone(holder: Holder) -> bool:
    """Whether ``holder`` is known to hold nothing any more: on this host, its pid is dead or was reused."""
    if holder.host != socket.gethostname():
        return False
    now = process_start(holder.pid)
    return now is None or bool(now and holder.started and now != holder.started)


_COLUMNS = "run_id, pid, host, started, since, token"


def read(conn: sqlite3.Connection, run_id: str) -> Holder | None:
    """The lease on ``run_id`` in the store, whether its holder lives or not; None when there is none."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM leases WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else Holder(*row)


def take(conn: sqlite3.Connection, run_id: str, store: Path, *, take_over: bool = False) -> Holder:
    """Write this process's lease on ``run_id`` (inside the caller's write transaction) and return it.

    Raises ``RunHeld`` naming the holder when another one holds it and is not ``gone``; ``take_over`` takes it from
    a holder on another host too (one on this host that still runs is never taken: stop it first).
    """
    mine = this_process(run_id)
    held = read(conn, run_id)
    if held is not None and not gone(held) and not (take_over and held.host != mine.host):
        raise RunHeld(_refusal(held, store))
    conn.execute(f"INSERT OR REPLACE INTO leases ({_COLUMNS}) VALUES (?,?,?,?,?,?)", _row(mine))
    return mine


def give_back(conn: sqlite3.Connection, holder: Holder) -> None:
    """Delete ``holder``'s lease; nothing when the run's lease is another one by now."""
    conn.execute("DELETE FROM leases WHERE run_id = ? AND token = ?", (holder.run_id, holder.token))


def check(conn: sqlite3.Connection, holder: Holder) -> None:
    """``RunHeld`` when ``holder``'s lease is no longer the run's (taken over): its writes must stop."""
    now = read(conn, holder.run_id)
    if now is None or now.token != holder.token:
        by = f" by {now.describe()}" if now is not None else ""
        raise RunHeld(
            f"run {holder.run_id} was taken over{by} while this process ran it; this process stopped writing to it "
            "(what it stored before is kept)"
        )


def _row(holder: Holder) -> tuple:
    return (holder.run_id, holder.pid, holder.host, holder.started, holder.since, holder.token)


def _refusal(held: Holder, store: Path) -> str:
    """The one line a second process gets: who runs the run, and how to go on."""
    head = f"run {held.run_id} is being run by another process ({held.describe()})"
    if held.host != socket.gethostname():
        return (
            f"{head}, on another machine, so whether it still runs cannot be checked from here. If it has stopped, "
            f"take the run over: verifyless run --resume {held.run_id} --store {store} --take-over"
        )
    return (
        f"{head}; one process at a time pays for a run. Wait for it to end (watch it: verifyless show {held.run_id} "
        f"--store {store}), or stop it (kill {held.pid}) and resume"
    )


class Leases:
    """The lease methods of ``RunStore`` (a base class; uses its connection, lock and transactions)."""

    path: Path
    _lock: threading.RLock
    _held: dict[str, Holder]  # the runs whose lease this store holds

    if TYPE_CHECKING:  # provided by RunStore

        def _db(self) -> sqlite3.Connection: ...
        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...
        def _require_run(self, conn: sqlite3.Connection, run_id: str) -> None: ...

    def hold(self, run_id: str, *, take_over: bool = False) -> Holder:
        """Take the run's lease for this process (nothing when this store holds it already) and return it.

        ``RunHeld`` names the holder when another process holds it and is not gone (``take``); ``take_over`` takes
        it from a holder on another host, which cannot be checked from here.
        """
        with self._write() as conn:
            if run_id in self._held:
                check(conn, self._held[run_id])
                return self._held[run_id]
            self._require_run(conn, run_id)
            held = take(conn, run_id, self.path, take_over=take_over)
        self._held[run_id] = held
        return held

    def release(self, run_id: str) -> None:
        """Give back this store's lease on ``run_id`` (nothing when it holds none, or it was taken over)."""
        held = self._held.pop(run_id, None)
        if held is not None:
            with self._write() as conn:
                give_back(conn, held)

    def release_all(self) -> None:
        """Give back every lease this store holds, as far as the store lets it (``close`` calls it)."""
        for run_id in list(self._held):
            try:
                self.release(run_id)
            except StoreError:  # a lease left behind binds nobody once this process is gone
                pass

    def holding(self, run_id: str, *, take_over: bool = False) -> AbstractContextManager[Holder]:
        """``hold`` the run for a ``with`` block and ``release`` it at the block's end, however it ends; a block
        inside another one of the same store keeps the outer block's lease."""
        return self._holding(run_id, take_over)

    @contextmanager
    def _holding(self, run_id: str, take_over: bool) -> Iterator[Holder]:
        outer = run_id in self._held
        held = self.hold(run_id, take_over=take_over)
        try:
            yield held
        finally:
            if not outer:
                self.release(run_id)

    def holder(self, run_id: str) -> Holder | None:
        """Who holds ``run_id``'s lease now (its holder may be gone: ``gone``); None when nobody does."""
        with self._lock:
            try:
                return read(self._db(), run_id)
            except sqlite3.OperationalError:  # a read-only store from before leases (schema version 2)
                return None

    def _writable(self, conn: sqlite3.Connection, run_id: str) -> None:
        """Before a write to ``run_id``: ``RunHeld`` when this store's lease on it was taken over meanwhile (its
        writes stop), ``StoreError`` for an unknown run."""
        if run_id in self._held:
            check(conn, self._held[run_id])
        self._require_run(conn, run_id)
