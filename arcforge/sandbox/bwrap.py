"""The bubblewrap backend: each exec is a fresh set of namespaces over a read-only host view.

Every `exec` runs `bwrap <flags> -- bash -c '<ulimits>; exec bash -c "$1"' arcforge CMD`:
new user, PID, network, IPC, UTS, mount and cgroup namespaces; only /usr (and the /bin, /lib,
/sbin links into it) and a short list of /etc files bound read-only; a fresh /proc, /dev and
/tmp; the workspace bound read-write at /workspace and the grading dir at /grading
(read-write only when `grading=True`). Nothing else of the host exists inside: no home
directories, no project checkout, no sockets, no network (loopback only, and it is private).

The PID namespace's init is bubblewrap's reaper; when the command exits, it exits and the
kernel kills everything left in the namespace, so background processes never outlive the
exec. When we run as host root the sandbox runs as the unprivileged host uid 65534 instead:
the kernel never applies RLIMIT_NPROC to host root, even inside a user namespace, and a
breakout should not land as root. Inside, the command is uid 1000 ("sandbox") with no
capabilities and no way to create further user namespaces.
With `root=RootLayer(...)` the sandbox is a container-like root instead (arcforge.sandbox.root):
uid 0 inside (still no capabilities, still the same unprivileged host uid), the layer's copies
bound read-write at /etc, /usr/local, /root, /opt, /var, /home and /srv, the workspace at /app
(and /workspace), grading/tests and grading/logs at /tests and /logs. `network=True` (used only
by layer builds) keeps the host's network namespace.
Deliberate simplifications: no seccomp filter; no per-sandbox disk quota; the system Python
(/usr/bin/python3) is the interpreter inside, extra packages come in via `extra_ro_binds`.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import tempfile
from pathlib import Path

from arcforge.sandbox.execution import PATH, run_bwrap, run_capped, wrap_command
from arcforge.sandbox.files import ExecCall, HostStore, StoreBackedSandbox, copy_tree, etc_identity
from arcforge.sandbox.types import (
    APP,
    CONTAINER_MOUNTS,
    GRADING,
    LAYER_DIRS,
    VENV,
    WORKSPACE,
    ExecResult,
    Limits,
    RootLayer,
    SandboxError,
)

UNPRIVILEGED_UID = 65534  # host uid the sandbox runs as when we are root ("nobody")
INNER_UID = 1000
# /etc entries a toolchain needs: the loader cache, alternatives links (python3, editor, ...),
# CA certificates, name-service config, timezone, and Debian's python sitecustomize. The small
# ones are copied once per process into a shared etc dir (with our passwd, group and hosts)
# that is bound read-only as /etc: one mount instead of twenty halves an exec's cost. The two
# big directories of symlinks are bound on top (creating 700 symlinks costs a second here).
ETC_COPY = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates.conf",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/os-release",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/debian_version",
    "/etc/locale.alias",
    "/etc/inputrc",
    "/etc/bash.bashrc",
]
ETC_BIND = ["/etc/alternatives", "/etc/ssl/certs"]
MERGED_USR = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]


def bwrap_available() -> bool:
    """True when bubblewrap is installed and can create its namespaces here."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    res = run_capped(
        [
            exe,
            "--unshare-all",
            "--unshare-user",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--",
            "/bin/true",
        ],
        timeout=10,
        output_bytes=10_000,
        user=_drop_uid(),
    )
    return res.exit_code == 0


def _drop_uid() -> int | None:
    return UNPRIVILEGED_UID if os.geteuid() == 0 else None


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for d in MERGED_USR:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


_SHARED_ETC: dict[str, Path] = {}


def populate_etc(etc: Path, identity: dict[str, str]) -> None:
    """Fill `etc` with the toolchain's /etc files, mount points for ETC_BIND, and `identity`
    (passwd, group, hosts)."""
    for p in ETC_COPY + sorted(glob.glob("/etc/python3*")):
        if os.path.lexists(p):
            copy_tree(Path(p), etc / os.path.relpath(p, "/etc"))
    for p in ETC_BIND:  # mount points for the binds on top
        (etc / os.path.relpath(p, "/etc")).mkdir(parents=True, exist_ok=True)
    for name, text in identity.items():
        (etc / name).write_text(text)
    for d in [etc, *etc.rglob("*")]:
        if d.is_dir() and not d.is_symlink():
            d.chmod(0o755)


def _shared_etc() -> Path:
    """This process's etc dir for sandboxes (made on first use, removed at exit)."""
    if "etc" not in _SHARED_ETC:
        etc = Path(tempfile.mkdtemp(prefix="arcforge-etc-"))
        etc.chmod(0o755)
        atexit.register(shutil.rmtree, etc, ignore_errors=True)
        populate_etc(etc, etc_identity(INNER_UID))
        _SHARED_ETC["etc"] = etc
    return _SHARED_ETC["etc"]


