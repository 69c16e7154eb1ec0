"""GPU verification on CPU machines (issue #44): driver libraries in the view, the memory limit CUDA
survives, GPU assignment per verification, the pre-flight of a GPU task, and the isolation trial.

Nothing here needs a GPU: the driver folder is a fake one (a tmpfs mount outside the allowlist, as
the squashfs driver mount of a real GPU host is), GPU memory is read through a fake ``nvidia-smi``,
and the assignment is checked on the ``CUDA_VISIBLE_DEVICES`` each candidate sees.
``check_gpu`` of the conformance suite runs where a CUDA device is present and skips elsewhere.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verifyless.errors import ConfigError, SandboxUnavailable
from verifyless.executors.local import GpuPool, LocalExecutor
from verifyless.ledger.budget import GPU_SPENT, BudgetConfig, BudgetGate
from verifyless.node import Status
from verifyless.sandbox import gpu, local
from verifyless.sandbox.doctor import require_gpu, sandbox_report
from verifyless.sandbox.local import LocalSandbox
from verifyless.sandbox.memory import CGROUP_ROOT
from verifyless.store.records import Budget
from verifyless.task import load_task
from verifyless.task.base import Limits

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="mounting a fake driver folder needs root")


def _run(sb: LocalSandbox, ws: Path, code: str, limits: Limits, **kw):
    ws.mkdir(parents=True, exist_ok=True)
    return sb.run([sys.executable, "-c", code], ws, limits, **kw)


# ------------------------------------------------------------------ driver libraries


@pytest.fixture
def fake_driver(monkeypatch):
    """A driver folder outside the allowlist, its own mount (as /usr/local/nvidia is on a GPU host), named by
    LD_LIBRARY_PATH: two driver libraries (one through a version symlink), a non-driver file beside them, and
    another file in the folder's parent."""
    base = Path("/var/tmp") / f"verifyless-fake-driver-{os.getpid()}-{time.monotonic_ns()}"
    libs = base / "nvidia" / "lib64"
    (base / "nvidia").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(base / "nvidia")], check=True)
    try:
        libs.mkdir()
        (libs / "libcuda.so.580.82").write_text("CUDA-DRIVER")
        (libs / "libcuda.so.1").symlink_to("libcuda.so.580.82")
        (libs / "libnvidia-ml.so.1").write_text("NVML")
        (libs / "notes.txt").write_text("NOT-A-DRIVER-FILE")
        (base / "other.txt").write_text("PARENT-SECRET")
        for p in (base, base / "nvidia", libs):
            p.chmod(0o755)
        monkeypatch.setenv("LD_LIBRARY_PATH", f"{libs}:/nonexistent-folder")
        gpu.host_driver_libraries.cache_clear()
        yield libs
    finally:
        gpu.host_driver_libraries.cache_clear()
        subprocess.run(["umount", "-l", str(base / "nvidia")], check=False)
        subprocess.run(["rm", "-rf", str(base)], check=False)


LIST_DRIVER = """
import json, os, sys
d = sys.argv[1]
out = {"env": os.environ.get("LD_LIBRARY_PATH"), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}
try:
    out["listing"] = sorted(os.listdir(d))
    out["cuda"] = open(os.path.join(d, "libcuda.so.1")).read()
except OSError as e:
    out["error"] = type(e).__name__
out["parent"] = sorted(os.listdir(os.path.dirname(os.path.dirname(d)))) if os.path.isdir(os.path.dirname(os.path.dirname(d))) else None
try:
    open(os.path.join(d, "new.so"), "w")
    out["wrote"] = True
except OSError:
    out["wrote"] = False
print(json.dumps(out))
"""


@needs_root
def test_a_gpu_run_sees_exactly_the_driver_libraries_read_only(fake_driver, tmp_path):
    sb = LocalSandbox()
    code = LIST_DRIVER
    r = sb.run([sys.executable, "-c", code, str(fake_driver)], _ws(tmp_path, "gpu"), Limits(gpus=1, wall_seconds=20))
    assert r.status == "ok", r.stderr_tail
    seen = json.loads(r.stdout_tail)
    assert seen["listing"] == ["libcuda.so.1", "libcuda.so.580.82", "libnvidia-ml.so.1"]  # no notes.txt
    assert seen["cuda"] == "CUDA-DRIVER"  # through the version symlink, into the separate mount
    assert seen["parent"] == ["nvidia"]  # nothing else of the parent: other.txt is absent
    assert seen["wrote"] is False
    assert seen["env"] == str(fake_driver)  # the loader path names the driver folder only


