"""Sandbox bootstrap: isolates itself, then runs the candidate command.

Run by ``LocalSandbox`` as ``python -I -S _boot.py`` with the spec on stdin
(standard library only, nothing from verifyless, so start-up stays near 20 ms).
The spec is a JSON object written by ``verifyless.sandbox.local``; the outcome
(exit status, peak memory, timestamps, or a setup error) is written as one
JSON object to the inherited ``status_fd``.

Process layout in the namespace modes::

    outer (host pid, root)           waits for PID 1; SIGTERM -> SIGKILL PID 1
      └─ PID 1 of a new pid/mount/net namespace (root): builds the allowlisted
         root on a tmpfs, pivots into it, then supervises
           └─ candidate: setsid, rlimits, drop to the sandbox uid, exec argv

When PID 1 exits the kernel kills every process left in the namespace and
PID 1's exit completes only after they are gone, so once the outer process
has reaped PID 1 nothing the candidate started is alive (daemons included).
In ``process`` mode there is no namespace: the outer process is the
supervisor, a child subreaper that kills whatever is left after the run.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import signal
import sys
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME = 32, 1024, 2048
MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE, MS_RELATIME = 4096, 8192, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
PR_SET_SECUREBITS = 28
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1, 2  # root gains no capabilities across execve

PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}  # syscall numbers
STAGING = "/tmp"  # where the new root is assembled (in the private mount namespace only)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.chroot.argtypes = [ctypes.c_char_p]


def _enc(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_enc(source), _enc(target), _enc(fstype), flags, _enc(data)), f"mount {target}")


def prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl {option}")


def report(fd: int, payload: dict) -> None:
    try:
        os.write(fd, json.dumps(payload).encode())
    except OSError:
        pass  # the parent is gone; nothing to tell


# ------------------------------------------------------------------ namespaces


def enter_namespaces(spec: dict) -> None:
    """unshare pid+mount+net (+user when not root); the next fork becomes PID 1."""
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET
    if spec["mode"] == "userns":
        uid, gid = os.getuid(), os.getgid()
        _check(_libc.unshare(flags | CLONE_NEWUSER), "unshare(user, pid, mount, net)")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    else:
        _check(_libc.unshare(flags), "unshare(pid, mount, net)")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _remount(point: str, readonly: bool) -> None:
    """Remount a bind ``nosuid,nodev`` (+ ``ro``), repeating the flags the kernel locked on it."""
    flags = os.statvfs(point).f_flag
    extra = MS_NOSUID | MS_NODEV | (MS_RDONLY if readonly else 0)
    for st_bit, ms_bit in (
        (1, MS_RDONLY),
        (8, MS_NOEXEC),
        (1024, MS_NOATIME),
        (2048, MS_NODIRATIME),
        (4096, MS_RELATIME),
    ):
        if flags & st_bit and (ms_bit != MS_RDONLY or readonly):
            extra |= ms_bit  # locked flags must be repeated or the remount is refused
    mount(None, point, None, MS_REMOUNT | MS_BIND | extra)


def _make_target(target: str, is_dir: bool) -> None:
    if os.path.lexists(target):
        return
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if is_dir:
        os.mkdir(target, 0o755)
    else:
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))


def _bind(fd: int, target: str, is_dir: bool, mode: str, submounts: list[str]) -> None:
    """Bind the host path behind ``fd`` (an ``O_PATH`` descriptor) at ``target`` inside the new root.

    A read-only directory is bound recursively, so mounts below it (a driver folder the boot mounted
    as its own squashfs, a container runtime's library mount) show their contents instead of an
    empty mount point; each of those ``submounts`` (paths inside ``target``) is then made read-only
    too, or detached when the kernel refuses that.
    """
    _make_target(target, is_dir)
    recursive = MS_REC if mode == "ro" and is_dir else 0
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | recursive)
    if mode == "dev":
        return
    _remount(target, readonly=mode == "ro")
    for sub in submounts if recursive else ():
        try:
            _remount(sub, readonly=True)
        except OSError:
            _check(_libc.umount2(os.fsencode(sub), MNT_DETACH), f"umount2 {sub}")


def mount_points() -> list[str]:
    """Every mount point of this mount namespace (``/proc/self/mountinfo``, escapes decoded)."""
    with open("/proc/self/mountinfo", "rb") as fh:
        lines = fh.read().decode("utf-8", "surrogateescape").splitlines()
    points = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def _below(points: list[str], path: str) -> list[str]:
    """Mount points strictly inside ``path``, outermost first."""
    return sorted((p for p in points if p != path and _under(p, path)), key=lambda p: p.count("/"))


def _mask(target: str) -> None:
    """Cover a path that lies under an allowed bind: empty read-only tmpfs, or /dev/null for a file."""
    if not os.path.lexists(target) or os.path.islink(target):
        return
    if os.path.isdir(target):
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,nr_inodes=8,mode=755")
    else:
        mount("/dev/null", target, None, MS_BIND)


def _pivot(new_root: str) -> None:
    """Make ``new_root`` the root of this mount namespace and drop the old one entirely."""
    os.chdir(new_root)
    number = PIVOT_ROOT.get(os.uname().machine)
    if number is not None and _libc.syscall(number, b".", b".") == 0:
        _check(_libc.umount2(b".", MNT_DETACH), "umount2(old root)")  # the old root sat on top of the new
    else:  # unknown architecture or a rootfs that refuses pivot_root: move the new root over / instead
        mount(new_root, "/", None, MS_MOVE)
        _check(_libc.chroot(b"."), "chroot")
    os.chdir("/")


def setup_filesystem(spec: dict) -> None:
    """In PID 1: build an allowlisted root on a tmpfs and pivot into it (see docs/design/sandbox.md).

    ``spec["binds"]`` lists ``[path, mode]`` (mode ``ro``, ``rw``, ``dev``, or ``dir``: an
    empty directory of the new root), each shown at its own path; ``links`` are symlinks to
    recreate (``/lib -> usr/lib``), ``files`` small synthesised files (``/etc/passwd``),
    ``hide`` paths masked even under a bind. Host paths are opened (``O_PATH``) before anything
    is mounted, so a bind source below the staging mount point is still reachable. Nothing else
    of the host is reachable afterwards.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    sources = [(path, mode) for path, mode in spec["binds"] if mode != "dir" and os.path.lexists(path)]
    fds = [os.open(path, os.O_PATH | os.O_CLOEXEC) for path, _ in sources]
    dirs = [os.path.isdir(f"/proc/self/fd/{fd}") for fd in fds]
    points = mount_points()
    root = STAGING
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
    for path in (p for p, mode in spec["binds"] if mode == "dir"):
        os.makedirs(root + path, mode=0o755, exist_ok=True)
    try:
        for (path, mode), fd, is_dir in zip(sources, fds, dirs, strict=False):
            _bind(fd, root + path, is_dir, mode, [root + p for p in _below(points, os.path.realpath(path))])
    finally:
        for fd in fds:
            os.close(fd)
    for path, target in spec["links"]:
        if not os.path.lexists(root + path):
            os.makedirs(os.path.dirname(root + path), mode=0o755, exist_ok=True)
            os.symlink(target, root + path)
    for path, text in spec["files"].items():
        os.makedirs(os.path.dirname(root + path), mode=0o755, exist_ok=True)
        with open(root + path, "w") as fh:
            fh.write(text)
        os.chmod(root + path, 0o644)
    for path in spec["hide"]:
        _mask(root + path)
    _setup_dev(root, spec)
    os.makedirs(root + "/proc", mode=0o555, exist_ok=True)
    os.makedirs(root + "/tmp", mode=0o755, exist_ok=True)  # stays empty and read-only
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _pivot(root)
    _remount("/", readonly=True)


def _setup_dev(root: str, spec: dict) -> None:
    dev = root + "/dev"
    os.makedirs(dev, mode=0o755, exist_ok=True)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(dev + "/shm", 0o1777)
    mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec['shm_mb']}m,mode=1777")


