"""Full id maps in real-root builds and episodes (rootfs.IdNamespace): ids 0..65535 inside map
onto a 65,536-id host range, as Docker's default does, so Debian's own tools work unchanged.

`apt-get install tmux` makes dpkg and apt chown to system groups (apt's term.log to root:adm,
tmux's files to root:root from the package's tarball) — with one id mapped this fails with
"chown to root:adm ... (22: Invalid argument)". `useradd` writes /etc/passwd, /etc/shadow and
a home owned by the new user, and `su` switches to it. Needs the cached bookworm base (built
by mmdebstrap on first use) and the package mirror.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arcforge.sandbox.rootfs import ID_BASE, base_for, ensure_base, rootfs_blockers
from arcforge.sandbox.rootfs_build import build_image
from arcforge.sandbox.rootfs_sandbox import RootfsSandbox
from arcforge.sandbox.types import Limits

needs_rootfs = pytest.mark.skipif(bool(rootfs_blockers()), reason="; ".join(rootfs_blockers()))
DOCKERFILE = """FROM python:3.13-slim-bookworm
RUN apt-get update -q && apt-get install -y -q tmux && rm -rf /var/lib/apt/lists/*
RUN useradd -m -s /bin/bash alice && touch /home/alice/note && chown alice:alice /home/alice/note
WORKDIR /app
"""


@pytest.mark.slow  # an apt-get install from the mirror (and the base, on first use)
@needs_rootfs
def test_dpkg_chowns_to_system_groups_and_useradd_works(tmp_path):
    ensure_base(*base_for("python:3.13-slim-bookworm"))
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    build = build_image(tmp_path / "Dockerfile")
    assert build.image is not None, build.unsupported
    sb = RootfsSandbox(build.image, Limits(wall_time=60, output_bytes=100_000))
    try:
        res = sb.exec(
            "stat -c '%U:%G' /var/log/apt/term.log; tmux -V; "
            "stat -c '%U:%G' /home/alice/note; su alice -c 'id -un; touch ~/mine; stat -c %U ~/mine'"
        )
        assert res.ok, res.stdout + res.stderr
        lines = res.stdout.split()
        assert lines[0] == "root:adm"
        assert lines[1] == "tmux"
        assert lines[3:] == ["alice:alice", "alice", "alice"]  # after "tmux 3.3a"
        uid = int(sb.exec("id -u alice").stdout)
    finally:
        sb.close()
    st = os.lstat(Path(build.image.lowers[0]) / "home/alice/note")
    assert st.st_uid == ID_BASE + uid  # the host sees the shifted id, never its own root