@needs_root
def test_a_cpu_run_sees_no_driver_library_and_no_gpu(fake_driver, tmp_path):
    r = LocalSandbox().run(
        [sys.executable, "-c", LIST_DRIVER, str(fake_driver)], _ws(tmp_path, "cpu"), Limits(wall_seconds=20)
    )
    seen = json.loads(r.stdout_tail)
    assert seen.get("error") == "FileNotFoundError" and seen["parent"] is None
    assert seen["env"] is None and seen["cvd"] == ""


@needs_root
def test_an_exposed_folder_shows_the_mounts_below_it_read_only(fake_driver, tmp_path):
    """The bind of a folder that holds a mount point must carry the mount (the squashfs driver case)."""
    parent = fake_driver.parent.parent
    code = "import sys\nfrom pathlib import Path\np = Path(sys.argv[1]) / 'nvidia' / 'lib64'\nprint(sorted(x.name for x in p.iterdir()))\ntry:\n    (p / 'x').write_text('x')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    r = LocalSandbox(expose=[parent]).run([sys.executable, "-c", code, str(parent)], _ws(tmp_path, "e"), Limits())
    assert r.status == "ok", r.stderr_tail
    assert "libnvidia-ml.so.1" in r.stdout_tail and "refused 30" in r.stdout_tail  # EROFS


def test_loader_cache_and_conf_lead_to_the_real_files(tmp_path):
    real = tmp_path / "driver" / "lib64"
    real.mkdir(parents=True)
    (real / "libcuda.so.580.82").write_text("x")
    (real / "libnvidia-ptxjitcompiler.so.580.82").write_text("x")
    system = tmp_path / "usr-lib"
    system.mkdir()
    (system / "libcuda.so.1").symlink_to(real / "libcuda.so.580.82")  # as /lib/libcuda.so.1 on a GPU host
    (system / "libcudart.so.12").write_text("toolkit, not the driver")
    cache = (
        "3 libs found in cache `/etc/ld.so.cache'\n"
        f"\tlibcuda.so.1 (libc6,x86-64) => {system / 'libcuda.so.1'}\n"
        f"\tlibcudart.so.12 (libc6,x86-64) => {system / 'libcudart.so.12'}\n"
        "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"
    )
    conf = tmp_path / "ld.so.conf"
    (tmp_path / "ld.so.conf.d").mkdir()
    conf.write_text(f"include {tmp_path / 'ld.so.conf.d'}/*.conf\n")
    (tmp_path / "ld.so.conf.d" / "nvidia.conf").write_text(f"# the driver\n{real}\n")
    found = gpu.driver_libraries(
        cache_paths=gpu.loader_cache_paths(cache), dirs=gpu.loader_dirs(ld_library_path="", conf=str(conf), known=())
    )
    assert set(found.files) == {str(real / "libcuda.so.580.82"), str(real / "libnvidia-ptxjitcompiler.so.580.82")}
    assert dict(found.links) == {str(system / "libcuda.so.1"): str(real / "libcuda.so.580.82")}
    assert found.dirs == (str(real),) and found.found


def test_nvidia_smi_output_is_parsed_per_gpu():
    assert gpu.parse_memory_used("0, 1024\n1, 80\nbad line\n") == {0: 1024.0, 1: 80.0}


# ------------------------------------------------------------------ memory


MAP_64GB = (
    "import mmap\n"
    "m = mmap.mmap(-1, 64 * 2**30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)  # MAP_NORESERVE\n"
    "m2 = mmap.mmap(-1, 64 * 2**30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ)\n"
    "print('mapped', len(m) + len(m2))\n"
)
BOMB = "print('before the bomb', flush=True)\nx = []\nwhile True: x.append(bytearray(50 * 2**20))\n"


def _mechanisms() -> list[str]:
    found = ["watchdog"]
    if local.LocalSandbox(memory="auto").memory_mechanism != "watchdog":
        found.insert(0, "auto")
    return found