# ------------------------------------------------------------------ candidate


def exec_candidate(spec: dict) -> None:
    """In the forked child: own session, limits, unprivileged uid, then exec. Never returns."""
    argv = spec["argv"]
    try:
        os.setsid()
        os.chdir(spec["workdir"])
        for name, (soft, hard) in spec["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        if spec["uid"] is not None:
            os.setgroups([])
            os.setgid(spec["gid"])
            os.setuid(spec["uid"])
        elif spec["mode"] == "userns":
            # uid 0 of the user namespace: keep it from holding capabilities after exec
            prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
        # Python ignores SIGPIPE and SIGXFSZ; ignored dispositions survive exec.
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as exc:
        os.write(2, f"sandbox: cannot start {argv[0]!r}: {exc.strerror or exc}\n".encode())
    os._exit(127)


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid:
                found.append(int(entry))
    return found


def kill_leftovers() -> None:
    """Process mode: SIGKILL every descendant (orphans re-parent to us, the subreaper)."""
    me = os.getpid()
    for _ in range(200):
        kids = _children_of(me)
        if not kids:
            return
        for kid in kids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(kid, signal.SIGKILL)
                except OSError:
                    pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.005)


def supervise(spec: dict, status_fd: int) -> int:
    """Fork the candidate, reap everything, report status and peak memory."""
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(status_fd)
        exec_candidate(spec)

    def stop(signum, frame):  # the parent's timeout / output cap
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass

    signal.signal(signal.SIGTERM, stop)
    status = None
    while status is None:
        try:
            wpid, wstatus = os.waitpid(-1, 0)  # PID 1 / subreaper also reaps orphans
        except ChildProcessError:
            break
        if wpid == pid:
            status = wstatus
    end = time.monotonic()
    if spec["mode"] == "process":
        stop(0, None)
        kill_leftovers()
    payload = {"start": start, "end": end, "maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}
    if status is not None and os.WIFSIGNALED(status):
        payload["signal"] = os.WTERMSIG(status)
    elif status is not None:
        payload["exit"] = os.WEXITSTATUS(status)
    report(status_fd, payload)
    return 0


def read_spec() -> dict:
    """The spec arrives on stdin (not argv: PID 1's command line is readable inside); stdin is then /dev/null."""
    spec = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return spec


def main() -> int:
    spec = read_spec()
    status_fd = spec["status_fd"]
    os.set_inheritable(status_fd, False)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # if verifyless dies, so does the sandbox
    if os.getppid() != spec["parent_pid"]:
        return 1
    if spec.get("cgroup_procs"):
        try:  # join the run's memory cgroup before anything is forked: every process of the run inherits it
            with open(spec["cgroup_procs"], "w") as fh:
                fh.write("0")
        except OSError as exc:
            report(status_fd, {"error": f"cannot join the run's memory cgroup {spec['cgroup_procs']}: {exc}"})
            return 125
    if spec["mode"] == "process":
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        return supervise(spec, status_fd)
    try:
        enter_namespaces(spec)
    except OSError as exc:
        report(status_fd, {"error": f"cannot create namespaces: {exc}"})
        return 125
    if spec.get("probe"):
        child = os.fork()
        if child == 0:
            try:
                mount(None, "/", None, MS_REC | MS_PRIVATE)
                mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except OSError:
                os._exit(1)
            os._exit(0)
        return 0 if os.waitpid(child, 0)[1] == 0 else 1
    init = os.fork()
    if init == 0:
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            setup_filesystem(spec)
        except OSError as exc:
            report(status_fd, {"error": f"cannot set up the sandbox filesystem: {exc}"})
            os._exit(125)
        os._exit(supervise(spec, status_fd))

    def stop(signum, frame):
        os.kill(init, signal.SIGKILL)  # PID 1 dies -> the kernel kills the whole namespace

    signal.signal(signal.SIGTERM, stop)
    _, wstatus = os.waitpid(init, 0)
    return 125 if os.WIFEXITED(wstatus) and os.WEXITSTATUS(wstatus) == 125 else 0


if __name__ == "__main__":
    sys.exit(main())
