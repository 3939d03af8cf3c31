"""Build a task's Dockerfile into a real-root image: its base's Debian rootfs plus one layer.

`build_image(dockerfile)` maps FROM to a cached Debian base (rootfs.py), mounts a view of it
whose upper dir becomes the image's layer, and replays the Dockerfile as root inside:
RUN lines run unchanged (apt-get install, writes to /usr/share, /data, /server all work) in a
sandbox joined to a private build network (outbound through slirp4netns; the host's loopback
and private ranges unreachable); COPY/ADD copy build-context files to any path (through the
sandbox, so symlinks in the image resolve as they would in it); WORKDIR, ENV and ARG are
recorded and expanded. Then the verifier's hoisted `apt-get install`s and `pip install`s run
(episodes have no network, builds do). /tmp stays as the build left it.

Images are cached under <rootfs cache>/images/<key>, the key hashing the Dockerfile, every file
of its build context, the hoisted packages and the base. A failed build is cached too, as
<key>.failed.json with its reasons, so the next import names them without rebuilding.
Needs that cannot be met are found before building and listed together: an unmappable base
image, services, GPUs, QEMU, another USER, `COPY --from` stages, and this host lacking what
real roots need. Simplifications: ADD does not unpack archives or fetch URLs; SHELL, USER
root, EXPOSE, CMD and the like are not replayed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from arcforge.sandbox.root import (
    _env_pairs,
    _expand,
    context_key,
    context_matches,
    copy_operands,
    dockerfile_needs,
    failure_detail,
    logical_lines,
)
from arcforge.sandbox.rootfs import (
    BuildNetwork,
    RootfsError,
    base_for,
    ensure_base,
    rootfs_blockers,
    rootfs_cache,
)
from arcforge.sandbox.rootfs_sandbox import PATH, RootfsImage, RootfsSandbox
from arcforge.sandbox.types import APP, Limits, SandboxError

IMAGE_FORMAT = 1
BUILD_LIMITS = Limits(
    wall_time=900, cpu_seconds=900, memory_mb=8192, max_processes=512, output_bytes=4_000_000
)
PIP_PASS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT")
STAGE = "/grading/.context"  # where a COPY's sources are staged for the in-sandbox copy
# the host's CA bundle, bound into builds (an HTTPS proxy's CA included) and named by the
# variables pip, curl, requests and OpenSSL read; no trace of it stays in the image
HOST_CA = "/etc/arcforge-host-ca.crt"
CA_VARS = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def host_ca_bundle() -> Path | None:
    """The CA bundle this host trusts ($SSL_CERT_FILE, else Debian's), when there is one."""
    for cand in (os.environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


@dataclass
class ImageBuild:
    """What `build_image` produced: an image, or the reasons there is none."""

    image: RootfsImage | None
    unsupported: list[str] = field(default_factory=list)
    cached: bool = False
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)


def load_image(path: str | Path) -> RootfsImage:
    """The image saved at `path` (image.json + upper/)."""
    meta = json.loads((Path(path) / "image.json").read_text())
    lowers = (Path(path) / "upper", Path(meta["base"]))
    return RootfsImage(lowers, meta.get("workdir", APP), dict(meta.get("env") or {}))


def _from_image(text: str) -> str:
    for line in logical_lines(text):
        op, _, arg = line.partition(" ")
        if op.upper() == "FROM":
            return next((w for w in arg.split() if not w.startswith("--")), "")
    return "debian:bookworm"


def image_needs(text: str, compose: str = "") -> list[str]:
    """Every reason a Dockerfile cannot become a real root here, found without building."""
    image = _from_image(text)
    reasons = [r for r in dockerfile_needs(text, compose) if "is not a stock" not in r]
    if base_for(image) is None and not any("GPU" in r for r in reasons):
        reasons.append(f"base image {image} has no Debian stand-in (python, debian, ubuntu)")
    return sorted(set(reasons + rootfs_blockers()))


def image_key(
    dockerfile: Path | None, extra_pip: list[str], base: tuple, extra_apt: list[str] = ()
) -> str:
    apt = f":apt={sorted(extra_apt)}" if extra_apt else ""
    h = hashlib.sha256(f"arcforge-image-{IMAGE_FORMAT}:{sorted(extra_pip)}:{base}{apt}".encode())
    return context_key(h, dockerfile)


class _Replay:
    """Replays one Dockerfile in a build sandbox (the module header lists the rules)."""

    def __init__(self, sb: RootfsSandbox, context: Path, log: list[str]):
        self.sb, self.context, self.log = sb, context, log
        self.workdir, self.env, self.args = "/", {}, {}  # type: ignore[var-annotated]
        self.failed: list[str] = []

    def vars(self) -> dict[str, str]:
        """What $NAME expands to: the image's defaults (ENV PATH=...:$PATH), ARGs, ENVs."""
        return {"PATH": PATH, "HOME": "/root", **self.args, **self.env}

    def exec(self, cmd: str, what: str, cwd: str | None = None) -> bool:
        res = self.sb.exec(cmd, cwd=cwd or self.workdir, env=self.vars(), grading=True)
        self.log.append(f"{what[:100]} -> exit {res.exit_code} in {res.duration:.1f}s")
        if not res.ok:
            why, tail = failure_detail(res)
            self.failed.append(f"Dockerfile {what[:100]} failed ({why}): {tail}")
        return res.ok

    def copy(self, op: str, arg: str) -> bool:
        srcs, dst = copy_operands(arg, self.vars(), self.workdir)
        into_dir = dst.endswith("/") or len(srcs) > 1
        cmds = []
        for i, src in enumerate(srcs):
            matches = context_matches(self.context, src)
            if (
                src.startswith(("http://", "https://"))
                or not matches
                or not all(
                    m.exists() and self.context.resolve() in [m.resolve(), *m.resolve().parents]
                    for m in matches
                )
            ):
                self.failed.append(f"{op} source {src} is not in the build context")
                return False
            into_dir = into_dir or len(matches) > 1
            for j, m in enumerate(matches):
                stage = f"{STAGE}/{i}-{j}"
                self.sb.copy_in(m, stage)
                if m.is_dir():
                    cmds.append(
                        f"mkdir -p {shlex.quote(dst)} && cp -a {stage}/. {shlex.quote(dst)}"
                    )
                else:
                    target = f"{dst.rstrip('/')}/{m.name}" if into_dir else dst
                    cmds.append(
                        f"mkdir -p {shlex.quote(os.path.dirname(target) or '/')} && "
                        f"cp -a {stage} {shlex.quote(target)}"
                    )
        ok = self.exec(" && ".join(cmds), f"{op} {arg}", cwd="/")
        shutil.rmtree(self.sb.store.grading / ".context", ignore_errors=True)
        return ok

    def step(self, op: str, arg: str) -> bool:
        if op == "WORKDIR":
            arg = _expand(arg, self.vars())
            self.workdir = os.path.normpath(arg if arg.startswith("/") else f"{self.workdir}/{arg}")
            return self.exec(f"mkdir -p {shlex.quote(self.workdir)}", f"WORKDIR {arg}", cwd="/")
        if op == "ENV":
            self.env.update({k: _expand(v, self.vars()) for k, v in _env_pairs(arg)})
        elif op == "ARG":
            name, _, default = arg.partition("=")
            self.args.setdefault(name.strip(), default.strip().strip('"'))
        elif op in ("COPY", "ADD"):
            return self.copy(op, arg)
        elif op == "RUN":
            cmd = shlex.join(json.loads(arg)) if arg.startswith("[") else arg
            return self.exec(cmd, f"RUN {cmd}")
        return True


def _cached(final: Path, failed: Path) -> ImageBuild | None:
    if (final / "image.json").is_file():
        image = load_image(final)
        if image.lowers[1].is_dir():  # its base may have been removed from the cache
            return ImageBuild(image, cached=True)
        return None
    if failed.is_file():
        return ImageBuild(None, json.loads(failed.read_text())["unsupported"], cached=True)
    return None


def build_image(
    dockerfile: str | Path | None,
    compose: str = "",
    extra_pip: list[str] | tuple[str, ...] = (),
    cache: str | Path | None = None,
    force: bool = False,
    extra_apt: list[str] | tuple[str, ...] = (),
) -> ImageBuild:
    """The cached real-root image of `dockerfile` (None: a bare python base), built when missing.

    Args:
        dockerfile: path of the task's Dockerfile; its directory is the build context.
        compose: the task's docker-compose text (checked for services and devices).
        extra_pip: packages pip-installed after the Dockerfile (the verifier's installs).
        cache: cache root (default `rootfs_cache()`).
        force: rebuild even when cached (a cached failure too).
        extra_apt: Debian packages apt-installed after the Dockerfile (the verifier's installs).
    Returns:
        ImageBuild with the image, or `unsupported` listing every reason there is none.
    """
    df = Path(dockerfile) if dockerfile is not None else None
    text = df.read_text() if df is not None else "FROM python:3.11-slim-bookworm\n"
    if needs := image_needs(text, compose):
        return ImageBuild(None, needs)
    root = Path(cache) if cache is not None else rootfs_cache()
    base_spec = base_for(_from_image(text))
    assert base_spec is not None  # image_needs checked it
    extra_pip, extra_apt = list(extra_pip), list(extra_apt)
    key = image_key(df, extra_pip, (base_spec[0], tuple(base_spec[1])), extra_apt)
    final, failed = root / "images" / key, root / "images" / f"{key}.failed.json"
    if not force and (hit := _cached(final, failed)):
        return hit
    start = time.monotonic()
    try:
        base = ensure_base(*base_spec, cache=root)
    except RootfsError as err:
        return ImageBuild(None, [str(err)])
    (root / "images").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"arcforge-build-{key}-"))  # the sandbox uid traverses it
    work.chmod(0o711)
    log: list[str] = []
    try:
        try:
            net = BuildNetwork(work)
        except RootfsError as err:
            return ImageBuild(None, [str(err)])
        try:
            env = {k: os.environ[k] for k in PIP_PASS if k in os.environ}
            binds = {}
            if (ca := host_ca_bundle()) is not None:
                binds = {ca: HOST_CA}
                env.update({k: HOST_CA for k in CA_VARS})
            sb = RootfsSandbox(
                RootfsImage((base,)),
                BUILD_LIMITS,
                env=env,
                network=net,
                parent=work,
                extra_ro_binds=binds,
            )
            try:
                rep = _Replay(sb, df.parent if df is not None else work, log)
                ok = True
                for line in logical_lines(text):
                    op, _, arg = line.partition(" ")
                    if not (ok := rep.step(op.upper(), arg.strip())):
                        break
                if ok and extra_apt:  # the lists may be gone (rm -rf /var/lib/apt/lists)
                    pkgs = shlex.join(extra_apt)
                    apt = f"apt-get install -y -q {pkgs} || (apt-get update -q && apt-get install -y -q {pkgs})"
                    ok = rep.exec(apt, f"verifier apt-get install {pkgs}", cwd="/")
                if ok and extra_pip:
                    pip = f"python3 -m pip install -q {shlex.join(extra_pip)}"
                    ok = rep.exec(pip, f"verifier {pip}", cwd="/")
                sb.store.view.unmount()
                upper = sb.store.view.upper
                (upper / HOST_CA.lstrip("/")).unlink(missing_ok=True)  # the bind's mount point
                sb.closed = True  # its upper dir becomes the layer; nothing else to undo
            finally:
                if not sb.closed:
                    sb.close()
        except SandboxError as err:  # the sandbox itself failed: not cached, may be transient
            return ImageBuild(None, [f"image build sandbox failed: {err}"], log=log)
        finally:
            net.close()
        if not ok:
            failed.write_text(json.dumps({"unsupported": rep.failed, "log": log}, indent=1))
            return ImageBuild(None, rep.failed, seconds=time.monotonic() - start, log=log)
        layer = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=root / "images"))
        subprocess.run(["mv", str(upper), str(layer / "upper")], check=True)  # keeps whiteouts
        meta = {"base": str(base), "workdir": rep.workdir, "env": rep.env, "log": log}
        (layer / "image.json").write_text(json.dumps(meta, indent=1))
        if final.exists():
            shutil.rmtree(final)
        failed.unlink(missing_ok=True)
        try:
            os.replace(layer, final)
        except OSError:  # a concurrent build of the same key finished first: use its image
            shutil.rmtree(layer, ignore_errors=True)
        return ImageBuild(load_image(final), seconds=time.monotonic() - start, log=log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
