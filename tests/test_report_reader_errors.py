"""The read-only store gives the writer's messages for a file that is not a store or is too new."""

from __future__ import annotations

import sqlite3

import pytest

from verifyless.errors import StoreError
from verifyless.report.reader import open_readonly
from verifyless.store import SCHEMA_VERSION, RunStore


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
