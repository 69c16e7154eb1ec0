"""Content-addressed blobs of the run store (program texts, raw critiques): stored once under their sha256."""

from __future__ import annotations

import sqlite3
import zlib
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from verifyless.errors import StoreError
from verifyless.node import content_hash


class BlobStore:
    """Blob methods of ``RunStore`` (a base class; uses its connection and transactions)."""

    compress_min: int
    path: Path

    if TYPE_CHECKING:  # provided by RunStore

        def _read(self, sql: str, args: tuple = ()) -> list[tuple]: ...
        def _write(self) -> ContextManager[sqlite3.Connection]: ...

    def put_blob(self, data: str | bytes) -> str:
        """Store bytes (str as UTF-8) once under their sha256; returns the hash."""
        with self._write() as conn:
            return self._put_blob(conn, data)

    def _put_blob(self, conn: sqlite3.Connection, data: str | bytes) -> str:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        digest = content_hash(raw)
        if conn.execute("SELECT 1 FROM blobs WHERE hash = ?", (digest,)).fetchone() is None:
            stored, codec = raw, "raw"
            if len(raw) >= self.compress_min:
                packed = zlib.compress(raw, 6)
                if len(packed) < len(raw):
                    stored, codec = packed, "zlib"
            conn.execute(
                "INSERT OR IGNORE INTO blobs (hash, data, size, codec) VALUES (?,?,?,?)",
                (digest, stored, len(raw), codec),
            )
        return digest

    def get_blob(self, digest: str) -> bytes:
        """The bytes stored under ``digest``; StoreError if missing or if they no longer match the hash."""
        rows = self._read("SELECT data, codec FROM blobs WHERE hash = ?", (digest,))
        if not rows:
            raise StoreError(f"no blob {digest[:16]}... in {self.path}; was it stored in another run store?")
        data, codec = rows[0]
        raw = zlib.decompress(data) if codec == "zlib" else bytes(data)
        if content_hash(raw) != digest:
            raise StoreError(
                f"blob {digest[:16]}... in {self.path} is damaged (hash mismatch); run PRAGMA integrity_check"
            )
        return raw

    def get_text(self, digest: str) -> str:
        return self.get_blob(digest).decode("utf-8")

    def has_blob(self, digest: str) -> bool:
        return bool(self._read("SELECT 1 FROM blobs WHERE hash = ?", (digest,)))
