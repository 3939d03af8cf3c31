"""Hostile commands run inside the bwrap sandbox; each test asserts it was contained.

Issue 4's acceptance: no loopback access to the host, no writes outside the workspace, no
reading the host home, no seeing or signalling host processes, no background process past
close(), fork bomb / memory hog / infinite loop / 1 GB print stopped within their limits while
the host stays responsive, and exact restore. Nothing is mocked: every command really runs.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

from arcforge.sandbox import Limits

REPO = Path(__file__).resolve().parents[2]


def _host_pids_matching(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry))
    return pids


def test_host_loopback_server_unreachable(bwrap_box):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    sb = bwrap_box()
    res = sb.exec(
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\"; "
        f"echo probe > /dev/tcp/127.0.0.1/{port} && echo CONNECTED"
    )
    srv.setblocking(False)
    try:
        srv.accept()
        reached = True
    except BlockingIOError:
        reached = False  # nothing is queued: the host server never saw a connection
    finally:
        srv.close()
    assert "ConnectionRefusedError" in res.stderr, res.stderr
    assert "CONNECTED" not in res.stdout and not reached


def test_writes_outside_workspace_fail(bwrap_box, tmp_path):
    sb = bwrap_box()
    probe = f"arcforge_probe_{os.getpid()}"
    targets = ["/usr", "/etc", "/", str(REPO), str(tmp_path), "/grading"]
    cmd = "; ".join(f"echo x > {t}/{probe} && echo WROTE {t}" for t in targets)
    res = sb.exec(cmd + f"; echo x > /tmp/{probe} && echo TMP_OK; echo x > {probe} && echo WS_OK")
    assert "WROTE" not in res.stdout, res.stdout
    assert "TMP_OK" in res.stdout and "WS_OK" in res.stdout  # only private places are writable
    for t in [*targets, "/tmp"]:
        assert not os.path.exists(f"{t}/{probe}")  # nothing landed on the host
    assert sb.exec(f"ls {REPO}").exit_code != 0  # the project checkout is not even visible


def test_host_home_secret_unreadable(bwrap_box):
    secret = Path.home() / ".arcforge_test_secret"
    secret.write_text("TOP-SECRET-42")
    try:
        sb = bwrap_box()
        res = sb.exec(f"cat {secret}; cat ~/.arcforge_test_secret; ls -a {Path.home()}; ls /home")
        assert "TOP-SECRET-42" not in res.stdout + res.stderr
        assert res.exit_code != 0
    finally:
        secret.unlink()


def test_host_processes_invisible_and_unsignalable(bwrap_box):
    victim = subprocess.Popen(["sleep", "30"])
    try:
        sb = bwrap_box()
        ps = sb.exec("cat /proc/[0-9]*/comm")  # /proc, not ps: procps may be absent
        assert ps.exit_code == 0
        assert len(ps.stdout.splitlines()) <= 3, ps.stdout  # bwrap's init, bash/cat
        assert "pytest" not in ps.stdout and "python" not in ps.stdout and "sleep" not in ps.stdout
        res = sb.exec(f"kill -9 {os.getpid()} {victim.pid}; kill -TERM -1; echo done")
        assert "done" in res.stdout
        assert victim.poll() is None  # the host process survived
    finally:
        victim.kill()
        victim.wait()


def test_background_process_does_not_survive(bwrap_box):
    marker = "98765"
    sb = bwrap_box()
    t = time.monotonic()
    res = sb.exec(
        f"nohup setsid sleep {marker} >/dev/null 2>&1 & (sleep {marker}1 &) ; echo started"
    )
    assert res.stdout.strip() == "started" and time.monotonic() - t < 5
    time.sleep(0.2)
    assert _host_pids_matching(f"sleep\0{marker}") == []  # gone when the exec returned
    sb.close()
    assert _host_pids_matching(f"sleep\0{marker}") == []


def test_fork_bomb_is_capped_and_host_stays_responsive(bwrap_box, host_latency):
    sb = bwrap_box(Limits(wall_time=3, max_processes=32))
    count = sb.exec(
        "python3 -c 'import os, time\nn = 0\nfor _ in range(300):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    n += 1\nprint(n)'"
    )
    assert 20 <= int(count.stdout) <= 31, count  # python + 31 children = the 32 allowed
    with host_latency() as lat:
        res = sb.exec(":(){ :|:& };: ; sleep 30")
    assert res.timed_out and res.duration < 6, res
    assert lat.worst < 3.0, lat.samples


def test_memory_hog_is_stopped(bwrap_box, host_latency):
    sb = bwrap_box(Limits(memory_mb=512))
    with host_latency() as lat:
        big = sb.exec("python3 -c 'b = bytearray(4 * 1024**3)'")
        creep = sb.exec("python3 -c 'x = []\nwhile True: x.append(bytearray(32 << 20))'")
    for res in (big, creep):
        assert res.exit_code != 0 and "MemoryError" in res.stderr, res
        assert res.duration < 10
    assert lat.worst < 3.0


def test_infinite_loop_stopped_by_cpu_and_wall_limits(bwrap_box):
    sb = bwrap_box(Limits(cpu_seconds=1, wall_time=8))
    res = sb.exec("while :; do :; done")
    assert res.exit_code == 128 + signal.SIGXCPU and not res.timed_out, res
    assert res.duration < 8
    res = sb.exec("sleep 100", timeout=1)  # no CPU used: only the wall clock catches it
    assert res.timed_out and res.exit_code == 128 + signal.SIGKILL and res.duration < 3


def test_printing_1gb_is_truncated_while_streaming(bwrap_box, host_latency):
    sb = bwrap_box(Limits(output_bytes=1_000_000))
    with host_latency() as lat:
        res = sb.exec("head -c 1000000000 /dev/zero | tr '\\0' x")
    assert res.truncated and res.duration < 10, res.duration
    assert res.stdout.startswith("x" * 1000) and "output truncated" in res.stdout
    assert len(res.stdout) < 1_000_100
    assert lat.worst < 3.0


def test_huge_file_is_stopped_by_file_size_limit(bwrap_box):
    sb = bwrap_box(Limits(file_size_mb=10))
    res = sb.exec("head -c 50000000 /dev/zero > big; stat -c %s big")
    assert res.stdout.strip() == str(10 << 20)


def test_restore_brings_back_exact_snapshot(bwrap_box, tmp_path):
    (tmp_path / "keep.txt").write_text("original\n")
    (tmp_path / "gone.txt").write_text("will be deleted\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho run\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.txt").write_text("deep\n")
    sb = bwrap_box(workspace=tmp_path)
    sb.exec("ln -s keep.txt link")
    sid = sb.snapshot()
    before = sb.exec("find . -printf '%p %m %s %l\\n' | sort; md5sum $(find . -type f | sort)")
    sb.exec(
        "echo changed > keep.txt; rm gone.txt; chmod 600 run.sh; rm -r sub; "
        "echo new > added.txt; mkdir newdir; rm link; ln -s added.txt link; chmod 700 ."
    )
    sb.restore(sid)
    after = sb.exec("find . -printf '%p %m %s %l\\n' | sort; md5sum $(find . -type f | sort)")
    assert before.exit_code == 0 and after.stdout == before.stdout
    assert stat.S_IMODE(os.stat(tmp_path / "run.sh").st_mode) == 0o755  # host dir untouched
    assert sb.exec("./run.sh && echo more >> keep.txt").stdout == "run\n"  # still writable
    sb.restore()  # no id: the latest snapshot
    assert sb.read_file("keep.txt") == "original\n"


def test_limits_cannot_be_raised_from_inside(bwrap_box):
    sb = bwrap_box()
    for opt in ("-u", "-v", "-t", "-f"):
        res = sb.exec(f"ulimit -H {opt} unlimited && echo RAISED")
        assert "RAISED" not in res.stdout and res.exit_code != 0, (opt, res)
    caps = sb.exec("grep CapEff /proc/self/status; unshare -U true && echo NESTED")
    assert "0000000000000000" in caps.stdout and "NESTED" not in caps.stdout
