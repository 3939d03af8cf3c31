"""Container-like task roots without Docker: uid 0, a throwaway writable system layer, and a
task's Dockerfile replayed into a cached per-task layer (docs/sandbox.md).

Terminal-Bench and Harbor tasks are written for a container: they run as root in /app, and
their Dockerfile installs packages and writes to /etc, /usr/local or /root. The bwrap backend
gives that view when opened with `root=RootLayer(...)` (see arcforge.sandbox.bwrap):

- uid 0 inside the sandbox's user namespace (on the host still our uid, or 65534 when we are
  root), with no capabilities, no network and no way to see host files;
- the layer: /etc, /usr/local, /root, /opt, /var, /home and /srv are host directories bound
  read-write, *copied* from the cached layer for every sandbox, so each episode starts from
  the built image and throws its changes away. Copies rather than overlayfs: bubblewrap 0.8
  (Debian 12) cannot mount an overlay, and a layer is small (a base layer is ~100 files, a
  venv with a few wheels a few MB), so copying costs milliseconds; /usr, /bin and /lib stay
  the host's, read-only;
- the workspace at /app (the same directory is also bound at /workspace, where arcforge's
  tools and exploit probes look), and the grading dir's tests/ and logs/ at /tests and /logs:
  read-only to the agent, writable in grading execs.

`build_layer(dockerfile)` replays a Dockerfile into such a layer. FROM must be a stock
Debian/Python image (the host's /usr stands in for it); WORKDIR, ENV and ARG are recorded and
expanded; COPY/ADD copy build-context files (no remote URLs, no `--from` stages); RUN lines run
as root in a build sandbox with a network (the only sandboxes that ever have one): a private
namespace with outbound access and no route to the host's loopback or private ranges
(rootfs.BuildNetwork) where the host can make one, else the host's; so `pip install` installs,
into a layer-local venv at /usr/local/venv that is first on PATH (so `python3`, `pip` behave
as in a python image; the venv sees the system site-packages). apt cannot write the read-only
/usr: `apt-get install` of packages the host has is dropped as satisfied, any other makes the
task unsupported. Layers are cached under $ARCFORGE_LAYER_CACHE (default
~/.cache/arcforge/layers), keyed by the Dockerfile, every file of its build context and the
host's python. A RUN that fails marks the task unsupported, naming the line and the end of its
output; so do needs that cannot be met here, found before building: services (several
docker-compose services, systemctl/service, a daemon as CMD), GPUs, QEMU.
Simplifications: RUN chains are split on `&&` only to drop apt segments; ADD does not unpack
archives; USER other than root is unsupported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.sandbox.files import copy_tree
from arcforge.sandbox.rootfs import BuildNetwork
from arcforge.sandbox.types import APP, LAYER_DIRS, VENV, ExecResult, Limits, RootLayer

__all__ = ["LayerBuild", "RootLayer", "build_layer", "dockerfile_needs", "layer_cache"]

LAYER_FORMAT = 1
BUILD_LIMITS = Limits(
    wall_time=900,
    cpu_seconds=900,
    memory_mb=4096,
    max_processes=256,
    output_bytes=4_000_000,
    tmp_mb=2048,
)
STOCK_IMAGES = re.compile(
    r"^(docker\.io/)?(library/)?(python|debian|ubuntu|buildpack-deps)[:@]"
    r"|^ghcr\.io/laude-institute/t-bench/(python-3-1\d|ubuntu-2\d-04)"
)
GPU_IMAGE = re.compile(r"nvidia|cuda|rocm|pytorch/pytorch|tensorflow/tensorflow", re.I)
# registry settings a build's pip may need (the host's own values, when set)
PIP_PASS = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
# lines a build skips: the uv bootstrap and apt bookkeeping (apt cannot run on a read-only /usr)
DROP_SEGMENT = re.compile(
    r"^\s*(curl\s.*astral\.sh/uv.*|source\s+\$HOME/\.local/bin/env|uv\s+venv\b.*|uv\s+init\b.*"
    r"|source\s+\S*/bin/activate|rm\s+-rf\s+/var/lib/apt/lists.*|apt-get\s+update.*"
    r"|apt\s+update.*|apt-get\s+(clean|autoremove).*)$"
)
PIP_WRAPPER = f'#!/bin/sh\nexec {VENV}/bin/python3 -m pip "$@"\n'


def layer_cache() -> Path:
    """Where built layers live: $ARCFORGE_LAYER_CACHE or ~/.cache/arcforge/layers."""
    env = os.environ.get("ARCFORGE_LAYER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "arcforge" / "layers"


def logical_lines(text: str) -> list[str]:
    """Dockerfile (or shell) lines with comments dropped and backslash continuations joined."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    return out + ([cur.strip()] if cur.strip() else [])


