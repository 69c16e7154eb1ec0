"""The whole GPU verification path on this machine, in one table (issue #44).

Usage, from the repository root::

    .venv/bin/python bench/gpu_check.py [--json OUT.json]

On a GPU machine with no package index (only Python, a CUDA build of torch and a GPU), from a copy of
the checkout: ``../shared/tools/device/prepare.sh`` here first, then there
``. .device-carry/env.sh && python3 bench/gpu_check.py``.

Rows (each timed; a row that cannot apply here says why):

1. doctor -- isolation level, memory mechanism, GPUs, the driver's libraries, and the CUDA probe
   inside the sandbox (``verifyless.sandbox.doctor``);
2. verify a CUDA task -- ``moons_torch`` given one GPU with its own memory limit on (3 GB), through
   ``verifyless.verify.verify`` and the default sandbox; the program reports the device it trained on;
3. two verifications at once -- ``LocalExecutor`` with two GPUs, capacity 2: each sees its own
   ``CUDA_VISIBLE_DEVICES`` (needs two GPUs);
4. host-memory bomb after CUDA init -- must come back ``oom`` with its reason (on a CPU machine: the
   bomb without CUDA);
5. pre-flight without a usable GPU -- ``require_gpu`` on a GPU task where no GPU is visible must stop
   in one line.

Exit 0 when every applicable row passed, 1 otherwise. Takes well under 3 minutes on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # a copy of the checkout, not installed

from verifyless.errors import SandboxUnavailable  # noqa: E402
from verifyless.executors.local import LocalExecutor  # noqa: E402
from verifyless.node import Status  # noqa: E402
from verifyless.sandbox.doctor import host_torch_cuda, require_gpu, sandbox_report  # noqa: E402
from verifyless.sandbox.gpu import gpu_indices  # noqa: E402
from verifyless.sandbox.local import LocalSandbox  # noqa: E402
from verifyless.task import load_task  # noqa: E402
from verifyless.task.base import Limits  # noqa: E402
from verifyless.verify import verify  # noqa: E402

REPORT_DEVICE = (
    "_fit_on = fit\n\n\n"
    "def fit(x, y):\n"
    "    import os, sys\n"
    "    print('trained on', DEVICE, 'CUDA_VISIBLE_DEVICES=' + os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'),"
    " file=sys.stderr, flush=True)\n"
    "    return _fit_on(x, y)\n"
)
BOMB_AFTER_CUDA = (
    "import torch\n"
    "if torch.cuda.is_available():\n"
    "    torch.ones(1, device='cuda').sum().item()\n"
    "    print('cuda up', flush=True)\n"
    "chunks = []\n"
    "while True:\n"
    "    chunks.append(bytearray(256 * 2**20))\n"
)


@dataclasses.dataclass
class Row:
    check: str
    passed: bool | None  # None: not applicable here
    detail: str
    seconds: float = 0.0


def timed(check: str, fn: Callable[[], tuple[bool | None, str]]) -> Row:
    started = time.monotonic()
    try:
        passed, detail = fn()
    except Exception as exc:  # a bench row reports, it does not stop the table
        passed, detail = False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return Row(check, passed, detail, time.monotonic() - started)


def gpu_task(gpus: int = 1):
    task = load_task("moons_torch")
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, gpus=gpus))


def reporting(program: str) -> str:
    return program.replace("# EVOLVE-BLOCK-END", REPORT_DEVICE + "# EVOLVE-BLOCK-END", 1)


def trained_on(stderr: str) -> str:
    return next((ln.split(" ", 2)[2] for ln in stderr.splitlines() if ln.startswith("trained on ")), "?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    sandbox = LocalSandbox()
    gpus = gpu_indices()
    has_gpu = bool(gpus) and host_torch_cuda() is not None
    rows: list[Row] = []

    def doctor():
        report = sandbox_report(sandbox, probe=True)
        probe = report.probe
        detail = f"{report.isolation}, memory {report.memory}, {len(report.gpus)} GPU(s)"
        if probe is None:
            return None, detail + "; no probe (no GPU or no CUDA torch here)"
        return probe.ok, detail + (f"; {probe.device}" if probe.ok else f"; probe failed: {probe.missing}")

    def verify_cuda():
        if not has_gpu:
            return None, "no GPU here"
        task = gpu_task()
        v = verify(task, reporting(task.baseline_program), sandbox, gpus=gpus[:1])
        device = trained_on(v.stderr_tail)
        ok = v.status is Status.OK and device.startswith("cuda")
        gpu_mem = f"{v.peak_gpu_memory_mb:.0f} MB" if v.peak_gpu_memory_mb is not None else "unread"
        return ok, (
            f"{v.status.value} {v.reason[:80]}; val_accuracy {v.score}; {device}; memory_mb {task.limits.memory_mb}; "
            f"peak host {v.peak_memory_mb:.0f} MB, GPU {gpu_mem}"
        )

    def parallel():
        if len(gpus) < 2 or not has_gpu:
            return None, f"{len(gpus)} GPU(s) here: needs two"
        task = gpu_task()
        program = reporting(task.baseline_program)
        executor = LocalExecutor(sandbox, capacity=2, gpus=gpus[:2])

        async def both():
            return await asyncio.gather(executor.verify(task, program), executor.verify(task, program))

        results = asyncio.run(both())
        seen = [trained_on(v.stderr_tail) for v in results]
        ok = all(v.status is Status.OK for v in results) and len(set(seen)) == 2
        return ok, "; ".join(f"{v.status.value} {s}" for v, s in zip(results, seen, strict=True))

    def bomb():
        limits = Limits(wall_seconds=120, memory_mb=3072, gpus=1 if has_gpu else 0, processes=256)
        ws = Path(os.environ.get("TMPDIR", "/tmp")) / f"verifyless-gpu-check-{os.getpid()}"
        ws.mkdir(parents=True, exist_ok=True)
        env = {"CUDA_VISIBLE_DEVICES": str(gpus[0])} if has_gpu else None
        try:
            r = sandbox.run([sys.executable, "-c", BOMB_AFTER_CUDA], ws, limits, env=env)
        finally:
            shutil.rmtree(ws, ignore_errors=True)
        cuda = "after CUDA init" if "cuda up" in r.stdout_tail else "without CUDA"
        return r.status == "oom", f"{r.status} ({cuda}, {r.memory_limit}): {r.reason[:100]}"

    def preflight():
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = "" if gpus else os.environ.get("CUDA_VISIBLE_DEVICES", "")
        try:
            require_gpu(sandbox, gpu_task().limits, "moons_torch")
            return False, "a GPU task passed the pre-flight with no usable GPU"
        except SandboxUnavailable as exc:
            line = str(exc)
            return "\n" not in line, line[:140]
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved

    for name, fn in (
        ("doctor + CUDA probe", doctor),
        ("verify a CUDA task (memory limit on)", verify_cuda),
        ("two verifications on two GPUs", parallel),
        ("host-memory bomb", bomb),
        ("GPU task, no usable GPU: pre-flight", preflight),
    ):
        rows.append(timed(name, fn))
        print(f"... {name}: {rows[-1].seconds:.1f}s", file=sys.stderr, flush=True)

    print("| check | result | seconds | detail |")
    print("| --- | --- | ---: | --- |")
    for r in rows:
        verdict = "n/a" if r.passed is None else ("pass" if r.passed else "FAIL")
        print(f"| {r.check} | {verdict} | {r.seconds:.1f} | {r.detail.replace('|', '/')} |")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    return 0 if all(r.passed is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