@pytest.mark.parametrize("memory", _mechanisms())
def test_host_memory_bomb_is_oom_with_its_reason_and_keeps_its_output(memory, tmp_path):
    sb = LocalSandbox(memory=memory)
    r = _run(sb, tmp_path / "ws", BOMB, Limits(memory_mb=400, wall_seconds=30))
    assert r.status == "oom", (r.status, r.reason, r.stderr_tail)
    assert "memory limit of 400 MB" in r.reason
    assert "before the bomb" in r.stdout_tail and r.peak_memory_mb >= 300
    assert r.memory_limit == sb.memory_mechanism
    assert not _leftover_groups(), "a run's memory cgroup was left behind"


@pytest.mark.parametrize("memory", _mechanisms())
def test_mapping_64gb_of_address_space_without_touching_it_is_not_killed(memory, tmp_path):
    r = _run(LocalSandbox(memory=memory), tmp_path / "ws", MAP_64GB, Limits(memory_mb=400, wall_seconds=30))
    assert r.status == "ok", (r.reason, r.stderr_tail)
    assert "mapped" in r.stdout_tail


def test_rlimit_as_is_never_set(tmp_path):
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_AS))"
    r = _run(LocalSandbox(), tmp_path / "ws", code, Limits(memory_mb=300))
    assert r.status == "ok" and str(resource_infinity()) in r.stdout_tail


def resource_infinity() -> int:
    import resource

    return resource.RLIM_INFINITY


def _leftover_groups() -> list[str]:
    return [str(p) for p in CGROUP_ROOT.glob(f"**/verifyless-{os.getpid()}-*")] if CGROUP_ROOT.is_dir() else []


# ------------------------------------------------------------------ GPU memory through a fake nvidia-smi


def test_peak_gpu_memory_is_the_rise_over_the_start(tmp_path, monkeypatch):
    counter = tmp_path / "calls"
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n"
        'if [ "$n" = 0 ]; then echo "0, 100"; echo "1, 5"; else echo "0, 740"; echo "1, 9000"; fi\n'
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    r = _run(
        LocalSandbox(),
        tmp_path / "ws",
        "import os, time; print(os.environ['CUDA_VISIBLE_DEVICES']); time.sleep(1.0)",
        Limits(gpus=1, wall_seconds=20),
        env={"CUDA_VISIBLE_DEVICES": "0"},
    )
    assert r.status == "ok" and r.stdout_tail.strip() == "0"
    assert r.peak_gpu_memory_mb == pytest.approx(640.0)  # GPU 1 is not this run's


def test_a_cpu_run_reports_no_gpu_memory(tmp_path):
    r = _run(LocalSandbox(), tmp_path / "ws", "print(1)", Limits())
    assert r.peak_gpu_memory_mb is None


# ------------------------------------------------------------------ GPU assignment


PRINT_GPU = (
    "import os, sys, time\n"
    "print('CVD=' + os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'), file=sys.stderr, flush=True)\n"
    "time.sleep(0.4)\n"
)


def _gpu_task(gpus: int = 1):
    task = load_task("circle_packing")
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, gpus=gpus))


def _seen(v) -> str:
    return next(line for line in v.stderr_tail.splitlines() if line.startswith("CVD=")).removeprefix("CVD=")


def test_concurrent_verifications_hold_disjoint_gpus():
    task = _gpu_task()
    program = task.baseline_program.replace("# EVOLVE-BLOCK-END", PRINT_GPU + "# EVOLVE-BLOCK-END", 1)
    executor = LocalExecutor(capacity=3, gpus=[0, 1, 2])

    async def go():
        spans = []

        async def one():
            start = time.monotonic()
            v = await executor.verify(task, program)
            spans.append((start, time.monotonic(), _seen(v), v))

        await asyncio.gather(*(one() for _ in range(6)))
        return spans

    spans = asyncio.run(go())
    assert all(v.status is Status.OK and v.gpus == 1 for *_, v in spans)
    assert {gpu for _, _, gpu, _ in spans} <= {"0", "1", "2"}
    assert len({gpu for _, _, gpu, _ in spans[:3]}) == 3 or len({s[2] for s in spans}) == 3
    assert executor.gpus.free == (0, 1, 2)


