"""Sandbox bootstrap: isolates itself, then runs the candidate command.

Run by ``LocalSandbox`` as ``python -I -S _boot.py SPEC_JSON`` (standard
library only, nothing from verifyless, so start-up stays near 20 ms). The
spec is a JSON object written by ``verifyless.sandbox.local``; the outcome
(exit status, peak memory, timestamps, or a setup error) is written as one
JSON object to the inherited ``status_fd``.

Process layout in the namespace modes::

    outer (host pid, root)           waits for PID 1; SIGTERM -> SIGKILL PID 1
      └─ PID 1 of a new pid/mount/net namespace (root): mounts, then supervises
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
MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 4096, 16384, 1 << 18, 1 << 21

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38

# Always covered by an empty read-only tmpfs in the namespace modes: the
# world-writable places on a usual Linux host (other runs' files live there).
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/run/lock")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


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


def cover(path: str, keeps: list[str], fds: dict[str, int]) -> bool:
    """Mask ``path`` with an empty tmpfs (a file: with /dev/null), re-exposing ``keeps`` under it.

    The keeps (workspace, interpreter) are bind-mounted back at their own
    paths from ``O_PATH`` descriptors opened before any mount, so a hidden
    directory that happens to contain the workspace still hides everything
    else. The read-only pass later turns the tmpfs read-only.
    """
    if not os.path.lexists(path) or path in keeps:
        return False  # a path that must stay visible wins over hiding it
    if not os.path.isdir(path):
        mount("/dev/null", path, None, MS_BIND)
        return True
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=512,mode=755")
    for keep in keeps:
        if _under(keep, path):
            os.makedirs(keep, mode=0o755, exist_ok=True)
            mount(f"/proc/self/fd/{fds[keep]}", keep, None, MS_BIND | MS_REC)
    return True


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo", "rb") as fh:
        for line in fh:
            raw = line.split(b" ")[4]
            # mountinfo escapes space, tab, newline and backslash as \ooo
            points.append(os.fsdecode(raw.decode("unicode_escape").encode("latin-1")))
    return list(dict.fromkeys(points))


def _remount_readonly(point: str) -> None:
    flags = os.statvfs(point).f_flag
    extra = 0
    for st_bit, ms_bit in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME),
                           (2048, MS_NODIRATIME), (4096, MS_RELATIME)):
        if flags & st_bit:
            extra |= ms_bit  # locked flags must be repeated or the remount is refused
    mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | extra)


def setup_filesystem(spec: dict) -> None:
    """In PID 1: private mounts, fresh /proc, masks, private /dev/shm, everything else read-only."""
    workdir, uid = spec["workdir"], spec["uid"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    keeps = [workdir] + [p for p in spec["expose"] if os.path.isdir(p) and p != "/"]
    keeps = sorted(set(keeps), key=len)
    keeps = [k for i, k in enumerate(keeps) if not any(_under(k, other) for other in keeps[:i])]
    fds = {k: os.open(k, os.O_PATH | os.O_DIRECTORY) for k in keeps}
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)

    covered: list[str] = []
    targets = set(spec["hide"]) | set(SCRATCH_DIRS) | {os.path.dirname(workdir)}
    for path in sorted(targets, key=lambda p: p.count("/")):
        if not any(_under(path, c) for c in covered) and cover(path, keeps, fds):
            covered.append(path)
    if uid is not None:
        # The sandbox uid must be able to walk to each keep: mask an
        # unreachable ancestor (e.g. /root holding the interpreter).
        for keep in keeps:
            parts = keep.strip("/").split("/")
            for i in range(1, len(parts)):
                ancestor = "/" + "/".join(parts[:i])
                st = os.stat(ancestor)
                if not (st.st_mode & 0o001 or st.st_uid == uid) and cover(ancestor, keeps, fds):
                    covered.append(ancestor)
    if os.path.isdir("/dev/shm"):
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec['shm_mb']}m,mode=1777")

    writable = {workdir, "/dev/shm"}
    for point in _mount_points():
        if point in writable or any(_under(point, p) for p in ("/proc", "/sys", "/dev")):
            continue
        try:
            _remount_readonly(point)
        except OSError:
            if point == "/":
                raise


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


def main() -> int:
    spec = json.loads(sys.argv[1])
    status_fd = spec["status_fd"]
    os.set_inheritable(status_fd, False)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # if verifyless dies, so does the sandbox
    if os.getppid() != spec["parent_pid"]:
        return 1
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
