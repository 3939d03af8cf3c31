"""Dockerfile replay (rootfs_build.py) against Docker's reference, one test per instruction.

Each expectation is what Docker's Dockerfile reference documents for the instruction (no
Docker daemon runs here to compare against): the resulting file tree, its owners and modes,
the cwd and environment of later steps, and what the image records. The builds replay onto a
small root made of this host's own bash, coreutils and util-linux binaries (a second or two per
build, instead of a Debian base from mmdebstrap), in the same id-mapped namespace real builds
and episodes use; only the base image is stood in for, the replay and the sandbox are real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from arcforge.sandbox.rootfs import ID_BASE, rootfs_blockers, shift_tree
from arcforge.sandbox.rootfs_build import build_image, instructions, stages
from arcforge.sandbox.rootfs_sandbox import RootfsSandbox
from arcforge.sandbox.types import Limits

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None or bool(rootfs_blockers()),
    reason="id-mapped roots need root on the host and bubblewrap",
)
TOOLS = (
    "bash sh dash cat cp mv rm ln ls mkdir chmod chown chgrp id env pwd stat touch tar gzip "
    "setpriv printf echo sed test find readlink dirname basename true false head grep "
    "sleep tr wc sort uniq cut unshare"
).split()
PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "app:x:1000:1000:app:/home/app:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\ndaemon:x:1:\nadm:x:4:app\nstaff:x:50:\napp:x:1000:\nnogroup:x:65534:\n"
LIMITS = Limits(wall_time=60, cpu_seconds=60, memory_mb=2048, output_bytes=200_000)


def _libs(binary: str) -> set[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    libs = set()
    for line in out.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                libs.add(p)
    return libs


@pytest.fixture(scope="module")
def small_root(tmp_path_factory) -> Path:
    """A root with the host's shell tools and libraries, an /etc/passwd with user `app`
    (1000) and group `adm` (4), ids shifted as a real base's are."""
    root = tmp_path_factory.mktemp("small-root") / "root"
    files: set[str] = set()
    for tool in TOOLS:
        exe = shutil.which(tool)
        if exe:
            files.add(os.path.realpath(exe))
            files |= _libs(exe)
            (root / "usr/bin").mkdir(parents=True, exist_ok=True)
            target = root / "usr/bin" / tool
            if not target.exists():
                shutil.copy2(os.path.realpath(exe), target)
    for f in files:
        if f.startswith(("/lib", "/usr/lib")):
            dest = root / os.path.realpath(f).lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(f), dest)
            if os.path.realpath(f) != f:  # keep the name the binaries ask for
                alias = root / f.lstrip("/")
                alias.parent.mkdir(parents=True, exist_ok=True)
                if not alias.exists():
                    shutil.copy2(os.path.realpath(f), alias)
    for d in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{d}"):
            target = root / d
            if target.exists() and not target.is_symlink():  # merge into usr/
                shutil.copytree(target, root / "usr" / d, dirs_exist_ok=True)
                shutil.rmtree(target)
            if not target.exists():
                target.symlink_to(os.readlink(f"/{d}"))
    for d in ("etc", "tmp", "root", "home/app", "proc", "dev", "app", "grading", "tests", "logs"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc/passwd").write_text(PASSWD)
    (root / "etc/group").write_text(GROUP)
    (root / "etc/nsswitch.conf").write_text("passwd: files\ngroup: files\n")
    os.chown(root / "home/app", 1000, 1000)
    shift_tree(root)
    return root


def build(tmp_path: Path, small_root: Path, dockerfile: str, files: dict | None = None, **kw):
    files = files or {}
    ctx = tmp_path / "ctx"
    ctx.mkdir(exist_ok=True)
    for rel, text in files.items():
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / rel).write_text(text)
    (ctx / "Dockerfile").write_text(dockerfile)
    res = build_image(
        ctx / "Dockerfile", cache=tmp_path / "cache", base_root=small_root, network=False, **kw
    )
    assert res.image is not None, res.unsupported
    return res.image


def run(image, cmd: str, **kw) -> str:
    sb = RootfsSandbox(image, LIMITS)
    try:
        res = sb.exec(cmd, **kw)
        assert res.ok, res.stdout + res.stderr
        return res.stdout
    finally:
        sb.close()


def owner(image, path: str) -> str:
    return run(image, f"stat -c '%u:%g %a' {path}").strip()


def test_instructions_parse_continuations_comments_and_heredocs():
    ins = instructions(
        "FROM debian\n"
        "RUN echo a \\\n"
        "# a comment inside a continuation\n"
        "  && echo b\n"
        "RUN --mount=type=cache,target=/root/.cache <<EOF\n"
        "set -e\n"
        "echo hi\n"
        "EOF\n"
        "COPY --chown=app:app --chmod=640 a b /x/\n"
    )
    assert [i.op for i in ins] == ["FROM", "RUN", "RUN", "COPY"]
    assert ins[1].arg == "echo a    && echo b"
    assert ins[2].flags == {"mount": "type=cache,target=/root/.cache"}
    assert ins[2].heredocs == [("EOF", "set -e\necho hi\n")]
    assert ins[3].flags == {"chown": "app:app", "chmod": "640"} and ins[3].arg == "a b /x/"


