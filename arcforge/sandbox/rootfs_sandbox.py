"""A bubblewrap sandbox whose / is a task image's real root, seen through a copy-on-write view.

`RootfsSandbox` mounts a `CowView` (rootfs.py) of the image's layers under a private upper dir
and binds it as the sandbox's /: uid 0 inside an id-mapped user namespace (rootfs.IdNamespace:
ids 0..65535 inside are ID_BASE.. outside, as Docker maps a container; Docker's default
capabilities, no nested user namespaces), a fresh /proc and /dev, /tmp as the image left it,
every system directory writable (apt-get, /usr/share, /data, /server as in a container), all
writes landing in the upper dir. /app is bound at /workspace too (arcforge's tools and probes
look there); the grading dir at /grading and its tests/ and logs/ at /tests and /logs:
read-only to the agent, writable in grading execs. No network, unless the sandbox belongs to
an image build (`network=BuildNetwork`): then it runs inside that build's namespace.

Without a network, `apt-get`/`apt` are fronted by APT_SHIM (bound over /usr/local/sbin, first on
PATH): `update` succeeds on the image's package lists, an install of packages the image already
has runs the real apt (a no-op "already the newest version"), and an install that needs a
download fails at once, naming the packages and why (a solution script that starts
`apt-get update && apt-get install -y X` under `set -e` works when the image has X).

Memory is limited per process as the data segment (RLIMIT_DATA), never the address space:
Docker limits what a container uses, and runtimes that reserve large address ranges up front
(OCaml's heaps, the JVM, Go) fail under RLIMIT_AS long before they use the memory.

Host-side file methods map sandbox paths into the view: relative paths and /workspace to
/app, /grading to the grading dir, any other absolute path into the root. Paths resolve with
the root as `/` (an absolute symlink inside points into the root, never at the host), and
anything that still leaves the root is refused. Snapshots copy the upper dir (the episode's
changes, not the image); restore remounts over a copy of one. Closing unmounts the view and
deletes the upper dir: the image is never written.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.sandbox.execution import PATH, run_bwrap, wrap_command
from arcforge.sandbox.files import (
    ExecCall,
    StoreBackedSandbox,
    StoreFiles,
    known_snapshot,
    next_snapshot,
)
from arcforge.sandbox.rootfs import (
    DOCKER_CAPS,
    SANDBOX_UID,
    BuildNetwork,
    CowView,
    chown_tree,
    episode_namespace,
)
from arcforge.sandbox.types import (
    APP,
    CONTAINER_MOUNTS,
    GRADING,
    WORKSPACE,
    ExecResult,
    Limits,
    SandboxError,
    SnapshotId,
)

APT_SHIM = r"""#!/bin/sh
# apt in an episode without a network: see arcforge.sandbox.rootfs_sandbox
name=${0##*/}
real=/usr/bin/$name
skip=
cmd=
for a in "$@"; do
  if [ -n "$skip" ]; then skip=; continue; fi
  case "$a" in
    -o|-c|-t|--option|--config-file|--target-release) skip=1 ;;
    -*) ;;
    *) cmd=$a; break ;;
  esac
done
case "$cmd" in
  update)
    echo "$name update: no network in this episode; using the image's package lists" >&2
    exit 0 ;;
  install|reinstall|upgrade|dist-upgrade|full-upgrade|build-dep|source|download)
    plan=$("$real" -s "$@" 2>&1)
    rc=$?
    new=$(printf '%s\n' "$plan" | sed -n 's/^Inst \([^ ]*\).*/\1/p' | tr '\n' ' ')
    if [ $rc -ne 0 ] || [ -n "$new" ]; then
      printf '%s\n' "$plan" | grep -E '^(E|W):' >&2
      echo "$name $cmd: ${new:-$*}: not in this task's image, and episodes have no" \
        "network (only the image build has one): install the package(s) in the Dockerfile" >&2
      exit 100
    fi
    exec "$real" "$@" ;;
