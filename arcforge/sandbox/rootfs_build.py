"""Build a task's Dockerfile into a real-root image: its base's Debian rootfs plus one layer.

`build_image(dockerfile)` maps each needed stage's FROM to a cached Debian base (rootfs.py),
mounts a view of it whose upper dir becomes the image's layer, and replays the Dockerfile inside
as Docker's Dockerfile reference specifies each instruction (docs/sandbox.md has the table):
WORKDIR creates its directory and is the cwd of later steps and of every episode exec;
COPY/ADD put a file into an existing directory or `dest/` as dest/name, copy a directory's
contents, expand globs, honour `.dockerignore`, `--chown`, `--chmod`, `--from=<stage>` and
here-documents, and ADD unpacks local tar archives and fetches URLs; ENV and ARG scope and
expand as Docker does (`build_args` are `--build-arg`); USER runs later RUNs (and the
episode's non-grading execs) as that user; SHELL sets the shell of shell forms; RUN takes the
shell or exec form and here-documents, ignoring `--mount=type=cache` with a note; ENTRYPOINT
and CMD are recorded. RUN lines run in a sandbox joined to a private build network (outbound
through slirp4netns; the host's loopback and private ranges unreachable), in the id-mapped
user namespace (rootfs.IdNamespace), so dpkg, useradd and chown work. Then the verifier's
hoisted `apt-get install`s and `pip install`s run (episodes have no network, builds do).

Images are cached under <rootfs cache>/images/<key>, the key hashing the Dockerfile, every file
of its build context, the hoisted packages, the build args and the bases. A failed build is
cached too, as <key>.failed.json with its reasons, so the next import names them without
rebuilding; a step that failed for want of a host that is not a package registry says so
(`offline_hosts`). Needs that cannot be met are found before building and listed together:
an unmappable base image (or `COPY --from` another image), services, GPUs, QEMU, and this host
lacking what real roots need. A stage built FROM an earlier stage is not replayed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from arcforge.sandbox.root import (
    _env_pairs,
    context_key,
    context_matches,
    dockerfile_needs,
    failure_detail,
)
from arcforge.sandbox.rootfs import (
    BASE_FORMAT,
    BuildNetwork,
    RootfsError,
    base_for,
    ensure_base,
    rootfs_blockers,
    rootfs_cache,
)
from arcforge.sandbox.rootfs_sandbox import PATH, RootfsImage, RootfsSandbox, lookup_user
from arcforge.sandbox.types import APP, Limits, SandboxError

IMAGE_FORMAT = 4
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
    return RootfsImage(
        lowers,
        meta.get("workdir", APP),
        dict(meta.get("env") or {}),
        user=meta.get("user") or "",
        entrypoint=tuple(meta.get("entrypoint") or ()),
        cmd=tuple(meta.get("cmd") or ()),
    )


# --- parsing ---------------------------------------------------------------------------------
@dataclass
class Instruction:
    """One Dockerfile instruction: upper-case op, its flags (--name=value, in order), the rest
    of the line, and its here-documents [(terminator, body)] in order."""

    op: str
    arg: str
    flags: dict[str, str] = field(default_factory=dict)
    heredocs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The shell text of a RUN, here-documents included, as the shell would read it."""
        out = self.arg
        for term, body in self.heredocs:
            out += f"\n{body}{term}"
        return out


HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_]\w*)\2")
FLAG = re.compile(r"--([\w-]+)(?:=(\S*))?\s*")