def test_global_args_reach_from_and_only_redeclared_args_reach_a_stage():
    sts = stages("ARG V=3.11\nFROM python:${V}-slim AS b\nARG V\nFROM debian:$V\n", {"V": "12"})
    assert [s.image for s in sts] == ["python:12-slim", "debian:12"]
    assert sts[0].name == "b"


@needs_root
def test_workdir_is_created_and_is_the_cwd_of_later_steps_and_of_execs(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "FROM debian\nWORKDIR /app\nWORKDIR sub\nRUN pwd > /where\nCOPY x .\nRUN ls > listing\n",
        {"x": "data\n"},
    )
    assert image.workdir == "/app/sub"
    assert run(image, "cat /where").strip() == "/app/sub"
    assert run(image, "cat x listing") == "data\nlisting\nx\n"
    assert run(image, "pwd").strip() == "/app/sub"  # an exec with no cwd starts in WORKDIR


@needs_root
def test_copy_file_into_existing_directory_trailing_slash_and_rename(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "FROM debian\nWORKDIR /app\nCOPY trunc.db /app\nCOPY a.txt /new/dir/\n"
        "COPY a.txt /renamed.txt\nCOPY a.txt b.txt /multi/\nCOPY *.txt /glob/\n",
        {"trunc.db": "db", "a.txt": "a", "b.txt": "b"},
    )
    out = run(
        image,
        "cat /app/trunc.db; echo; ls /new/dir; cat /renamed.txt; echo; ls /multi; ls /glob",
    )
    assert out == "db\na.txt\na\na.txt\nb.txt\na.txt\nb.txt\n"


@needs_root
def test_copy_directory_copies_its_contents_and_dockerignore_excludes(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "FROM debian\nCOPY src /dst\nCOPY . /all/\n",
        {
            "src/one": "1",
            "src/sub/two": "2",
            "src/skip.log": "no",
            "secret/key": "k",
            ".dockerignore": "*.log\n**/*.log\nsecret\n!secret/keep\n",
        },
    )
    assert run(image, "cd /dst && find . | sort").split() == [".", "./one", "./sub", "./sub/two"]
    listing = run(image, "cd /all && find . | sort").split()
    assert "./src/skip.log" not in listing and "./secret/key" not in listing
    assert "./src/one" in listing and "./Dockerfile" in listing


@needs_root
def test_copy_owner_is_root_unless_chown_and_chmod_sets_the_mode(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "FROM debian\nCOPY a /plain\nCOPY --chown=app:adm --chmod=640 a /owned\n"
        "COPY --chown=1000 d /tree\n",
        {"a": "x", "d/f": "y"},
    )
    assert owner(image, "/plain").split()[0] == "0:0"
    assert owner(image, "/owned") == "1000:4 640"
    assert owner(image, "/tree/f").split()[0] == "1000:0" or owner(image, "/tree/f").startswith(
        "1000:1000"
    )


@needs_root
def test_add_unpacks_a_local_tar_archive(tmp_path, small_root):
    ctx = tmp_path / "ctx"
    (ctx / "payload").mkdir(parents=True)
    (ctx / "payload" / "inside.txt").write_text("unpacked\n")
    with tarfile.open(ctx / "p.tar.gz", "w:gz") as tar:
        tar.add(ctx / "payload" / "inside.txt", arcname="inside.txt")
    image = build(tmp_path, small_root, "FROM debian\nADD p.tar.gz /opt/p/\nCOPY p.tar.gz /raw/\n")
    assert run(image, "cat /opt/p/inside.txt; ls /raw") == "unpacked\np.tar.gz\n"


@needs_root
def test_env_and_arg_scoping_defaults_and_build_args(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "ARG GLOBAL=g\nFROM debian\nARG GLOBAL\nARG A=default\nARG B=b\nENV E=$A-${B:-x}\n"
        "ENV F=${UNSET:-fallback} G=${A:+set}\nRUN echo $GLOBAL $A $B $E $F $G > /seen\n",
        build_args={"A": "given"},
    )
    assert run(image, "cat /seen") == "g given b given-b fallback set\n"
    assert image.env == {"E": "given-b", "F": "fallback", "G": "set"}  # ARGs do not persist
    assert run(image, "echo $E $A").strip() == "given-b"


