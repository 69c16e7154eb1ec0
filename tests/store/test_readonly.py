"""The read-only store gives the writer's messages for a file that is not a store or is too new; on read-only media
it opens immutable and says what that misses."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import pytest
from readonly_media import read_only_prefix

from verifyless.errors import StoreError
from verifyless.store import SCHEMA_VERSION, RunStore
from verifyless.store.readonly import open_readonly


def test_read_only_open_of_a_non_store_a_newer_store_and_a_foreign_database(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all, just text" * 100)
    with pytest.raises(StoreError, match="not a readable verifyless run store.*move it aside"):
        open_readonly(junk)
    newer = tmp_path / "newer.db"
    RunStore(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade verifyless"):
        open_readonly(newer)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="is not a verifyless run store"):
        open_readonly(foreign)
    fresh = tmp_path / "fresh.db"
    RunStore(fresh).close()
    with open_readonly(fresh) as st:
        assert st.runs() == []


_READ = (
    "import sys\n"
    "from verifyless.store.readonly import open_readonly\n"
    "with open_readonly(sys.argv[1]) as st:\n"
    "    print(st.notice)\n"
    "    print(' '.join(sorted(r.run_id for r in st.runs())))\n"
)


def test_on_a_read_only_mount_a_wal_left_beside_the_store_is_not_read_and_the_notice_says_so(tmp_path):
    """immutable=1 reads the main file only: a copy taken while its writer had commits in the -wal misses them."""
    live = tmp_path / "live.db"
    with RunStore(live) as st:
        st.create_run("t", {}, run_id="checkpointed")
    folder = tmp_path / "ro"
    folder.mkdir()
    with RunStore(live) as st:
        st._db().execute("PRAGMA wal_autocheckpoint = 0")
        st.create_run("t", {}, run_id="in-the-wal")
        for suffix in ("", "-wal"):  # as a copy made while the run was writing
            shutil.copy(f"{live}{suffix}", folder / f"s.db{suffix}")
    prefix, reason = read_only_prefix(folder)
    if prefix is None:
        pytest.skip(reason)
    out = subprocess.run([*prefix, sys.executable, "-c", _READ, str(folder / "s.db")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    notice, runs = out.stdout.splitlines()
    assert "opened immutable" in notice and "s.db-wal beside it is not read" in notice, notice
    assert runs == "checkpointed", "the -wal's commit is not seen"
    with open_readonly(folder / "s.db") as st:  # where the folder is writable, mode=ro reads the -wal too
        assert st.notice is None and {r.run_id for r in st.runs()} == {"checkpointed", "in-the-wal"}


def test_the_read_only_store_refuses_writes_and_sees_new_commits(tmp_path):
    path = tmp_path / "s.db"
    with pytest.raises(StoreError, match="no run store"):
        open_readonly(path)
    with RunStore(path) as writer:
        rid = writer.create_run("t", {})
        with open_readonly(path) as ro:
            before = max(ev.seq for ev in ro.events(rid))
            seq = writer.append(rid, "note", {"x": 1})
            assert max(ev.seq for ev in ro.events(rid)) == seq > before
            with pytest.raises(StoreError, match="readonly"):
                ro.append(rid, "note", {"x": 2})
    (tmp_path / "other.db").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(StoreError):
        open_readonly(tmp_path / "other.db")
