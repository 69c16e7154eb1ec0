"""The allowlist: which host paths a sandboxed candidate can see (namespace and userns levels).

``root_view(...)`` turns the policy below into the plain lists the bootstrap
(``_boot.py``) mounts into a fresh tmpfs root before it pivots into it. Every
path is shown at its own host path; anything not listed is *absent* from the
candidate's filesystem (not merely unreadable). The table in
docs/design/sandbox.md is this module in prose; keep the two in step.

Shown read-only:

* the interpreter: ``sys.base_prefix`` / ``sys.base_exec_prefix`` (its standard
  library and the base interpreter's site-packages) and the directory of the
  resolved ``sys.executable``;
* the environment it runs in: ``sys.prefix`` (a virtualenv's site-packages).
  Paths that ``.pth`` files or editable finders point at (an editable
  install's source checkout) are *not* shown: ``site`` skips missing entries,
  so the interpreter starts and only imports of those packages fail;
* system programs and libraries (``SYSTEM_PATHS``), including ``/usr/share``
  (time zones, CA certificates) but not ``/usr/src``, ``/usr/local/src``,
  ``/usr/include`` or ``/opt``;
* a few ``/etc`` entries (``ETC_PATHS``: the dynamic linker cache, CA
  certificates, time zone, alternatives links) plus synthesised ``/etc/passwd``,
  ``/etc/group`` and ``/etc/hosts`` naming only root, the sandbox user and
  localhost;
* ``expose``: extra directories the caller asks for.

Shown read-write: the workspace. Devices: ``/dev/null``, ``zero``, ``full``,
``random``, ``urandom``; a run given GPUs also gets ``/dev/nvidia*``,
``/dev/nvidia-caps/*`` and the driver's user-space libraries, file by file,
wherever this host keeps them (``verifyless.sandbox.gpu``). The bootstrap adds a fresh ``/proc`` for the run's PID namespace, a
private ``/dev/shm``, and an empty read-only ``/tmp``.

Symlinks on the way to a listed path (``/lib -> usr/lib`` on merged-/usr
systems, ``/etc/localtime -> /usr/share/zoneinfo/...``) are recreated and the
path they lead to is shown instead. ``hide`` paths that fall inside a shown
directory are left out: the directory's other entries are bound one by one,
so the hidden ones are absent (past 256 entries the directory is bound whole
and the hidden paths are masked with an empty tmpfs, or ``/dev/null`` over a
file).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from verifyless.sandbox.gpu import DriverLibraries, gpu_devices

SYSTEM_PATHS = (
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/libexec",
    "/usr/share",
    "/usr/local/bin",
    "/usr/local/lib",
)
ETC_PATHS = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/alternatives",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


@dataclass(frozen=True)
class RootView:
    """What the bootstrap mounts: ``binds`` as ``(path, mode)``, mode ``ro``/``rw``/``dev``, or ``dir``
    (an empty read-only directory of the new root, holding the binds of its visible children)."""

    binds: tuple[tuple[str, str], ...]
    links: tuple[tuple[str, str], ...]
    files: dict[str, str]
    hide: tuple[str, ...]

    def to_spec(self) -> dict:
        return {
            "binds": [list(b) for b in self.binds],
            "links": [list(link) for link in self.links],
            "files": dict(self.files),
            "hide": list(self.hide),
        }


def interpreter_paths() -> list[str]:
    """The interpreter's prefixes and the directory of the real executable (read-only binds)."""
    real = os.path.realpath(sys.executable)
    return [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, os.path.dirname(real)]


def visible_sys_path(expose: Sequence[str] = ()) -> list[str]:
    """This interpreter's ``sys.path`` entries that the sandbox shows (an editable checkout's are not)."""
    roots = [os.path.realpath(p) for p in [*interpreter_paths(), *SYSTEM_PATHS, *expose] if os.path.exists(p)]
    return [p for p in sys.path if p and os.path.isabs(p) and any(_under(os.path.realpath(p), r) for r in roots)]