def instructions(text: str) -> list[Instruction]:
    """A Dockerfile's instructions: comment lines dropped (inside continuations too), backslash
    continuations joined, RUN/COPY/ADD here-documents (`<<EOF`, `<<-EOF`, quoted) read."""
    lines = text.splitlines()
    out: list[Instruction] = []
    i, cur = 0, ""
    while i < len(lines):
        raw = lines[i].rstrip()
        i += 1
        if raw.lstrip().startswith("#") or (not cur and not raw.strip()):
            continue
        if raw.endswith("\\"):
            cur += raw[:-1] + " "
            continue
        line = (cur + raw).strip()
        cur = ""
        op, _, rest = line.partition(" ")
        op, rest = op.upper(), rest.strip()
        flags: dict[str, str] = {}
        while m := FLAG.match(rest):
            if op not in ("RUN", "COPY", "ADD", "FROM"):
                break
            flags[m.group(1)] = m.group(2) or ""
            rest = rest[m.end() :]
        docs: list[tuple[str, str]] = []
        if op in ("RUN", "COPY", "ADD"):
            for m in HEREDOC.finditer(rest):
                strip_tabs, term = bool(m.group(1)), m.group(3)
                body: list[str] = []
                while i < len(lines):
                    ln = lines[i]
                    i += 1
                    if (ln.lstrip("\t") if strip_tabs else ln) == term:
                        break
                    body.append(ln.lstrip("\t") if strip_tabs else ln)
                docs.append((term, "".join(b + "\n" for b in body)))
        out.append(Instruction(op, rest, flags, docs))
    if cur.strip():
        op, _, rest = cur.strip().partition(" ")
        out.append(Instruction(op.upper(), rest.strip()))
    return out


def expand(text: str, vars: dict[str, str]) -> str:
    r"""Dockerfile variable substitution: $NAME, ${NAME}, ${NAME:-word}, ${NAME:+word}, and
    \$ for a literal dollar."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0).startswith("\\"):
            return "$"
        name = m.group(1) or m.group(4)
        op, word = m.group(2), m.group(3)
        val = vars.get(name, "")
        if op == ":-":
            return val or word
        if op == ":+":
            return word if val else ""
        return val

    return re.sub(r"\\\$|\$\{(\w+)(?:(:[-+])([^}]*))?\}|\$(\w+)", sub, text)


def _words(arg: str) -> list[str]:
    """The operands of an exec-form (JSON) or shell-form instruction."""
    if arg.lstrip().startswith("["):
        try:
            return [str(w) for w in json.loads(arg)]
        except json.JSONDecodeError:
            pass
    return shlex.split(arg)


def _arg_pairs(arg: str) -> list[tuple[str, str | None]]:
    """ARG NAME[=default] ... (quotes stripped)."""
    out = []
    for word in shlex.split(arg):
        name, eq, default = word.partition("=")
        out.append((name, default if eq else None))
    return out


@dataclass
class Stage:
    """One FROM ... [AS name] stage: its base image reference and its instructions."""

    image: str
    name: str
    index: int
    body: list[Instruction]


def stages(text: str, build_args: dict[str, str] | None = None) -> list[Stage]:
    """The Dockerfile's stages, each FROM expanded with the global ARGs (those before it)."""
    glob_args: dict[str, str] = {}
    out: list[Stage] = []
    for ins in instructions(text):
        if ins.op == "FROM":
            words = expand(ins.arg, glob_args).split()
            image = words[0] if words else ""
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else ""
            out.append(Stage(image, name.lower(), len(out), []))
        elif not out:
            if ins.op == "ARG":
                for name, default in _arg_pairs(ins.arg):
                    val = (build_args or {}).get(name, default)
                    glob_args[name] = expand(val or "", glob_args)
        else:
            out[-1].body.append(ins)
    if not out:
        out.append(Stage("debian:bookworm", "", 0, []))
    for st in out:  # global ARGs are visible inside a stage once it declares them again
        st.body.insert(0, Instruction("#GLOBALS", json.dumps(glob_args)))
    return out


def _from_image(text: str) -> str:
    return stages(text)[-1].image


def _stage_ref(stages_: list[Stage], ref: str) -> Stage | None:
    ref = ref.lower()
    return next((s for s in stages_ if s.name == ref or str(s.index) == ref), None)