def apt_missing(pkgs: list[str]) -> list[str]:
    """The packages of an `apt-get install` this host does not have."""

    def present(p: str) -> bool:
        if shutil.which(p):
            return True
        res = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True
        )
        return "install ok installed" in res.stdout

    return [p for p in pkgs if not present(p.split("=")[0])]


def pip_missing(pkgs: list[str]) -> list[str]:
    """The packages of a `pip install` not importable here."""
    names = [re.split(r"[<>=!~\[]", p)[0] for p in pkgs]
    return [n for n in names if importlib.util.find_spec(n.replace("-", "_").lower()) is None]


def apt_packages(seg: str) -> list[str] | None:
    """The packages an `apt-get install` / `apt install` segment names; None for other commands."""
    words = seg.split()
    while words and (re.fullmatch(r"\w+=\S*", words[0]) or words[0] in ("sudo", "env")):
        words = words[1:]  # DEBIAN_FRONTEND=noninteractive apt-get ..., sudo apt-get ...
    if words[:1] in (["apt-get"], ["apt"]) and "install" in words:
        return [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
    return None


def _expand(text: str, vars: dict[str, str]) -> str:
    """Dockerfile variable expansion: $NAME, ${NAME}, ${NAME:-default}."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        val = vars.get(name, "")
        return val if val or default is None else default

    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)", sub, text)


def _env_pairs(arg: str) -> list[tuple[str, str]]:
    if "=" not in arg.split()[0]:
        name, _, value = arg.partition(" ")
        return [(name, value.strip())]
    return [
        (k, v.strip('"').strip("'")) for k, v in re.findall(r'(\w+)=("[^"]*"|\'[^\']*\'|\S+)', arg)
    ]


def dockerfile_needs(dockerfile: str, compose: str = "") -> list[str]:
    """Reasons a task cannot run here, readable from its Dockerfile and docker-compose file
    without building: a non-stock base image, a GPU, QEMU, services, another user."""
    reasons = []
    for line in logical_lines(dockerfile):
        op, _, arg = line.partition(" ")
        op, arg = op.upper(), arg.strip()
        low = arg.lower()
        if op == "FROM":
            image = next((w for w in arg.split() if not w.startswith("--")), "")
            if GPU_IMAGE.search(image):
                reasons.append(f"needs a GPU: base image {image}")
            elif not STOCK_IMAGES.match(image):
                reasons.append(f"base image {image} is not a stock Debian/Python image")
        elif op == "USER" and arg not in ("root", "0", "0:0", "root:root"):
            reasons.append(f"USER {arg}: the sandbox runs every command as root")
        elif op in ("CMD", "ENTRYPOINT"):
            cmd = " ".join(json.loads(arg)) if arg.startswith("[") else arg
            if re.search(  # a daemon the tests would talk to (an interactive shell is none)
                r"\b(nginx|apache2|httpd|postgres|mysqld|redis-server|sshd|supervisord|uvicorn"
                r"|gunicorn|flask run|node|dockerd|cron|[\w.-]*(server|serve|daemon|start)"
                r"[\w.-]*)\b",
                cmd,
            ):
                reasons.append(f"needs a service started by {op}: {cmd[:80]}")
        if op == "RUN" and re.search(
            r"\b(systemctl\s+(start|enable)|service\s+\S+\s+start)\b", low
        ):
            reasons.append(f"needs a running service: {arg[:80]}")
        if "qemu" in low:
            reasons.append(f"needs QEMU: {arg[:80]}")
        if op in ("COPY", "ADD") and "--from" in arg:
            reasons.append(f"multi-stage {op} --from is not replayed: {arg[:80]}")
    if compose.strip():
        reasons += _compose_needs(compose)
    return sorted(set(reasons))


def _compose_needs(compose: str) -> list[str]:
    import yaml

    try:
        spec = yaml.safe_load(compose) or {}
    except yaml.YAMLError as err:
        return [f"docker-compose file does not parse: {str(err).splitlines()[0]}"]
    services = spec.get("services") or {}
    reasons = []
    if len(services) > 1:
        reasons.append(f"needs services: {', '.join(sorted(services))} run as separate containers")
    for name, svc in services.items():
        svc = svc or {}
        if svc.get("runtime") == "nvidia" or "devices" in json.dumps(svc.get("deploy") or {}):
            reasons.append(f"needs a GPU: service {name} reserves devices")
        if svc.get("privileged"):
            reasons.append(f"needs a privileged container: service {name}")
    return reasons


@dataclass
class LayerBuild:
    """What `build_layer` produced: a layer, or the reasons there is none."""

    layer: RootLayer | None
    unsupported: list[str] = field(default_factory=list)
    cached: bool = False
    log: list[str] = field(default_factory=list)  # one line per replayed instruction


def _layer_key(dockerfile: Path | None, extra_pip: list[str]) -> str:
    h = hashlib.sha256(f"arcforge-layer-{LAYER_FORMAT}:{sorted(extra_pip)}".encode())
    py = Path("/usr/bin/python3")
    h.update(f"{os.path.realpath(py)}:{py.stat().st_size if py.exists() else 0}".encode())
    return context_key(h, dockerfile)


def context_key(h: Any, dockerfile: Path | None) -> str:
    """Feed the Dockerfile and every regular file of its build context (path and content)
    into the hash `h`; return the cache key: its first 20 hex digits."""
    if dockerfile is not None:
        h.update(dockerfile.read_bytes())
        for f in sorted(dockerfile.parent.rglob("*")):
            if f.is_file() and not f.is_symlink():
                h.update(f.relative_to(dockerfile.parent).as_posix().encode())
                h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:20]


def copy_operands(arg: str, vars: dict[str, str], workdir: str) -> tuple[list[str], str]:
    """A COPY or ADD's sources and its absolute destination (flags dropped, $NAMEs expanded;
    a relative destination is under `workdir`)."""
    raw = json.loads(arg) if arg.lstrip().startswith("[") else shlex.split(arg)
    *srcs, dst = [_expand(w, vars) for w in raw if not w.startswith("--")]
    return srcs, dst if dst.startswith("/") else f"{workdir.rstrip('/')}/{dst}"


def context_matches(context: Path, src: str) -> list[Path]:
    """The build-context paths a COPY source names (a glob when it holds *, ? or [)."""
    return sorted(context.glob(src)) if any(c in src for c in "*?[") else [context / src]


def failure_detail(res: ExecResult) -> tuple[str, str]:
    """Why a build step's exec failed ("timed out" or "exit N") and its output's last three
    lines joined by " | " (at most 300 characters), for the build's reasons."""
    tail = (res.stdout + res.stderr).strip().splitlines()[-3:]
    why = "timed out" if res.timed_out else f"exit {res.exit_code}"
    return why, " | ".join(tail)[:300]


def init_layer(dest: Path) -> None:
    """An empty layer, as a stock Debian image has it: the toolchain's /etc with root's
    identity, empty /usr/local, /root, /opt, /var (tmp, log, lib, cache), /home, /srv, /app."""
    from arcforge.sandbox.bwrap import populate_etc

    for d in (*LAYER_DIRS, "app"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    identity = {
        "passwd": "root:x:0:0:root:/root:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": "root:x:0:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n",
        "hostname": "sandbox\n",
        "resolv.conf": "",  # mount point for the host's, bound in build sandboxes only
    }
    populate_etc(dest / "etc", identity)
    for d in ("bin", "sbin", "lib", "share", "include", "src", "etc"):
        (dest / "usr/local" / d).mkdir(exist_ok=True)
    for d in ("tmp", "log", "lib", "cache"):
        (dest / "var" / d).mkdir(exist_ok=True)
    (dest / "var/tmp").chmod(0o1777)
    (dest / "root").chmod(0o700)


class _Builder:
    """Replays one Dockerfile in a build sandbox (see the module header for the rules)."""

    def __init__(self, sb: object, context: Path, log: list[str]):
        self.sb, self.context, self.log = sb, context, log
        self.workdir, self.env, self.args = APP, {}, {}  # type: ignore[var-annotated]
        self.unsupported: list[str] = []

    def vars(self) -> dict[str, str]:
        return {**self.args, **self.env}

    def exec(self, cmd: str, cwd: str | None = None) -> bool:
        sb = self.sb
        res = sb.exec(cmd, cwd=cwd or self.workdir, env={**self.args, **self.env})  # type: ignore[attr-defined]
        self.log.append(f"RUN {cmd[:100]} -> exit {res.exit_code} in {res.duration:.1f}s")
        if not res.ok:
            why, tail = failure_detail(res)
            self.unsupported.append(f"Dockerfile RUN failed ({why}): {cmd[:100]}: {tail}")
        return res.ok

    def run(self, arg: str) -> bool:
        if arg.startswith("["):
            arg = shlex.join(json.loads(arg))
        keep = []
        for seg in (s.strip() for s in arg.split("&&")):
            if not seg or DROP_SEGMENT.match(seg):
                continue
            pkgs = apt_packages(seg)
            if pkgs is not None:
                if missing := apt_missing(pkgs):
                    self.unsupported.append(
                        f"apt package(s) not on this host: {', '.join(missing)} "
                        "(apt cannot write the read-only /usr)"
                    )
                    return False
                continue
            keep.append(seg)
        return not keep or self.exec(" && ".join(keep))

    def copy(self, op: str, arg: str) -> bool:
        srcs, dst = copy_operands(arg, self.vars(), self.workdir)
        if not _writable(dst):
            self.unsupported.append(f"{op} to {dst}: not a writable directory in the sandbox")
            return False
        for src in srcs:
            matches = context_matches(self.context, src)
            if (
                src.startswith(("http://", "https://"))
                or not all(m.exists() for m in matches)
                or not matches
            ):
                self.unsupported.append(f"{op} source {src} is not in the build context")
                return False
            for m in matches:
                if m.is_dir():
                    target = dst
                elif dst.endswith("/") or len(srcs) > 1 or len(matches) > 1:
                    target = f"{dst.rstrip('/')}/{m.name}"
                else:
                    target = dst
                self.sb.copy_in(m, target)  # type: ignore[attr-defined]
            self.log.append(f"{op} {src} -> {dst}")
        return True

    def workdir_to(self, arg: str) -> bool:
        arg = _expand(arg, self.vars())
        path = os.path.normpath(arg if arg.startswith("/") else f"{self.workdir}/{arg}")
        if not _writable(path):
            self.unsupported.append(f"WORKDIR {arg}: not a writable directory in the sandbox")
            return False
        ok = self.exec(f"mkdir -p {shlex.quote(path)}", cwd="/")
        self.workdir = path
        return ok


def _writable(path: str) -> bool:
    path = os.path.normpath(path)
    return any(path == p or path.startswith(p + "/") for p in (APP, *("/" + d for d in LAYER_DIRS)))


def _private_network(sb: Any) -> BuildNetwork | None:
    """Make `sb`'s execs (network=True: bwrap --share-net) run in a private BuildNetwork
    rather than the host's: bwrap starts through nsenter, and the slirp DNS replaces the host's
    resolv.conf. None (the host's network stays) where this host cannot make one."""
    if os.geteuid() != 0 or not all(shutil.which(x) for x in ("slirp4netns", "nsenter")):
        return None
    where = Path(tempfile.mkdtemp(prefix="arcforge-buildnet-"))
    where.chmod(0o755)  # the sandbox uid runs the wrapper
    net = BuildNetwork(where)
    wrapper = where / "bwrap"
    wrapper.write_text(
        '#!/bin/bash\na=("$@")\nfor i in "${!a[@]}"; do\n'
        '  [ "${a[$i]}" = /etc/resolv.conf ] && [ "${a[$((i+1))]:-}" = /etc/resolv.conf ] '
        f"&& a[$i]={net.resolv}\ndone\n"
        f'exec {shlex.join(net.prefix)} {sb.exe} "${{a[@]}}"\n'
    )
    wrapper.chmod(0o755)
    sb.exe = str(wrapper)
    return net


def build_layer(
    dockerfile: str | Path | None,
    cache: str | Path | None = None,
    force: bool = False,
    extra_pip: list[str] | tuple[str, ...] = (),
    compose: str = "",
) -> LayerBuild:
    """The cached layer for `dockerfile` (None: the base layer), built when missing.

    Args:
        dockerfile: path of the task's Dockerfile; its directory is the build context.
        compose: the task's docker-compose text, checked by `dockerfile_needs` too.
        cache: cache root (default `layer_cache()`).
        force: rebuild even when cached.
        extra_pip: packages pip-installed after the Dockerfile (a verifier's test-time
            installs, which cannot download at solve time).
    Returns:
        LayerBuild with the layer, or with `unsupported` naming why there is none.
    """
    from arcforge.sandbox.bwrap import BwrapSandbox

    df = Path(dockerfile) if dockerfile is not None else None
    text = df.read_text() if df is not None else ""
    needs = dockerfile_needs(text, compose)
    if needs:
        return LayerBuild(None, needs)
    root = Path(cache) if cache is not None else layer_cache()
    root.mkdir(parents=True, exist_ok=True)
    extra_pip = list(extra_pip)
    final = root / _layer_key(df, extra_pip)
    if (final / "layer.json").is_file() and not force:
        return LayerBuild(RootLayer.load(final), cached=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    log: list[str] = []
    try:
        init_layer(tmp)
        pass_env = {k: os.environ[k] for k in PIP_PASS if k in os.environ}
        sb = BwrapSandbox(None, BUILD_LIMITS, env=pass_env, root=RootLayer(tmp), network=True)
        net = None
        try:
            net = _private_network(sb)
            b = _Builder(sb, df.parent if df is not None else tmp, log)
            ok = b.exec(
                f"python3 -m venv --without-pip --system-site-packages {VENV} && "
                f"printf '%s' {shlex.quote(PIP_WRAPPER)} > {VENV}/bin/pip && "
                f"chmod +x {VENV}/bin/pip && ln -s pip {VENV}/bin/pip3"
            )
            for line in logical_lines(text) if ok else []:
                op, _, arg = line.partition(" ")
                op, arg = op.upper(), arg.strip()
                if op == "WORKDIR":
                    ok = b.workdir_to(arg)
                elif op == "ENV":
                    b.env.update({k: _expand(v, b.vars()) for k, v in _env_pairs(arg)})
                elif op == "ARG":
                    name, _, default = arg.partition("=")
                    b.args.setdefault(name.strip(), default.strip().strip('"'))
                elif op in ("COPY", "ADD"):
                    ok = b.copy(op, arg)
                elif op == "RUN":
                    ok = b.run(arg)
                if not ok:
                    break
            if ok and extra_pip:
                ok = b.exec(f"pip install {shlex.join(extra_pip)}", cwd="/")
            if not ok:
                return LayerBuild(None, b.unsupported or ["layer build failed"], log=log)
            for d in LAYER_DIRS:
                shutil.rmtree(tmp / d)
                copy_tree(sb.store.layer / d, tmp / d)  # type: ignore[operator]
            shutil.rmtree(tmp / "app")
            copy_tree(sb.store.workspace, tmp / "app")
        finally:
            sb.close()
            if net is not None:
                net.close()
                shutil.rmtree(net.resolv.parent, ignore_errors=True)
        RootLayer(tmp, b.workdir, b.env).save()
        if force and final.exists():
            shutil.rmtree(final)
        try:
            os.replace(tmp, final)
        except OSError:  # a concurrent build of the same key finished first: use its layer
            pass
        return LayerBuild(RootLayer.load(final), log=log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
