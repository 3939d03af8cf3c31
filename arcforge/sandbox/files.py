"""Host-side storage of a sandbox: the workspace copy, the grading dir and snapshots.

Layout of one sandbox on the host (a private temp dir, mode 0711):

    root/workspace/   copy of the caller's workspace; the command's /workspace (read-write)
    root/grading/     the command's /grading: read-only, writable only in grading execs
    root/snapshots/   one full copy per snapshot (mode 0700, never visible inside)
    root/layer/       container-like roots only (arcforge.sandbox.root): this sandbox's copy of the
                      task's system layer (etc, usr/local, root, opt, var, home, srv)

The workspace is *copied* in, never bound: the caller's directory stays pristine and
snapshots/restores are exact (contents, modes, mtimes, symlinks, deletions).
Host-side file methods resolve every path and refuse anything that leaves the workspace or
the grading dir, so a symlink the agent planted (`/workspace/x -> /etc/shadow`) cannot make the
host read or write outside. FIFOs are recreated rather than opened and sockets/devices are
skipped, so a planted FIFO cannot hang the host. No sandboxed process runs between execs
(each exec's PID namespace dies with it), so these checks do not race with the agent.
Deliberate simplifications: snapshots are plain copies (no reflinks/overlays); hard links
inside the workspace are copied as separate files; disk usage is not capped (files are, by
RLIMIT_FSIZE).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from arcforge.sandbox.types import GRADING, WORKSPACE, ExecResult, Limits, SandboxError, SnapshotId


def _copy_entry(src: str, dst: str) -> None:
    st = os.lstat(src)
    if stat.S_ISREG(st.st_mode):
        shutil.copy2(src, dst, follow_symlinks=False)
    elif stat.S_ISFIFO(st.st_mode):
        os.mkfifo(dst, stat.S_IMODE(st.st_mode))
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    # sockets and device nodes are skipped: they cannot be restored meaningfully


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a file or directory exactly (symlinks as links, modes, mtimes), never following links."""
    if src.is_symlink() or not src.is_dir():
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            _copy_entry(str(src), str(dst))
        return
    shutil.copytree(src, dst, symlinks=True, copy_function=_copy_entry, dirs_exist_ok=True)


def clear_dir(path: Path) -> None:
    """Delete everything inside `path` (not `path` itself: a container may have it mounted)."""
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def next_snapshot(ids: list[SnapshotId]) -> SnapshotId:
    """The id the next snapshot takes ("snap-0", "snap-1", ...)."""
    return SnapshotId(f"snap-{len(ids)}")


def known_snapshot(ids: list[SnapshotId], sid: SnapshotId | None) -> SnapshotId:
    """`sid` when it was taken (None: the latest one); a SandboxError for any other id."""
    if sid is None and ids:
        sid = ids[-1]
    if sid not in ids:
        raise SandboxError(f"unknown snapshot {sid!r}")
    return sid


def etc_identity(uid: int) -> dict[str, str]:
    """passwd, group and hosts for a sandbox whose user is `uid` (named \"sandbox\")."""
    return {
        "passwd": f"root:x:0:0:root:/root:/bin/bash\nsandbox:x:{uid}:{uid}:sandbox:/tmp:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nsandbox:x:{uid}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n",
    }