def test_a_cancelled_verification_gives_its_gpus_back_and_a_new_executor_starts_free():
    pool = GpuPool([0, 1])

    async def go():
        async def hold_forever():
            async with pool.hold(2):
                await asyncio.sleep(60)

        held = asyncio.create_task(hold_forever())
        await asyncio.sleep(0.05)
        assert pool.free == ()
        held.cancel()
        await asyncio.gather(held, return_exceptions=True)
        async with pool.hold(1) as got:
            assert got == (0,)

    asyncio.run(go())
    assert pool.free == (0, 1)
    assert LocalExecutor(gpus=[0, 1]).gpus.free == (0, 1)  # a resumed run's executor owns every GPU again


def test_a_cpu_task_holds_no_gpu_and_too_many_gpus_is_a_config_error():
    executor = LocalExecutor(capacity=2, gpus=[0])
    task = load_task("circle_packing")
    v = asyncio.run(executor.verify(task, task.baseline_program))
    assert v.status is Status.OK and v.gpus == 0 and v.peak_gpu_memory_mb is None
    with pytest.raises(ConfigError, match="needs 2 GPU"):
        asyncio.run(executor.verify(_gpu_task(2), task.baseline_program))


# ------------------------------------------------------------------ pre-flight, doctor, budget


@pytest.mark.skipif(bool(gpu.gpu_devices()), reason="this machine has a GPU: the refusal cannot be shown here")
def test_a_gpu_task_on_a_machine_without_a_gpu_stops_at_the_preflight_in_one_line(tmp_path):
    with pytest.raises(SandboxUnavailable, match="declares limits.gpus=1 but this machine has no NVIDIA GPU"):
        require_gpu(LocalSandbox(), Limits(gpus=1), "moons_torch")
    folder = tmp_path / "moons_gpu"
    subprocess.run(["cp", "-r", str(load_task("moons_torch").root), str(folder)], check=True)
    yaml = folder / "task.yaml"
    yaml.write_text(yaml.read_text().replace("threads: 1}", "threads: 1, gpus: 1}"))
    verifyless = Path(sys.executable).with_name("verifyless")
    for argv in ([str(verifyless), "verify", str(folder)], [str(verifyless), "run", str(folder), "--budget", "2"]):
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert done.returncode == 4, done.stdout + done.stderr
        said = (done.stdout + done.stderr).strip()
        assert "no NVIDIA GPU" in said and "Traceback" not in said and len(said.splitlines()) <= 3


def test_doctor_says_isolation_memory_and_gpus():
    report = sandbox_report(LocalSandbox(), probe=False)
    text = "\n".join(report.lines())
    assert report.isolation in text and report.memory in text
    assert ("none on this host" in text) == (not gpu.gpu_devices())


def test_gpu_seconds_cap_counts_evaluator_seconds_times_gpus():
    gate = BudgetGate(BudgetConfig(verifications=None, gpu_seconds=10), lambda: Budget(evaluator_seconds=5.1), gpus=2)
    assert gate.stop_reason() == GPU_SPENT
    cpu = BudgetGate(BudgetConfig(verifications=None, gpu_seconds=10), lambda: Budget(evaluator_seconds=99), gpus=0)
    assert cpu.stop_reason() is None


# ------------------------------------------------------------------ isolation trial


@pytest.mark.skipif(not ROOT, reason="the namespace level needs root")
def test_auto_never_offers_a_level_whose_first_run_fails(monkeypatch, tmp_path):
    real = local.root_view

    def broken_for_namespace(workdir, *, uid, **kw):
        view = real(workdir, uid=uid, **kw)
        if uid is None:
            return view
        return dataclasses.replace(view, links=(*view.links, ("/proc", "nowhere")))  # PID 1 cannot mount /proc

    monkeypatch.setattr(local, "root_view", broken_for_namespace)
    monkeypatch.setattr(local, "_trial_cache", {})
    sb = LocalSandbox()
    assert sb.isolation != "namespace"
    r = _run(sb, tmp_path / "ws", "print('ran')", Limits())
    assert r.status == "ok" and "ran" in r.stdout_tail


def _ws(tmp_path: Path, name: str) -> Path:
    ws = tmp_path / name
    ws.mkdir()
    return ws