def image_needs(text: str, compose: str = "") -> list[str]:
    """Every reason a Dockerfile cannot become a real root here, found without building."""
    sts = stages(text)
    drop = ("is not a stock", "USER ", "--from is not replayed")
    reasons = [r for r in dockerfile_needs(text, compose) if not any(d in r for d in drop)]
    for st in _needed(sts):
        if _stage_ref(sts[: st.index], st.image) is not None:
            reasons.append(f"FROM {st.image}: a stage built on an earlier stage is not replayed")
        elif base_for(st.image) is None and not any("GPU" in r for r in reasons):
            reasons.append(f"base image {st.image} has no Debian stand-in (python, debian, ubuntu)")
        for ins in st.body:
            ref = ins.flags.get("from")
            if ins.op in ("COPY", "ADD") and ref and _stage_ref(sts[: st.index], ref) is None:
                reasons.append(
                    f"COPY --from={ref}: an image other than this Dockerfile's stages, "
                    "which cannot be pulled here (no Debian stand-in)"
                )
    return sorted(set(reasons + rootfs_blockers()))


def _needed(sts: list[Stage]) -> list[Stage]:
    """The stages the last one needs (itself included), as BuildKit builds only those."""
    need = {sts[-1].index}
    for st in reversed(sts):
        if st.index in need:
            for ins in st.body:
                ref = ins.flags.get("from")
                if ins.op in ("COPY", "ADD") and ref:
                    dep = _stage_ref(sts[: st.index], ref)
                    if dep is not None:
                        need.add(dep.index)
    return [st for st in sts if st.index in need]


def image_key(
    dockerfile: Path | None,
    extra_pip: list[str],
    base: tuple,
    extra_apt: list[str] = (),
    build_args: dict[str, str] | None = None,
) -> str:
    apt = f":apt={sorted(extra_apt)}" if extra_apt else ""
    bargs = f":args={sorted((build_args or {}).items())}" if build_args else ""
    h = hashlib.sha256(
        f"arcforge-image-{IMAGE_FORMAT}.{BASE_FORMAT}:{sorted(extra_pip)}:{base}{apt}{bargs}".encode()
    )
    return context_key(h, dockerfile)


# --- .dockerignore ---------------------------------------------------------------------------
def _pattern_re(pat: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**", i):
            out += ".*"
            i += 2
            if pat.startswith("/", i):
                out = out[:-2] + "(.*/)?"
                i += 1
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c) if c != "[" else "[")
        if c == "[":
            j = pat.find("]", i)
            if j > i:
                out = out[:-1] + "[" + pat[i + 1 : j].replace("!", "^", 1) + "]"
                i = j
        i += 1
    return re.compile(f"^{out}$")