class StoreFiles:
    """The file operations of a sandbox's host store, over its `host_path` and `fix_owner`
    (`workdir`: where relative sandbox paths lie)."""

    def host_path(self, sandbox_path: str, workdir: str) -> Path:
        raise NotImplementedError

    def fix_owner(self, path: Path, top_only: bool = False) -> None:
        raise NotImplementedError

    def read(self, sandbox_path: str, workdir: str = WORKSPACE) -> str:
        path = self.host_path(sandbox_path, workdir)
        if not path.exists() or not stat.S_ISREG(os.lstat(path).st_mode):
            raise SandboxError(f"{sandbox_path} is not a regular file")
        return path.read_text(errors="replace")

    def write(
        self, sandbox_path: str, content: str | bytes, mode: int | None, workdir: str
    ) -> None:
        path = self.host_path(sandbox_path, workdir)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise SandboxError(f"{sandbox_path} exists and is not a regular file")
        made = [p for p in reversed(path.parents) if not p.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        if mode is not None:
            path.chmod(mode)
        for p in [*made, path]:
            self.fix_owner(p, top_only=True)

    def copy_in(self, host_src: str | Path, sandbox_path: str, workdir: str) -> None:
        dst = self.host_path(sandbox_path, workdir)
        if dst.is_symlink():
            raise SandboxError(f"{sandbox_path} is a symlink")
        copy_tree(Path(host_src), dst)
        self.fix_owner(dst)

    def copy_out(self, sandbox_path: str, host_dst: str | Path, workdir: str) -> None:
        copy_tree(self.host_path(sandbox_path, workdir), Path(host_dst))


class HostStore(StoreFiles):
    """The host directories behind one sandbox, and safe path mapping into them.

    With `layer` (a container-like root's layer directory, see arcforge.sandbox.root) the layer's
    `app/` seeds the workspace (the caller's workspace is copied on top), its system dirs are
    copied to root/layer/, sandbox paths under them (/etc/..., /usr/local/...) map there, and
    snapshots include them (the initial one refers to the cached layer instead of copying it).
    The store takes that initial snapshot, "snap-0", itself.
    """

    def __init__(
        self,
        workspace: str | Path | None,
        owner: int | None,
        layer: Path | None = None,
        layer_dirs: tuple[str, ...] = (),
    ):
        if workspace is not None and not Path(workspace).is_dir():
            raise SandboxError(f"workspace {workspace} is not a directory")
        self.root = Path(tempfile.mkdtemp(prefix="arcforge-sbx-"))
        self.root.chmod(0o711)  # an unprivileged bwrap must traverse it; listing stays private
        self.owner = owner  # host uid:gid the sandboxed processes run as (set when we are root)
        self.workspace, self.grading = self.root / "workspace", self.root / "grading"
        self.snapshots = self.root / "snapshots"
        for d in (self.workspace, self.grading):
            d.mkdir(mode=0o755)
        self.snapshots.mkdir(mode=0o700)
        self.layer: Path | None = None
        self.layer_dirs = layer_dirs
        if layer is not None:
            if (layer / "app").is_dir():
                copy_tree(layer / "app", self.workspace)
            self.layer = self.root / "layer"
            self.layer.mkdir(mode=0o755)
            for d in layer_dirs:
                copy_tree(layer / d, self.layer / d)
            self.fix_owner(self.layer)
        if workspace is not None:
            copy_tree(Path(workspace), self.workspace)
        self.fix_owner(self.workspace)
        self.fix_owner(self.grading, top_only=True)
        self._ids: list[SnapshotId] = []
        self._layer_snaps: dict[SnapshotId, Path] = {}
        self.snapshot(layer_from=layer)  # "snap-0": the initial state, target of a bare restore()

    def grading_subdirs(self, names: tuple[str, ...]) -> None:
        """Make sure grading/<name> exists for each bind source (a grader may have removed it)."""
        for name in names:
            d = self.grading / name
            if not d.is_dir():
                d.mkdir(parents=True, exist_ok=True)
                self.fix_owner(d)

    # --- ownership: sandboxed processes must own the workspace they write ---------------
    def fix_owner(self, path: Path, top_only: bool = False) -> None:
        if self.owner is None or not path.exists():
            return
        os.lchown(path, self.owner, self.owner)
        if top_only or not path.is_dir() or path.is_symlink():
            return
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), self.owner, self.owner)

    # --- sandbox path -> host path ------------------------------------------------------
    def host_path(self, sandbox_path: str, workdir: str = WORKSPACE) -> Path:
        """Map a sandbox path to the host, refusing anything that resolves outside its area."""
        p = sandbox_path
        if not p.startswith("/"):
            p = f"{WORKSPACE}/{p}"
        elif workdir != WORKSPACE and p.startswith(workdir):
            p = WORKSPACE + p[len(workdir) :]
        areas = [(WORKSPACE, self.workspace), (GRADING, self.grading)]
        if self.layer is not None:
            areas += [("/" + d, self.layer / d) for d in self.layer_dirs]
        for prefix, base in areas:
            if p == prefix or p.startswith(prefix + "/"):
                candidate = base / p[len(prefix) :].lstrip("/")
                real = Path(os.path.realpath(candidate))
                if real == base or base in real.parents:
                    return real if not candidate.is_symlink() else candidate
                raise SandboxError(f"{sandbox_path} resolves outside the sandbox")
        where = ", ".join(prefix for prefix, _ in areas)
        raise SandboxError(f"{sandbox_path} is not under {where}")

    # --- snapshots -------------------------------------------------------------------
    def snapshot(self, layer_from: Path | None = None) -> SnapshotId:
        """Copy the workspace (and the layer) aside. `layer_from`: an unmodified source of the
        layer to refer to instead of copying it (the cached layer, for the initial snapshot)."""
        sid = next_snapshot(self._ids)
        copy_tree(self.workspace, self.snapshots / sid)
        if self.layer is not None:
            if layer_from is None:
                layer_from = self.snapshots / f"{sid}.layer"
                copy_tree(self.layer, layer_from)
            self._layer_snaps[sid] = layer_from
        self._ids.append(sid)
        return sid

    def restore(self, sid: SnapshotId | None) -> None:
        """Make the workspace exactly snapshot `sid` (None: the latest one)."""
        src = self.snapshots / known_snapshot(self._ids, sid)
        clear_dir(self.workspace)
        copy_tree(src, self.workspace)
        shutil.copystat(src, self.workspace)
        self.fix_owner(self.workspace)
        if self.layer is not None:
            clear_dir(self.layer)
            for d in self.layer_dirs:
                copy_tree(self._layer_snaps[sid] / d, self.layer / d)
            self.fix_owner(self.layer)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass(frozen=True)
