"""Real root filesystems for task images: Debian bases, copy-on-write views, a build network.

A task's Dockerfile names a base image; `base_for` maps the stock ones to a Debian release
(Python images: the release that ships that Python, plus python3, pip and venv, with pip
allowed to install into the system as in a python image; Ubuntu images: the Debian release of
the same era, an approximation). `ensure_base` builds that release once with `mmdebstrap
--variant=minbase` under $ARCFORGE_ROOTFS_CACHE (default ~/.cache/arcforge/rootfs) and keeps
it: apt's package lists stay in it (so `apt-get install` works without a download of the
lists), apt does not switch to its `_apt` user, and every id is shifted by ID_BASE: a file
of root:adm in the image is owned by host ids ID_BASE:ID_BASE+4.

`IdNamespace` is the user namespace every real-root exec runs in: host root writes its maps
directly, 0..65535 inside onto ID_BASE.. outside, the 65,536-id range Docker's default gives a
container (the same kernel mechanism `newuidmap` uses from /etc/subuid, written without the
setuid helper since we are root). So dpkg's chown to root:adm, `useradd`, `chown user:group`
and `su user` work as in Docker, and the host never sees a file of its own root. Inside,
creating further user namespaces is off (user.max_user_namespaces = 0), and commands keep
Docker's default capabilities only (CHOWN, DAC_OVERRIDE, FOWNER, SETUID, ...; no SYS_ADMIN).

`CowView` stacks read-only layers (an image's changes over its base) under a private upper
dir: a kernel overlay mount (volatile for episodes: nothing of it is worth a sync), or
`fuse-overlayfs` where the kernel refuses. Mounting costs milliseconds whatever the layers
hold; closing unmounts and deletes the upper dir, so the layers are never written.

`BuildNetwork` is the network of an image build: a user + network namespace held by a
sleeping process (with `full_map=True` an `IdNamespace` with a network), connected outward by `slirp4netns --disable-host-loopback` (nothing on the
host's loopback answers), with the private, link-local and carrier-grade ranges routed to
`unreachable` inside. Build execs join it (nsenter) before bubblewrap starts.
Needs root on the host (mmdebstrap's root mode, overlay mounts, attaching slirp4netns).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from arcforge.sandbox.types import SandboxError

BASE_FORMAT = 3
ID_BASE = 1_000_000  # host id of root inside real roots; ids 0..65535 map onto ID_BASE..
ID_COUNT = 65536  # Docker's default range (and /etc/subuid's usual size)
SANDBOX_UID = ID_BASE  # host uid that real-root sandboxes see as root
LEGACY_UID = 65534  # host uid of the single-id map (arcforge.sandbox.root's layer builds)
# Docker's default capability set for a container's root (moby's oci/caps/defaults.go)
DOCKER_CAPS = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)
PY_RELEASE = {
    "3.9": "bullseye",
    "3.10": "bookworm",
    "3.11": "bookworm",
    "3.12": "bookworm",
    "3.13": "trixie",
    "3.14": "trixie",
}
DEBIAN = {
    "11": "bullseye",
    "12": "bookworm",
    "13": "trixie",
    "bullseye": "bullseye",
    "bookworm": "bookworm",
    "trixie": "trixie",
    "stable": "bookworm",
    "latest": "bookworm",
}
UBUNTU = {"20.04": "bullseye", "22.04": "bookworm", "24.04": "trixie", "latest": "trixie"}
UBUNTU_CODENAMES = {"focal": "20.04", "jammy": "22.04", "noble": "24.04"}
# registries that mirror Docker Hub's official images under their own prefix
MIRROR_PREFIX = r"^((docker\.io|public\.ecr\.aws/docker|mirror\.gcr\.io)/)?(library/)?"
# python3 and pygments: the verifier's pytest, bound from the host, runs on them
BASE_PACKAGES = ["ca-certificates", "curl", "python3", "python3-pygments"]
# what buildpack-deps and gcc images add: compilers, make, git, wget, ps
BUILD_PACKAGES = ["build-essential", "git", "procps", "wget"]
PY_PACKAGES = ["python3-pip", "python3-venv", "python-is-python3"]
# what Terminal-Bench's own base images (ghcr.io/laude-institute/t-bench/*) add to theirs
TBENCH_PACKAGES = ["asciinema", "tmux"]
MOUNT_POINTS = ("app", "workspace", "grading", "tests", "logs")
BLOCKED_RANGES = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "100.64.0.0/10",
)
SLIRP_DNS = "10.0.2.3"


class RootfsError(SandboxError):
    """A real root cannot be made here; the message names the reason and the remedy."""


def rootfs_cache() -> Path:
    """Where bases and built images live: $ARCFORGE_ROOTFS_CACHE or ~/.cache/arcforge/rootfs."""
    env = os.environ.get("ARCFORGE_ROOTFS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "arcforge" / "rootfs"


def base_for(image: str) -> tuple[str, list[str]] | None:
    """(Debian release, packages) standing in for a stock base image; None for other images."""
    name = re.sub(MIRROR_PREFIX, "", image.split("@")[0])
    repo, _, tag = name.partition(":")
    tag = tag or "latest"
    for codename, version in UBUNTU_CODENAMES.items():  # buildpack-deps:jammy = ubuntu 22.04
        if codename in tag:
            return UBUNTU[version], BASE_PACKAGES + (BUILD_PACKAGES if repo != "ubuntu" else [])
    codename = next((c for c in ("bullseye", "bookworm", "trixie") if c in tag), None)
    tbench = TBENCH_PACKAGES if "t-bench/" in repo else []
    if repo == "python" or re.search(r"t-bench/python-3-(\d+)", repo):
        m = re.search(r"3[.-](\d+)", tag if repo == "python" else repo)
        ver = f"3.{m.group(1)}" if m else "3.11"
        release = codename or PY_RELEASE.get(ver, "bookworm")
        # the full python images are buildpack-deps based: gcc, libc headers, git, make
        full = repo == "python" and not re.search(r"slim|alpine", tag)
        return release, BASE_PACKAGES + PY_PACKAGES + (BUILD_PACKAGES if full else []) + tbench
    if repo in ("debian", "buildpack-deps", "gcc"):
        release = codename or DEBIAN.get(tag.split("-")[0].split(".")[0])
        if repo == "gcc":  # gcc:13.3.0-bookworm: that release's gcc (an approximation)
            release = codename
        extra = BUILD_PACKAGES if repo != "debian" else []
        return (release, BASE_PACKAGES + extra) if release else None
    if repo == "ubuntu" or re.search(r"t-bench/ubuntu-(\d+)-(\d+)", repo):
        m = re.search(r"(\d+)[.-](\d+)", tag if repo == "ubuntu" else repo)
        release = UBUNTU.get(f"{m.group(1)}.{m.group(2)}" if m else tag)
        return (release, BASE_PACKAGES + tbench) if release else None
    return None


def rootfs_blockers() -> list[str]:
    """Why real roots cannot be built on this host (empty when they can), with remedies."""
    out = []
    if os.geteuid() != 0:
        out.append(
            "real task roots need root on the host (mmdebstrap, overlay mounts): run as root"
        )
    for exe, pkg in (
        ("mmdebstrap", "mmdebstrap"),
        ("bwrap", "bubblewrap"),
        ("slirp4netns", "slirp4netns"),
        ("nsenter", "util-linux"),
        ("ip", "iproute2"),
    ):
        if shutil.which(exe) is None:
            out.append(f"{exe} is not installed: apt-get install {pkg}")
    return out


def _lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def chown_tree(path: Path, uid: int) -> None:
    """Give every entry under `path` (itself included) to `uid`:`uid`, never following links."""
    os.lchown(path, uid, uid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


def shift_tree(path: Path, base: int = ID_BASE) -> None:
    """Shift the owner and group of every entry under `path` (itself included) by `base`, as
    an id-mapped container image is stored; modes are kept (chown clears set-uid bits)."""
    for dirpath, dirnames, filenames in os.walk(path):
        if dirpath == str(path):
            _shift(dirpath, base)
        for name in dirnames + filenames:
            _shift(os.path.join(dirpath, name), base)


def _shift(p: str, base: int) -> None:
    st = os.lstat(p)
    if st.st_uid >= base and st.st_gid >= base:
        return
    os.lchown(p, st.st_uid % base + base, st.st_gid % base + base)
    if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o6000:
        os.chmod(p, stat.S_IMODE(st.st_mode))


def _finish_base(root: Path, python: bool) -> None:
    """What a container image has and minbase lacks; ownership for the sandbox uid."""
    # recommends stay on, as in Debian's and Ubuntu's images (gcc brings libc6-dev that way)
    (root / "etc/apt/apt.conf.d/99arcforge").write_text('APT::Sandbox::User "root";\n')
    (root / "etc/hosts").write_text("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n")
    (root / "etc/hostname").write_text("sandbox\n")
    resolv = root / "etc/resolv.conf"
    if resolv.is_symlink() or resolv.exists():
        resolv.unlink()
    resolv.write_text("")  # a mount point: builds bind the slirp DNS over it
    if python:  # as in a python image, pip installs into the system
        for f in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            f.unlink()
    for d in MOUNT_POINTS:
        (root / d).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    shift_tree(root)


def ensure_base(release: str, packages: list[str], cache: Path | None = None) -> Path:
    """The cached minbase rootfs of `release` with `packages`, built on first use.

    Returns:
        the rootfs directory (never written after it is built).
    Raises:
        RootfsError: this host cannot build it (the message names why and the remedy).
    """
    if blockers := rootfs_blockers():
        raise RootfsError("; ".join(blockers))
    root = cache or rootfs_cache()
    key = hashlib.sha256(f"{BASE_FORMAT}:{release}:{sorted(packages)}".encode()).hexdigest()[:12]
    final = root / f"base-{release}-{key}"
    if (final / "etc/debian_version").is_file():
        return final
    fd = _lock(root / f"base-{release}-{key}.lock")
    try:
        if (final / "etc/debian_version").is_file():  # another process built it meanwhile
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".base-{release}-", dir=root))
        cmd = [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            "--mode=root",
            f"--include={','.join(sorted(packages))}",
            "--skip=cleanup/apt/lists",
            release,
            str(tmp),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-3:])
            raise RootfsError(f"mmdebstrap {release} failed: {tail[:300]}")
        _finish_base(tmp, python="python3-pip" in packages)
        os.replace(tmp, final)
        return final
    finally:
        os.close(fd)


# --- copy-on-write views ---------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)
MNT_DETACH = 2


def _kernel_mount(opts: str, target: Path) -> int:
    rc = _libc.mount(b"overlay", str(target).encode(), b"overlay", 0, opts.encode())
    return 0 if rc == 0 else ctypes.get_errno()


class CowView:
    """`lowers` (top first) stacked read-only under a private upper dir, mounted at `merged`.

    Args:
        lowers: the layers, topmost first (an image's changes, then its base).
        where: an empty directory for upper/, work/ and merged/ (deleted by `close`).
        volatile: skip the syncs of a kernel overlay (episodes; not builds, which are kept).
    """

    def __init__(self, lowers: list[Path], where: Path, volatile: bool = True):
        self.lowers, self.where, self.volatile = lowers, where, volatile
        self.upper, self.work, self.merged = where / "upper", where / "work", where / "merged"
        for d in (self.upper, self.work, self.merged):
            d.mkdir(parents=True, exist_ok=True)
        os.chown(self.upper, SANDBOX_UID, SANDBOX_UID)
        os.chmod(self.upper, 0o755)
        self.kind = ""
        self.mount()

    def _opts(self) -> str:
        lower = ":".join(str(p) for p in self.lowers)
        return f"lowerdir={lower},upperdir={self.upper},workdir={self.work}"

    def mount(self) -> None:
        """Mount the view (kernel overlay, else fuse-overlayfs)."""
        opts = self._opts()
        err = _kernel_mount(opts + (",volatile" if self.volatile else ""), self.merged)
        if err == errno.EINVAL and self.volatile:  # kernels before 5.10 lack volatile
            err = _kernel_mount(opts, self.merged)
        if err == 0:
            self.kind = "overlay"
            return
        fuse = shutil.which("fuse-overlayfs")
        if fuse is None:
            raise RootfsError(
                f"overlay mount refused ({os.strerror(err)}) and fuse-overlayfs is "
                "not installed: apt-get install fuse-overlayfs"
            )
        res = subprocess.run(
            [fuse, "-o", opts + ",allow_other", str(self.merged)], capture_output=True, text=True
        )
        if res.returncode != 0:
            raise RootfsError(
                f"overlay mount refused ({os.strerror(err)}); fuse-overlayfs "
                f"failed: {res.stderr.strip()[:200]}"
            )
        self.kind = "fuse-overlayfs"

    def unmount(self) -> None:
        """Unmount the view (the upper dir keeps its changes)."""
        if not self.kind:
            return
        if self.kind == "overlay":
            if _libc.umount2(str(self.merged).encode(), 0) != 0:
                _libc.umount2(str(self.merged).encode(), MNT_DETACH)
        else:
            subprocess.run(["fusermount3", "-u", "-z", str(self.merged)], capture_output=True)
        self.kind = ""
        shutil.rmtree(self.work, ignore_errors=True)  # overlay's scratch: stale after unmount
        self.work.mkdir()

    def close(self) -> None:
        """Unmount and delete the upper dir: the view's changes are gone."""
        self.unmount()
        shutil.rmtree(self.where, ignore_errors=True)


# --- the id-mapped user namespace ----------------------------------------------------------
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the forked child before exec
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class IdNamespace:
    """A user namespace (with `net`, also a network namespace) mapping ids 0..ID_COUNT-1 onto
    ID_BASE.., held by a sleeping process that dies with this process. `prefix` enters it as
    root (uid 0 inside, with every capability there; bubblewrap then drops to DOCKER_CAPS)."""

    def __init__(self, net: bool = False):
        if os.geteuid() != 0:
            raise RootfsError("an id-mapped user namespace needs root on the host")
        self.net = net
        self.holder = subprocess.Popen(
            ["unshare", "--user", *(["--net"] if net else []), "--", "sleep", "infinity"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        try:
            self._map()
        except BaseException:
            self.close()
            raise
        pid = str(self.holder.pid)
        self.prefix = ["nsenter", "-t", pid, "-U", *(["-n"] if net else []), "--"]

    def _map(self) -> None:
        pid = self.holder.pid
        own = os.readlink("/proc/self/ns/user")
        for _ in range(2000):  # until unshare has made the namespace (a few ms)
            try:
                if os.readlink(f"/proc/{pid}/ns/user") != own:
                    break
            except OSError:
                pass
            if self.holder.poll() is not None:
                err = self.holder.stderr.read().decode() if self.holder.stderr else ""
                raise RootfsError(f"cannot create a user namespace: {err.strip()}")
            time.sleep(0.001)
        try:
            for name in ("uid_map", "gid_map"):
                Path(f"/proc/{pid}/{name}").write_text(f"0 {ID_BASE} {ID_COUNT}\n")
        except OSError as err:
            raise RootfsError(f"cannot map ids {ID_BASE}..+{ID_COUNT}: {err}") from err
        res = subprocess.run(  # no nested user namespaces inside (bwrap --disable-userns's aim)
            [
                "nsenter",
                "-t",
                str(pid),
                "-U",
                "--",
                "sh",
                "-c",
                "echo 0 > /proc/sys/user/max_user_namespaces",
            ],
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            raise RootfsError(f"cannot limit nested user namespaces: {res.stderr.strip()[:200]}")

    def alive(self) -> bool:
        return self.holder.poll() is None

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait()
        if self.holder.stderr is not None:
            self.holder.stderr.close()


_EPISODE_NS: dict[int, IdNamespace] = {}


def episode_namespace() -> IdNamespace:
    """This process's id-mapped user namespace for episodes (no network: each exec's
    bubblewrap makes its own loopback-only one), made on first use."""
    ns = _EPISODE_NS.get(os.getpid())
    if ns is None or not ns.alive():
        ns = _EPISODE_NS[os.getpid()] = IdNamespace(net=False)
    return ns


# --- the build network -----------------------------------------------------------------------
class BuildNetwork:
    """A private network namespace with outbound access and no route to the host's loopback or
    private ranges. `prefix` is what a build exec runs bubblewrap under: with `full_map` as
    root in an `IdNamespace` (real-root image builds), else as LEGACY_UID with one id mapped."""

    def __init__(self, where: Path, full_map: bool = False):
        self.full_map = full_map
        self.ns: IdNamespace | None = None
        if full_map:
            self.ns = IdNamespace(net=True)
            self.holder = self.ns.holder
        else:
            self.holder = subprocess.Popen(
                ["unshare", "--user", "--map-root-user", "--net", "--", "sleep", "infinity"],
                user=LEGACY_UID,
                group=LEGACY_UID,
                extra_groups=[],
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        self.slirp: subprocess.Popen | None = None
        try:
            self._connect()
        except BaseException:
            self.close()
            raise
        self.resolv = where / "resolv.conf"
        self.resolv.write_text(f"nameserver {SLIRP_DNS}\n")
        self.resolv.chmod(0o644)
        pid = str(self.holder.pid)
        if self.ns is not None:
            self.prefix = self.ns.prefix
        else:
            self.prefix = ["nsenter", "-t", pid, "-U", "-n", "--preserve-credentials", "--"]

    def _connect(self) -> None:
        pid = self.holder.pid
        own = os.readlink("/proc/self/ns/net")
        for _ in range(500):  # until unshare has made the namespaces (a few ms)
            try:
                if os.readlink(f"/proc/{pid}/ns/net") != own:
                    break
            except OSError:
                pass
            if self.holder.poll() is not None:
                err = self.holder.stderr.read().decode() if self.holder.stderr else ""
                raise RootfsError(f"cannot create a build network namespace: {err.strip()}")
            time.sleep(0.001)
        r, w = os.pipe()
        self.slirp = subprocess.Popen(
            [
                "slirp4netns",
                "--configure",
                "--mtu=65520",
                "--disable-host-loopback",
                f"--ready-fd={w}",
                str(pid),
                "tap0",
            ],
            pass_fds=(w,),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        os.close(w)
        ready = os.read(r, 1)
        os.close(r)
        if ready != b"1":
            err = self.slirp.stderr.read().decode() if self.slirp.stderr else ""
            raise RootfsError(f"slirp4netns failed: {err.strip()[:200]}")
        for net in BLOCKED_RANGES:
            subprocess.run(
                ["nsenter", "-t", str(pid), "-n", "ip", "route", "add", "unreachable", net],
                check=True,
                capture_output=True,
            )

    def close(self) -> None:
        for proc in (self.slirp, self.holder):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc is not None and proc.stderr is not None:
                proc.stderr.close()