esac
exec "$real" "$@"
"""


@dataclass(frozen=True)
class RootfsImage:
    """A built task image: its layers (topmost first), WORKDIR, ENV, USER (empty: root) and
    the recorded ENTRYPOINT / CMD (exec form lists; never run)."""

    lowers: tuple[Path, ...]
    workdir: str = APP
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()


def lookup_user(root: Path, spec: str) -> tuple[int, int, str]:
    """(uid, gid, home) of a Dockerfile USER `spec` (name or id, optionally :group) as the
    image's /etc/passwd and /etc/group under `root` define them. A numeric uid the image does
    not know runs with gid 0 and HOME=/, as Docker does. Raises SandboxError for an unknown
    name."""
    name, _, group = spec.partition(":")

    def table(file: str) -> list[list[str]]:
        try:
            text = resolve_in(root, f"/etc/{file}").read_text()
        except OSError:
            return []
        return [ln.split(":") for ln in text.splitlines() if ln.count(":") >= 2]

    users = table("passwd")
    row = next((r for r in users if r[0] == name or (name.isdigit() and r[2] == name)), None)
    if row is None and not name.isdigit():
        raise SandboxError(f"USER {spec}: no user {name} in the image's /etc/passwd")
    uid = int(row[2]) if row else int(name)
    gid = int(row[3]) if row and len(row) > 3 and row[3].isdigit() else 0
    home = row[5] if row and len(row) > 5 and row[5] else "/"
    if group:
        grow = next((r for r in table("group") if r[0] == group), None)
        if grow is None and not group.isdigit():
            raise SandboxError(f"USER {spec}: no group {group} in the image's /etc/group")
        gid = int(grow[2]) if grow else int(group)
    return uid, gid, home


def resolve_in(root: Path, path: str) -> Path:
    """The host path of `path` inside `root`, following symlinks as the sandbox would (an
    absolute target is relative to `root`). The last component is not followed.
    Raises SandboxError when a `..` or a link leads out of `root`."""
    parts = [p for p in path.split("/") if p and p != "."]
    cur: list[str] = []
    hops = 0
    while parts:
        name = parts.pop(0)
        if name == "..":
            if not cur:
                raise SandboxError(f"{path} resolves outside the sandbox")
            cur.pop()
            continue
        host = root.joinpath(*cur, name)
        if parts and host.is_symlink():
            hops += 1
            if hops > 40:
                raise SandboxError(f"{path}: too many levels of symbolic links")
            target = os.readlink(host)
            parts = [p for p in target.split("/") if p and p != "."] + parts
            if target.startswith("/"):
                cur = []
            continue
        cur.append(name)
    return root.joinpath(*cur)


class RootfsStore(StoreFiles):
    """The host side of one RootfsSandbox: the view, the grading dir and snapshots."""

    def __init__(self, image: RootfsImage, parent: Path | None = None):
        self.root = Path(tempfile.mkdtemp(prefix="arcforge-rfs-", dir=parent))
        self.root.chmod(0o711)  # the sandbox uid must traverse it; listing stays private
        self.grading, self.snapshots = self.root / "grading", self.root / "snapshots"
        self.grading.mkdir(mode=0o755)
        self.snapshots.mkdir(mode=0o700)
        os.chown(self.grading, SANDBOX_UID, SANDBOX_UID)
        try:
            self.view = CowView(list(image.lowers), self.root / "view", volatile=parent is None)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self._ids: list[SnapshotId] = []
        # /workspace is /app (where arcforge's tools look) unless the image has its own
        ws = self.view.merged / WORKSPACE.lstrip("/")
        self.alias_workspace = not ws.is_dir() or not any(ws.iterdir())

    @property
    def merged(self) -> Path:
        return self.view.merged

    def grading_subdirs(self) -> None:
        for name, _ in CONTAINER_MOUNTS:
            d = self.grading / name
            if not d.is_dir():
                d.mkdir(parents=True)
                os.chown(d, SANDBOX_UID, SANDBOX_UID)

    def host_path(self, sandbox_path: str, workdir: str = APP) -> Path:
        """Map a sandbox path to the host (see the module header; relative paths: under
        `workdir`, /app for every caller)."""
        p = sandbox_path if sandbox_path.startswith("/") else f"{workdir}/{sandbox_path}"
        if self.alias_workspace and (p == WORKSPACE or p.startswith(WORKSPACE + "/")):
            p = APP + p[len(WORKSPACE) :]
        if p == GRADING or p.startswith(GRADING + "/"):
            base, rel = self.grading, p[len(GRADING) :]
        else:
            base, rel = self.merged, p
        host = resolve_in(base, rel) if base is self.merged else base / rel.lstrip("/")
        real, rbase = Path(os.path.realpath(host.parent)) / host.name, Path(os.path.realpath(base))
        if rbase != real and rbase not in real.parents:
            raise SandboxError(f"{sandbox_path} resolves outside the sandbox")
        return host

    def fix_owner(self, path: Path, top_only: bool = False) -> None:
        if os.geteuid() != 0 or not os.path.lexists(path):
            return
        if not top_only and path.is_dir() and not path.is_symlink():
            chown_tree(path, SANDBOX_UID)
        else:
            os.lchown(path, SANDBOX_UID, SANDBOX_UID)

    def snapshot(self) -> SnapshotId:
        sid = next_snapshot(self._ids)
        _cp_a(self.view.upper, self.snapshots / sid)
        self._ids.append(sid)
        return sid

    def restore(self, sid: SnapshotId | None) -> None:
        src = self.snapshots / known_snapshot(self._ids, sid)
        self.view.unmount()
        shutil.rmtree(self.view.upper)
        _cp_a(src, self.view.upper)
        self.view.mount()


def _cp_a(src: Path, dst: Path) -> None:
    """Copy an overlay upper dir exactly: whiteouts (device nodes) and xattrs included."""
    subprocess.run(["cp", "-a", "--reflink=auto", str(src), str(dst)], check=True)


class RootfsSandbox(StoreBackedSandbox):
    """A `Sandbox` over a task image's real root (see the module header).

    Args:
        image: the built image.
        limits: per-exec limits.
        workspace: host directory copied into /app on open.
        extra_ro_binds: {host path: sandbox path} bound read-only.
        env: environment for every exec (on top of PATH, HOME=/root and the image's ENV).
        network: the build network to run in (image builds only).
        parent: host directory for the view (builds keep their upper dir; default a temp dir).
        build: an image build: no /workspace, /tests or /logs binds over the image.
    """

    backend = "bwrap-rootfs"
    workdir = APP

    def __init__(
        self,
        image: RootfsImage,
        limits: Limits,
        workspace: str | Path | None = None,
        extra_ro_binds: dict[str | Path, str] | None = None,
        env: dict[str, str] | None = None,
        network: BuildNetwork | None = None,
        parent: Path | None = None,
        build: bool = False,
    ):
        self.exe = shutil.which("bwrap")
        if self.exe is None:
            raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
        if limits.memory_rlimit == "as":  # a container's limit counts memory used, not reserved
            limits = dataclasses.replace(limits, memory_rlimit="data")
        self.image, self.limits, self.network = image, limits, network
        self.build = build
        self.env = dict(env or {})
        self.extra_ro_binds = {str(Path(k).resolve()): v for k, v in (extra_ro_binds or {}).items()}
        self.uid = None  # nsenter, started as host root, becomes root of the id-mapped namespace
        self.user = image.user  # who non-grading execs run as (empty: root), as `docker exec`
        self.store: Any = RootfsStore(image, parent)
        self.apt_shim = None if network else self.store.root / "apt-shim"
        if self.apt_shim is not None:
            self.apt_shim.write_text(APT_SHIM)
            self.apt_shim.chmod(0o755)
        try:
            if workspace is not None:
                self.copy_in(workspace, APP)
            self.store.snapshot()  # "snap-0": the target of a bare restore()
        except BaseException:
            self.close()  # never leave a mount behind
            raise

    def argv(self, cmd: str, env: dict[str, str], cwd: str, grading: bool) -> list[str]:
        """The full command line of one exec (public so it can be inspected/logged)."""
        s = self.store
        s.grading_subdirs()
        gbind = "--bind" if grading else "--ro-bind"
        prefix = self.network.prefix if self.network else episode_namespace().prefix
        args = [
            *prefix,  # root of the id-mapped namespace: bwrap makes no user namespace of its own
            self.exe,
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *([] if self.network else ["--unshare-net"]),
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            *[a for cap in DOCKER_CAPS for a in ("--cap-add", cap)],
            "--bind",
            str(s.merged),
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(64 << 20),
            "--tmpfs",
            "/dev/shm",
            gbind,
            str(s.grading),
            GRADING,
        ]
        if not self.build:  # a build sees the image alone, as `docker build` does
            if s.alias_workspace:
                args += ["--bind", str(s.merged / APP.lstrip("/")), WORKSPACE]
            args += [
                a
                for name, inside in CONTAINER_MOUNTS
                for a in (gbind, str(s.grading / name), inside)
            ]
        if self.network:
            args += ["--ro-bind", str(self.network.resolv), "/etc/resolv.conf"]
        elif self.apt_shim is not None:
            for name in ("apt-get", "apt"):
                args += ["--ro-bind", str(self.apt_shim), f"/usr/local/sbin/{name}"]
        for host, inside in self.extra_ro_binds.items():
            args += ["--ro-bind", host, inside]
        base = {
            "PATH": PATH,
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "USER": "root",
            "DEBIAN_FRONTEND": "noninteractive",
            **self.image.env,
        }
        args += ["--chdir", cwd, "--clearenv"]
        drop: list[str] = []
        if self.user and self.user not in ("root", "0", "0:0") and not grading:
            uid, gid, home = lookup_user(s.merged, self.user)
            base.update(HOME=home, USER=self.user.partition(":")[0])
            named = ":" not in self.user and not self.user.isdigit()
            groups = ["--init-groups"] if named else []
            drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
            drop += groups or ["--clear-groups"]
            drop += ["--"]
        for k, v in {**base, **self.env, **env}.items():
            args += ["--setenv", k, v]
        return [*args, "--", *drop, *wrap_command(cmd, self.limits, "/bin/bash")]

    def _run(self, call: ExecCall) -> ExecResult:
        """Run `cmd` with bash in the image's root (env on top of PATH, HOME=/root and the
        image's ENV; the default cwd is the image's WORKDIR, or /app when the agent removed it)."""
        cwd = call.cwd
        if cwd is None:
            cwd = self.image.workdir
            try:
                if not self.store.host_path(cwd).is_dir():
                    cwd = APP
            except SandboxError:
                cwd = APP
        argv = self.argv(call.cmd, call.env, cwd, call.grading)
        return run_bwrap(argv, call.wall, call.stdin, self.limits, self.store.root, self.uid)

    def close(self) -> None:
        """Unmount the view and delete this sandbox's changes and snapshots."""
        if not self.closed:
            self.closed = True
            self.store.view.close()
            shutil.rmtree(self.store.root, ignore_errors=True)