class BwrapSandbox(StoreBackedSandbox):
    """A `Sandbox` backed by bubblewrap. Build it with `open_sandbox(backend="bwrap")`."""

    backend = "bwrap"
    workdir = WORKSPACE

    def __init__(
        self,
        workspace: str | Path | None,
        limits: Limits,
        extra_ro_binds: dict[str | Path, str] | None = None,
        env: dict[str, str] | None = None,
        shell: str = "/bin/bash",
        root: RootLayer | None = None,
        network: bool = False,
    ):
        self.exe = shutil.which("bwrap")
        if self.exe is None:
            raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
        self.limits, self.shell, self.env = limits, shell, dict(env or {})
        self.extra_ro_binds = {str(Path(k).resolve()): v for k, v in (extra_ro_binds or {}).items()}
        for host, inside in self.extra_ro_binds.items():
            if not os.path.exists(host) or not inside.startswith("/"):
                raise SandboxError(f"bad extra_ro_binds entry {host} -> {inside}")
        self.uid = _drop_uid()
        self.root, self.network = root, network
        self.etc = _shared_etc()
        if root is not None:
            self.workdir = APP
        self.store = HostStore(
            workspace, owner=self.uid, layer=root.path if root else None, layer_dirs=LAYER_DIRS
        )
        self._static = self._static_args()

    def _static_args(self) -> list[str]:
        uid = 0 if self.root is not None else INNER_UID
        args = [
            "--unshare-all",
            "--unshare-user",  # user, pid, net, ipc, uts, cgroup, mount ns
            *(["--share-net"] if self.network else []),
            "--disable-userns",  # no nested user namespaces (no caps to regain inside)
            "--uid",
            str(uid),
            "--gid",
            str(uid),
            "--hostname",
            "sandbox",
            "--die-with-parent",  # the sandbox dies if the host-side runner dies
            "--new-session",  # setsid: no TIOCSTI typing into a host terminal
            "--cap-drop",
            "ALL",
            *_system_binds(),
        ]
        if self.store.layer is None:
            args += ["--ro-bind", str(self.etc), "/etc"]
        else:  # the layer's writable system dirs (etc first: the ETC_BIND mounts go on top)
            args += [a for d in LAYER_DIRS for a in ("--bind", str(self.store.layer / d), "/" + d)]
            if self.network and os.path.exists("/etc/resolv.conf"):
                args += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
        args += [
            *[a for p in ETC_BIND if os.path.isdir(p) for a in ("--ro-bind", p, p)],
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(self.limits.tmp_mb << 20),
            "--tmpfs",
            "/tmp",
            "--size",
            str(64 << 20),
            "--tmpfs",
            "/dev/shm",
        ]
        for host, inside in self.extra_ro_binds.items():
            args += ["--ro-bind", host, inside]
        return args

    def argv(self, cmd: str, env: dict[str, str], cwd: str, grading: bool) -> list[str]:
        """The full bwrap command line for one exec (public so it can be inspected/logged)."""
        s = self.store
        args = [self.exe, *self._static]
        args += ["--bind", str(s.workspace), WORKSPACE]
        gbind = "--bind" if grading else "--ro-bind"
        args += [gbind, str(s.grading), GRADING]
        base = {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8", "USER": "sandbox"}
        if self.root is not None:
            s.grading_subdirs(tuple(name for name, _ in CONTAINER_MOUNTS))
            args += ["--bind", str(s.workspace), APP]
            args += [
                a
                for name, inside in CONTAINER_MOUNTS
                for a in (gbind, str(s.grading / name), inside)
            ]
            base = {
                "PATH": f"{VENV}/bin:{PATH}",
                "HOME": "/root",
                "LANG": "C.UTF-8",
                "USER": "root",
                **self.root.env,
            }
        args += ["--remount-ro", "/", "--chdir", cwd, "--clearenv"]
        for k, v in {**base, **self.env, **env}.items():
            args += ["--setenv", k, v]
        return [*args, "--", *wrap_command(cmd, self.limits, self.shell)]

    def _run(self, call: ExecCall) -> ExecResult:
        """Run `cmd` with bash inside a fresh sandbox over this workspace.

        `env` comes on top of PATH, HOME=/tmp, LANG, USER (in a container root HOME=/root,
        USER=root and the layer's ENV); the default cwd is /workspace (a container root's
        WORKDIR); `grading` binds /grading read-write for this exec only.
        """
        default_cwd = self.root.workdir if self.root is not None else WORKSPACE
        if self.root is not None and call.cwd is None and not self._is_dir(default_cwd):
            default_cwd = APP  # the agent removed the WORKDIR: run in /app rather than fail
        argv = self.argv(call.cmd, call.env, call.cwd or default_cwd, call.grading)
        return run_bwrap(argv, call.wall, call.stdin, self.limits, self.store.root, self.uid)

    def _is_dir(self, path: str) -> bool:
        try:
            return self.store.host_path(path, self.workdir).is_dir()
        except SandboxError:
            return False

    def close(self) -> None:
        """Delete the host copy of the workspace and snapshots. Nothing runs between execs."""
        if not self.closed:
            self.closed = True
            self.store.remove()