class ExecCall:
    """One `exec` as a backend runs it: the timeout resolved to `wall` seconds, `env` a dict."""

    cmd: str
    wall: float
    stdin: str | None
    env: dict[str, str]
    cwd: str | None
    grading: bool


class StoreBackedSandbox:
    """`exec`, the file methods and the context manager, shared by every backend (one level of
    subclassing).

    A backend sets `backend`, `workdir`, `limits`, `store` and implements `_run` and `close`;
    after a host-side change it may need `_after_host_change` (the docker backend re-owns files).
    """

    backend: str
    workdir: str
    limits: Limits
    store: HostStore
    closed: bool = False

    def exec(
        self,
        cmd: str,
        timeout: float | None = None,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        grading: bool = False,
    ) -> ExecResult:
        """Run `cmd` in a shell inside the sandbox (the backend's `_run` says which shell).

        Args:
            cmd: shell command line.
            timeout: wall-clock seconds (default: limits.wall_time).
            stdin: text fed to the command.
            env: extra environment variables (on top of the backend's base environment).
            cwd: working directory inside (default: the backend's).
            grading: run with /grading writable for this exec only (graders write reports
                there; agent execs see it read-only, so they cannot forge them).
        """
        if self.closed:
            raise SandboxError("sandbox is closed")
        wall = self.limits.wall_time if timeout is None else timeout
        return self._run(ExecCall(cmd, wall, stdin, env or {}, cwd, grading))

    def _run(self, call: ExecCall) -> ExecResult:
        """Run one exec in an open sandbox (the arguments of `exec`, defaults resolved)."""
        raise NotImplementedError

    def _after_host_change(self) -> None:
        pass

    def write_file(self, path: str, content: str | bytes, mode: int | None = None) -> None:
        """Write a file in the workspace (or /grading), creating parent directories."""
        self.store.write(path, content, mode, self.workdir)
        self._after_host_change()

    def read_file(self, path: str) -> str:
        """Read a regular file from the workspace or /grading as text (undecodable -> U+FFFD)."""
        return self.store.read(path, self.workdir)

    def copy_in(self, host_path: str | Path, sandbox_path: str) -> None:
        """Copy a host file or directory into the sandbox (e.g. hidden tests at grading)."""
        self.store.copy_in(host_path, sandbox_path, self.workdir)
        self._after_host_change()

    def copy_out(self, sandbox_path: str, host_path: str | Path) -> None:
        """Copy a sandbox file or directory to the host; symlinks stay links, never followed."""
        self.store.copy_out(sandbox_path, host_path, self.workdir)

    def snapshot(self) -> SnapshotId:
        """Save the workspace (and a container root's layer; not /grading); returns an id."""
        return self.store.snapshot()

    def restore(self, snapshot_id: SnapshotId | None = None) -> None:
        """Make the workspace exactly as at `snapshot_id` (None: the latest snapshot; one is
        taken when the sandbox opens, so a fresh sandbox restores to its initial state)."""
        self.store.restore(snapshot_id)
        self._after_host_change()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