def root_view(
    workdir: Path,
    *,
    uid: int | None,
    expose: Sequence[str] = (),
    hide: Sequence[str] = (),
    gpu: DriverLibraries | None = None,
) -> RootView:
    """The allowlisted view for one run (see the module docstring for the policy).

    ``gpu``: the driver's libraries of a run given GPUs (``sandbox.gpu.host_driver_libraries()``); its
    files are shown read-only one by one, with the symlinks that lead to them, and the GPU devices
    are bound. None (a CPU run): no GPU device and no driver library is shown.
    """
    system_wanted, system_links = _system_part()
    links = dict(system_links)
    wanted = list(system_wanted)
    if gpu is not None:
        wanted += [(d, "dev") for d in gpu_devices()]
        wanted += [(f, "ro") for f in gpu.files]
        links.update(gpu.links)
    for path in expose:
        resolved = _resolve(path, links)
        if resolved is not None:
            wanted.append((resolved, "ro"))
    work = os.path.realpath(workdir)
    hidden = [_real_parent(p) for p in hide]
    ro: list[tuple[str, str]] = []
    for path in _outermost([p for p, mode in wanted if mode == "ro"]):
        ro += _split(path, [h for h in hidden if _under(h, path) and h != path and not _under(work, h)], links)
    binds = ro + [(d, m) for d, m in wanted if m == "dev"] + [(work, "rw")]
    shown = [p for p, _ in binds]
    masked = [h for h in hidden if _maskable(h, [p for p, m in ro if m == "ro"], shown)]
    return RootView(
        binds=tuple(binds), links=tuple(sorted(links.items())), files=_etc_files(uid), hide=tuple(sorted(set(masked)))
    )


def _split(path: str, hidden: list[str], links: dict[str, str], budget: int = 256) -> list[tuple[str, str]]:
    """Show ``path`` without the ``hidden`` entries below it: bind its other children one by one.

    The directories on the way become empty read-only directories of the new root (mode ``dir``),
    so a hidden entry is absent, not merely emptied. Past ``budget`` binds the directory is bound
    whole and the hidden entries are masked instead (``root_view`` does that).
    """
    if not hidden:
        return [(path, "ro")]
    if path in hidden or not os.path.isdir(path) or os.path.islink(path):
        return []
    entries: list[tuple[str, str]] = [(path, "dir")]
    for name in sorted(os.listdir(path)):
        child = os.path.join(path, name)
        if child in hidden:
            continue
        below = [h for h in hidden if _under(h, child)]
        if os.path.islink(child):
            links[child] = os.readlink(child)
        elif below:
            entries += _split(child, below, links, budget)
        else:
            entries.append((child, "ro"))
        if len(entries) > budget:
            return [(path, "ro")]
    return entries


@lru_cache(maxsize=1)
def _system_part() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The interpreter, system and /etc binds plus the basic devices (resolved once per process)."""
    links: dict[str, str] = {}
    wanted: list[tuple[str, str]] = []
    for path in [*interpreter_paths(), *SYSTEM_PATHS, *ETC_PATHS]:
        resolved = _resolve(path, links)
        if resolved is not None:
            wanted.append((resolved, "ro"))
    wanted += [(d, "dev") for d in DEVICES if os.path.exists(d)]
    return tuple(wanted), tuple(links.items())


def _resolve(path: str, links: dict[str, str]) -> str | None:
    """Follow symlinks component by component, recording each; the real path, or None if absent."""
    current = "/"
    parts = [p for p in os.path.abspath(path).split("/") if p]
    for hops, part in enumerate(parts):
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            target = os.readlink(candidate)
            links[candidate] = target
            rest = "/".join(parts[hops + 1 :])
            if len(links) > 64:
                return None  # a symlink loop
            return _resolve(os.path.join(os.path.dirname(candidate), target, rest), links)
        if not os.path.exists(candidate):
            return None
        current = candidate
    return current


def _real_parent(path: str) -> str:
    """``path`` with symlinks resolved in its parent only (a hidden entry that is a link stays itself)."""
    path = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _outermost(paths: list[str]) -> list[str]:
    """Drop paths already inside another listed directory; parents first."""
    kept: list[str] = []
    for path in sorted(set(paths), key=lambda p: (p.count("/"), p)):
        if not any(_under(path, k) for k in kept):
            kept.append(path)
    return kept


def _maskable(path: str, ro: list[str], shown: list[str]) -> bool:
    """A hidden path needs a mask only strictly inside a read-only bind and with nothing shown below it."""
    inside = any(_under(path, r) and path != r for r in ro)
    return inside and not any(_under(s, path) for s in shown)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _etc_files(uid: int | None) -> dict[str, str]:
    users = ["root:x:0:0:root:/nonexistent:/usr/sbin/nologin"]
    groups = ["root:x:0:"]
    if uid is not None and uid != 0:
        users.append(f"sandbox:x:{uid}:{uid}:verifyless sandbox:/nonexistent:/usr/sbin/nologin")
        groups.append(f"sandbox:x:{uid}:")
    return {
        "/etc/passwd": "\n".join(users) + "\n",
        "/etc/group": "\n".join(groups) + "\n",
        "/etc/hosts": "127.0.0.1 localhost\n::1 localhost\n",
    }


__all__ = ["RootView", "root_view", "interpreter_paths", "visible_sys_path", "SYSTEM_PATHS", "ETC_PATHS", "DEVICES"]