def dockerignore(context: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """The context's .dockerignore rules [(exception, pattern)], in order."""
    f = context / ".dockerignore"
    if not f.is_file():
        return []
    rules = []
    for line in f.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exc = line.startswith("!")
        pat = os.path.normpath(line[1:] if exc else line).lstrip("/")
        rules.append((exc, _pattern_re(pat)))
    return rules


def ignored(rules: list[tuple[bool, re.Pattern[str]]], rel: str) -> bool:
    """Whether the context path `rel` is excluded (a rule matching a parent dir excludes it;
    later rules win, `!` re-includes), as Docker's pattern matcher decides."""
    parts = rel.split("/")
    out = False
    for exc, pat in rules:
        if any(pat.match("/".join(parts[: k + 1])) for k in range(len(parts))):
            out = not exc
    return out


# --- build-time network ---------------------------------------------------------------------
# hosts a build reaches on this machine: the Debian, Ubuntu, PyPI and npm registries
REGISTRY_HOSTS = re.compile(
    r"(^|\.)(debian\.org|ubuntu\.com|pypi\.org|pythonhosted\.org|npmjs\.org|npmjs\.com)$"
)
NET_FAILURE = re.compile(
    r"Could not resolve host|Temporary failure in name resolution|Name or service not known|"
    r"Network is unreachable|Failed to connect|Connection (refused|timed out)|"
    r"unable to access|Unable to establish SSL|Failed to establish a new connection|"
    r"unable to resolve host address|No address associated with hostname|"
    r"couldn't connect to|Failed to resolve|offline mode is enabled|"
    r"episodes have no\s+network",  # the episode's apt shim, asked for a download
    re.I,
)


def offline_hosts(cmd: str, output: str, exit_code: int) -> list[str]:
    """The non-registry hosts a failed build step tried to reach, when it failed for want of
    the network (curl exit 6/7/28/35, wget exit 4, or a resolver/connect error in its output);
    empty otherwise (the step failed for another reason)."""
    found = re.findall(
        r"(?:https?|git|ftp)://(?:[^@/\s]+@)?([\w.-]+)|resolve host:? '?([\w.-]+\.\w+)",
        cmd + "\n" + output,
    )
    names = {h.lower() for pair in found for h in pair if h}
    hosts = sorted(h for h in names if not REGISTRY_HOSTS.search(h))
    words = cmd.split()
    if "add-apt-repository" in words and (ppa := re.search(r"\bppa:(\S+)", cmd)):
        return [f"ppa.launchpadcontent.net (ppa:{ppa.group(1)})"]  # Launchpad, not a registry
    curl = "curl" in words and exit_code in (6, 7, 28, 35)
    wget = "wget" in words and exit_code == 4
    if hosts and (curl or wget or NET_FAILURE.search(output)):
        return hosts
    return []


# apt's words for a package (or pinned version) the release does not have
UBUNTU_ONLY = re.compile(
    r"Version '([^']+)' for '([^']+)' was not found|Unable to locate package (\S+)"
    r"|Package '?(\S+?)'? has no installation candidate"
)


# --- replay ----------------------------------------------------------------------------------
def base_workdir(image: str) -> str:
    """The WORKDIR a base image sets: Terminal-Bench's own bases set /app; stock images /."""
    return "/app" if "laude-institute/t-bench/" in image else "/"


ARCHIVE = re.compile(r"\.(tar|tar\.gz|tgz|tar\.bz2|tbz2?|tar\.xz|txz)$")


class _Replay:
    """Replays one stage of a Dockerfile in a build sandbox, as Docker's reference specifies
    each instruction (the module header lists them)."""

    def __init__(
        self,
        sb: RootfsSandbox,
        context: Path,
        log: list[str],
        build_args: dict[str, str] | None = None,
        stages_: dict[str, RootfsSandbox] | None = None,
        workdir: str = "/",
        image: str = "",
    ):
        self.sb, self.context, self.log = sb, context, log
        self.workdir, self.env, self.args = workdir, {}, {}  # type: ignore[var-annotated]
        self.build_args = dict(build_args or {})
        self.globals: dict[str, str] = {}
        self.user, self.shell = "", ["/bin/sh", "-c"]
        self.entrypoint: list[str] = []
        self.cmd: list[str] = []
        self.stages = stages_ or {}
        self.image = image
        self.ubuntu = bool(re.search(r"(^|/)ubuntu[:@]|t-bench/ubuntu-", image))
        self.rules = dockerignore(context)
        self.failed: list[str] = []

    def vars(self) -> dict[str, str]:
        """What $NAME expands to, and a RUN's environment: the image's defaults, ARGs in
        scope, ENVs (an ENV wins over an ARG of the same name)."""
        return {"PATH": PATH, "HOME": "/root", **self.args, **self.env}

    def exec(self, cmd: str, what: str, cwd: str | None = None, as_root: bool = False) -> bool:
        self.sb.user = "" if as_root else self.user
        env = self.vars()
        if self.sb.user not in ("", "root", "0") and "HOME" not in self.env:
            del env["HOME"]  # the user's own, from the image's /etc/passwd
        try:
            res = self.sb.exec(cmd, cwd=cwd or self.workdir, env=env)
        except SandboxError as err:
            self.failed.append(f"Dockerfile {what[:100]} failed: {err}")
            return False
        finally:
            self.sb.user = ""
        self.log.append(f"{what[:100]} -> exit {res.exit_code} in {res.duration:.1f}s")
        if not res.ok:
            why, tail = failure_detail(res)
            hosts = offline_hosts(cmd, res.stdout + res.stderr, res.exit_code)
            dockerfile_step = not what.startswith("verifier")
            out = res.stdout + res.stderr
            missing = UBUNTU_ONLY.findall(out) if self.ubuntu and dockerfile_step else []
            if missing:
                names = {f"{m[1]}={m[0]}" if m[1] else m[2] or m[3] for m in missing}
                pkgs = ", ".join(sorted(names))[:150]
                self.failed.append(
                    f"base image {self.image} has no Debian stand-in for what this build "
                    f"installs: Ubuntu's {pkgs} is not in the Debian release standing in for "
                    f"it (Dockerfile {what[:60]} failed, {why})"
                )
            elif hosts:
                self.failed.append(
                    f"needs the network at build time: {', '.join(hosts)} is not a package "
                    f"registry and cannot be reached here (Dockerfile {what[:80]} failed, {why})"
                )
            else:
                self.failed.append(f"Dockerfile {what[:100]} failed ({why}): {tail}")
        return res.ok

    def _sources(self, ins: Instruction, src: str) -> list[Path] | None:
        """Host paths a COPY/ADD source names (build context, or another stage's root)."""
        ref = ins.flags.get("from")
        if ref:
            other = self.stages.get(ref.lower())
            if other is None:
                self.failed.append(f"{ins.op} --from={ref}: no such stage")
                return None
            root = other.store.merged
            try:
                host = other.store.host_path(src if src.startswith("/") else f"/{src}")
            except SandboxError:
                host = root / src.lstrip("/")
            if any(c in src for c in "*?["):
                return sorted(root.glob(src.lstrip("/")))
            return [host] if os.path.lexists(host) else []
        ctx = self.context.resolve()
        matches = context_matches(self.context, src.lstrip("/"))
        out = []
        for m in matches:
            if not m.exists() or ctx not in [m.resolve(), *m.resolve().parents]:
                continue
            rel = m.resolve().relative_to(ctx).as_posix()
            if rel != "." and ignored(self.rules, rel):
                continue
            out.append(m)
        return out

    def _stage(self, m: Path, stage_path: str, from_stage: bool) -> None:
        self.sb.copy_in(m, stage_path)
        if not self.rules or from_stage or not m.is_dir():
            return
        host = self.sb.store.grading / stage_path[len("/grading/") :]
        ctx = self.context.resolve()
        for p in sorted(host.rglob("*"), reverse=True):
            rel = (m.resolve() / p.relative_to(host)).relative_to(ctx).as_posix()
            if ignored(self.rules, rel) and os.path.lexists(p):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()

    def copy(self, ins: Instruction) -> bool:
        """COPY/ADD: a file into an existing directory or `dest/` lands as dest/name, else at
        dest; a directory's contents are copied; parents are made; owner root unless
        --chown, modes kept unless --chmod; ADD unpacks local tar archives, fetches URLs."""
        what = f"{ins.op} {ins.arg}"
        words = [expand(w, self.vars()) for w in _words(ins.arg)]
        if ins.heredocs and words and HEREDOC.fullmatch(ins.arg.split()[0]):
            return self._copy_heredocs(ins, words[-1])
        if len(words) < 2:
            self.failed.append(f"{what}: needs a source and a destination")
            return False
        *srcs, dst = words
        if not dst.startswith("/"):
            dst = f"{self.workdir.rstrip('/')}/{dst}"
        chown = expand(ins.flags.get("chown", ""), self.vars())
        chmod = ins.flags.get("chmod", "")
        cmds = ["set -e"]
        into = dst.endswith("/") or len(srcs) > 1
        qdst = shlex.quote(dst.rstrip("/") or "/")
        for i, src in enumerate(srcs):
            if ins.op == "ADD" and src.startswith(("http://", "https://")):
                name = src.rstrip("/").rsplit("/", 1)[-1] or "index.html"
                cmds.append(
                    f"if [ -d {qdst} ] || [ {int(into)} = 1 ]; then mkdir -p {qdst}; "
                    f"t={qdst}/{shlex.quote(name)}; else mkdir -p $(dirname {qdst}); t={qdst}; fi"
                )
                cmds.append(f'curl -fsSL {shlex.quote(src)} -o "$t" && chmod 600 "$t"')
                cmds += self._owner_cmds(['"$t"'], chown, chmod)
                continue
            matches = self._sources(ins, src)
            if matches is None:
                return False
            if not matches:
                where = f"stage {ins.flags['from']}" if "from" in ins.flags else "build context"
                self.failed.append(f"{ins.op} source {src} is not in the {where}")
                return False
            into = into or len(matches) > 1
            for j, m in enumerate(matches):
                stage = f"{STAGE}/{i}-{j}"
                self._stage(m, stage, "from" in ins.flags)
                if m.is_dir() and not m.is_symlink():
                    top = sorted(p.name for p in (self.sb.store.grading / stage[9:]).iterdir())
                    cmds.append(f"[ -e {qdst} ] && new=0 || new=1; mkdir -p {qdst}")
                    cmds.append(f"cp -a {stage}/. {qdst}/")
                    targets = [f"{qdst}/{shlex.quote(n)}" for n in top]
                    cmds += self._owner_cmds(targets, chown, chmod)
                    if chown:
                        cmds.append(f'[ "$new" = 1 ] && chown {shlex.quote(chown)} {qdst} || true')
                elif ins.op == "ADD" and ARCHIVE.search(m.name) and "from" not in ins.flags:
                    cmds.append(f"mkdir -p {qdst} && tar -xf {stage} -C {qdst}")
                else:
                    name = shlex.quote(m.name)
                    cmds.append(
                        f"if [ -d {qdst} ] || [ {int(into)} = 1 ]; then mkdir -p {qdst}; "
                        f't={qdst}/{name}; else mkdir -p "$(dirname {qdst})"; t={qdst}; fi'
                    )
                    cmds.append(f'cp -a {stage} "$t"')
                    cmds += self._owner_cmds(['"$t"'], chown, chmod)
        ok = self.exec("\n".join(cmds), what, cwd="/", as_root=True)
        shutil.rmtree(self.sb.store.grading / ".context", ignore_errors=True)
        return ok

    @staticmethod
    def _owner_cmds(targets: list[str], chown: str, chmod: str) -> list[str]:
        out = []
        if targets and chown:
            out.append(f"chown -R {shlex.quote(chown)} {' '.join(targets)}")
        if targets and chmod:
            out.append(f"chmod -R {shlex.quote(chmod)} {' '.join(targets)}")
        return out

    def _copy_heredocs(self, ins: Instruction, dst: str) -> bool:
        """COPY <<EOF /path: each here-document becomes a file (at dst, or dst/<name>)."""
        if not dst.startswith("/"):
            dst = f"{self.workdir.rstrip('/')}/{dst}"
        cmds = ["set -e"]
        for k, (term, body) in enumerate(ins.heredocs):
            stage = f"{STAGE}/h{k}"
            self.sb.write_file(stage, body)
            target = f"{dst.rstrip('/')}/{term}" if dst.endswith("/") else dst
            cmds.append(f'mkdir -p "$(dirname {shlex.quote(target)})"')
            cmds.append(f"cp {stage} {shlex.quote(target)} && chmod 644 {shlex.quote(target)}")
            cmds += self._owner_cmds(
                [shlex.quote(target)],
                expand(ins.flags.get("chown", ""), self.vars()),
                ins.flags.get("chmod", ""),
            )
        ok = self.exec("\n".join(cmds), f"{ins.op} {ins.arg}", cwd="/", as_root=True)
        shutil.rmtree(self.sb.store.grading / ".context", ignore_errors=True)
        return ok

    def run(self, ins: Instruction) -> bool:
        """RUN: exec form as given; shell form through SHELL (default /bin/sh -c); a bare
        here-document is the script (its #! line picks the interpreter)."""
        for key in ins.flags:
            if key == "mount":
                self.log.append(f"RUN --mount={ins.flags[key]}: cache/secret mounts ignored")
            elif key not in ("network", "security"):
                self.log.append(f"RUN --{key}: ignored")
        arg = ins.arg.strip()
        if arg.startswith("[") and not ins.heredocs:
            try:
                cmd = shlex.join(json.loads(arg))
                return self.exec(cmd, f"RUN {arg}")
            except json.JSONDecodeError:
                pass
        if ins.heredocs and HEREDOC.fullmatch(arg):
            body = ins.heredocs[0][1]
            first = body.splitlines()[0] if body else ""
            if first.startswith("#!"):
                interp = first[2:].strip()
                cmd = f"{interp} <<'ARCFORGE_HEREDOC'\n{body}ARCFORGE_HEREDOC"
                return self.exec(cmd, f"RUN <<{ins.heredocs[0][0]} ({interp})")
            return self.exec(shlex.join([*self.shell, body]), f"RUN <<{ins.heredocs[0][0]}")
        return self.exec(shlex.join([*self.shell, ins.text]), f"RUN {ins.text}")

    def step(self, ins: Instruction) -> bool:
        op, arg = ins.op, ins.arg
        if op == "#GLOBALS":
            self.globals = json.loads(arg)
        elif op == "WORKDIR":
            arg = expand(arg, self.vars())
            self.workdir = os.path.normpath(arg if arg.startswith("/") else f"{self.workdir}/{arg}")
            return self.exec(
                f"mkdir -p {shlex.quote(self.workdir)}", f"WORKDIR {arg}", cwd="/", as_root=True
            )
        elif op == "ENV":
            self.env.update({k: expand(v, self.vars()) for k, v in _env_pairs(arg)})
        elif op == "ARG":
            for name, default in _arg_pairs(arg):
                if name in self.build_args:
                    self.args[name] = self.build_args[name]
                elif default is not None:
                    self.args[name] = expand(default, self.vars())
                elif name in self.globals:
                    self.args[name] = self.globals[name]
                else:
                    self.args.setdefault(name, "")
        elif op in ("COPY", "ADD"):
            return self.copy(ins)
        elif op == "RUN":
            return self.run(ins)
        elif op == "USER":
            self.user = expand(arg, self.vars()).strip()
            try:
                lookup_user(self.sb.store.merged, self.user)
            except SandboxError as err:
                self.failed.append(str(err))
                return False
        elif op == "SHELL":
            self.shell = _words(arg)
        elif op in ("ENTRYPOINT", "CMD"):
            words = _words(arg) if arg.startswith("[") else [*self.shell, arg]
            if op == "ENTRYPOINT":
                self.entrypoint, self.cmd = words, []  # ENTRYPOINT resets an inherited CMD
            else:
                self.cmd = words
        return True

    def replay(self, body: list[Instruction]) -> bool:
        return all(self.step(ins) for ins in body)


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
    build_args: dict[str, str] | None = None,
    base_root: str | Path | None = None,
    network: bool = True,
) -> ImageBuild:
    """The cached real-root image of `dockerfile` (None: a bare python base), built when missing.

    Args:
        dockerfile: path of the task's Dockerfile; its directory is the build context.
        compose: the task's docker-compose text (checked for services and devices).
        extra_pip: packages pip-installed after the Dockerfile (the verifier's installs).
        cache: cache root (default `rootfs_cache()`).
        force: rebuild even when cached (a cached failure too).
        extra_apt: Debian packages apt-installed after the Dockerfile (the verifier's installs).
        build_args: `--build-arg` values (override ARG defaults).
        base_root: a root directory (ids shifted by ID_BASE) standing in for every stage's
            base image instead of the mapped Debian base (small roots in tests).
        network: give RUN lines the build network (False: loopback only).
    Returns:
        ImageBuild with the image, or `unsupported` listing every reason there is none.
    """
    df = Path(dockerfile) if dockerfile is not None else None
    text = df.read_text() if df is not None else "FROM python:3.11-slim-bookworm\n"
    needs = image_needs(text, compose)
    if base_root is not None:
        needs = [n for n in needs if "Debian stand-in" not in n]
    if needs:
        return ImageBuild(None, needs)
    root = Path(cache) if cache is not None else rootfs_cache()
    sts = _needed(stages(text, build_args))
    specs = {st.index: base_for(st.image) for st in sts}
    bkey = (
        str(base_root)
        if base_root is not None
        else tuple((sp[0], tuple(sp[1])) for sp in specs.values() if sp is not None)
    )
    extra_pip, extra_apt = list(extra_pip), list(extra_apt)
    key = image_key(df, extra_pip, bkey, extra_apt, build_args)
    final, failed = root / "images" / key, root / "images" / f"{key}.failed.json"
    if not force and (hit := _cached(final, failed)):
        return hit
    start = time.monotonic()
    try:
        bases = {
            i: Path(base_root) if base_root is not None else ensure_base(*sp, cache=root)
            for i, sp in specs.items()
            if sp is not None or base_root is not None
        }
    except RootfsError as err:
        return ImageBuild(None, [str(err)])
    (root / "images").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"arcforge-build-{key}-"))
    work.chmod(0o711)
    log: list[str] = []
    opened: list[RootfsSandbox] = []
    net: BuildNetwork | None = None
    try:
        try:
            net = BuildNetwork(work, full_map=True) if network else None
        except RootfsError as err:
            return ImageBuild(None, [str(err)])
        try:
            env = {k: os.environ[k] for k in PIP_PASS if k in os.environ}
            binds = {}
            if (ca := host_ca_bundle()) is not None:
                binds = {ca: HOST_CA}
                env.update({k: HOST_CA for k in CA_VARS})
            context = df.parent if df is not None else work
            built: dict[str, RootfsSandbox] = {}
            ok, rep = True, None
            for st in sts:
                sb = RootfsSandbox(
                    RootfsImage((bases[st.index],)),
                    BUILD_LIMITS,
                    env=env,
                    network=net,
                    parent=work,
                    extra_ro_binds=binds,
                    build=True,
                )
                opened.append(sb)
                rep = _Replay(sb, context, log, build_args, built, base_workdir(st.image), st.image)
                log.append(
                    f"stage {st.index} FROM {st.image}" + (f" AS {st.name}" if st.name else "")
                )
                if not (ok := rep.replay(st.body)):
                    break
                built[str(st.index)] = sb
                if st.name:
                    built[st.name] = sb
            assert rep is not None
            if ok and extra_apt:  # the lists may be gone (rm -rf /var/lib/apt/lists)
                pkgs = shlex.join(extra_apt)
                apt = f"apt-get install -y -q {pkgs} || (apt-get update -q && apt-get install -y -q {pkgs})"
                ok = rep.exec(apt, f"verifier apt-get install {pkgs}", cwd="/", as_root=True)
            if ok and extra_pip:  # the image's python3 may lack pip (ubuntu): add Debian's
                pip = f"python3 -m pip install -q {shlex.join(extra_pip)}"
                get = "apt-get install -y -q python3-pip"
                cmd = (
                    f"{{ python3 -m pip --version >/dev/null 2>&1 || {get} || "
                    f"{{ apt-get update -q && {get}; }}; }} && PIP_BREAK_SYSTEM_PACKAGES=1 {pip}"
                )
                ok = rep.exec(cmd, f"verifier {pip}", cwd="/", as_root=True)
            last = opened[-1]
            if ok:
                last.store.view.unmount()
                upper = last.store.view.upper
                (upper / HOST_CA.lstrip("/")).unlink(missing_ok=True)  # the bind's mount point
                last.closed = True  # its upper dir becomes the layer; nothing else to undo
        except SandboxError as err:  # the sandbox itself failed: not cached, may be transient
            return ImageBuild(None, [f"image build sandbox failed: {err}"], log=log)
        finally:
            for sb in opened:
                if not sb.closed:
                    sb.close()
            if net is not None:
                net.close()
        if not ok:
            failed.write_text(json.dumps({"unsupported": rep.failed, "log": log}, indent=1))
            return ImageBuild(None, rep.failed, seconds=time.monotonic() - start, log=log)
        layer = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=root / "images"))
        subprocess.run(["mv", str(upper), str(layer / "upper")], check=True)  # keeps whiteouts
        meta = {
            "base": str(bases[sts[-1].index]),
            "workdir": rep.workdir,
            "env": rep.env,
            "user": rep.user,
            "entrypoint": rep.entrypoint,
            "cmd": rep.cmd,
            "log": log,
        }
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