@needs_root
def test_user_runs_later_steps_and_execs_as_that_user(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "FROM debian\nWORKDIR /home/app\nUSER app\nRUN id -u > uid && id -G > groups && "
        "echo $HOME > home\nUSER root\nRUN id -u > /rootuid\nUSER app:staff\n",
    )
    assert owner(image, "/home/app/uid").split()[0] == "1000:1000"
    assert run(image, "cat /home/app/uid /home/app/groups /home/app/home").split() == [
        "1000",
        "1000",
        "4",
        "/home/app",
    ]
    assert run(image, "cat /rootuid").strip() == "0"
    assert image.user == "app:staff"
    assert run(image, "id -u; id -g").split() == ["1000", "50"]
    assert run(image, "id -u", grading=True).strip() == "0"  # the verifier runs as root


@needs_root
def test_shell_and_run_heredocs(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        'FROM debian\nRUN echo $0 > /default-shell\nSHELL ["/bin/bash", "-c"]\n'
        "RUN echo $0 > /bash-shell\n"
        "RUN <<EOF\nset -e\necho one > /h1\necho two >> /h1\nEOF\n"
        "RUN cat <<EOT > /h2\nline $((1+1))\nEOT\n"
        "RUN <<EOF\n#!/bin/bash\necho ${BASH_VERSION:+bash} > /h3\nEOF\n"
        'RUN ["/bin/sh", "-c", "echo exec-form > /h4"]\n'
        "COPY <<EOF /etc/motd\nhello\nEOF\n",
    )
    out = run(image, "cat /default-shell /bash-shell /h1 /h2 /h3 /h4 /etc/motd")
    assert out == "/bin/sh\n/bin/bash\none\ntwo\nline 2\nbash\nexec-form\nhello\n"


@needs_root
def test_run_mount_cache_is_ignored_and_noted(tmp_path, small_root):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        "FROM debian\nRUN --mount=type=cache,target=/root/.cache echo ok > /ran\n"
    )
    res = build_image(ctx / "Dockerfile", cache=tmp_path / "c", base_root=small_root, network=False)
    assert res.image is not None, res.unsupported
    assert any("cache/secret mounts ignored" in line for line in res.log)
    assert run(res.image, "cat /ran") == "ok\n"


@needs_root
def test_multi_stage_copy_from_a_named_and_a_numbered_stage(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "FROM debian AS builder\nWORKDIR /src\nRUN echo built > artifact && mkdir out && "
        "echo o > out/f\nFROM debian AS unused\nRUN false\n"
        "FROM debian\nCOPY --from=builder /src/artifact /app/\nCOPY --from=0 /src/out /o\n",
    )
    assert run(image, "cat /app/artifact /o/f") == "built\no\n"
    assert run(image, "ls /src 2>/dev/null || echo absent").strip() == "absent"


@needs_root
def test_entrypoint_and_cmd_are_recorded(tmp_path, small_root):
    image = build(tmp_path, small_root, 'FROM debian\nENTRYPOINT ["/bin/echo"]\nCMD echo hi\n')
    assert image.entrypoint == ("/bin/echo",)
    assert image.cmd == ("/bin/sh", "-c", "echo hi")


@needs_root
def test_full_id_map_chown_to_any_id_and_new_users(tmp_path, small_root):
    image = build(
        tmp_path,
        small_root,
        "FROM debian\nRUN touch /f && chown daemon:adm /f && mkdir /g && chown 4242:4243 /g\n",
    )
    assert owner(image, "/f").split()[0] == "1:4"
    assert owner(image, "/g").split()[0] == "4242:4243"
    layer = image.lowers[0]
    st = os.lstat(layer / "g")
    assert (st.st_uid, st.st_gid) == (ID_BASE + 4242, ID_BASE + 4243)  # shifted on the host
    assert run(image, "unshare -U true 2>&1 || echo refused").strip().endswith("refused") or (
        shutil.which("unshare") is None
    )


@needs_root
def test_a_terminal_bench_base_image_starts_in_its_workdir(tmp_path, small_root):
    # ghcr.io/laude-institute/t-bench/* set WORKDIR /app; TB1's run-tests.sh refuses to run
    # from / ("No working directory set")
    image = build(
        tmp_path,
        small_root,
        "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nRUN pwd > /where\n",
    )
    assert image.workdir == "/app"
    assert run(image, "cat /where; pwd").split() == ["/app", "/app"]


@needs_root
def test_the_image_own_workspace_tests_and_logs_dirs_are_plain_directories(tmp_path, small_root):
    # a build sees the image alone: /workspace is not /app, /tests and /logs are writable dirs
    image = build(
        tmp_path,
        small_root,
        "FROM debian\nWORKDIR /workspace\nCOPY f .\nRUN mkdir -p /tests && chmod 777 /tests "
        "&& echo t > /tests/keep\n",
        {"f": "mine\n"},
    )
    assert run(image, "cat /workspace/f; pwd; ls /app | wc -l").split() == [
        "mine",
        "/workspace",
        "0",
    ]
