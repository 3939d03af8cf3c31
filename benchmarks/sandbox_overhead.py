"""Median per-exec overhead of the bwrap sandbox over a plain subprocess (issue 4 acceptance).

Times `true` and `python3 -c pass` N times each through `open_sandbox("bwrap").exec` and
through `subprocess.run(["bash", "-c", cmd])` (the same shell the sandbox uses, so the
difference is what the sandbox costs: namespaces, mounts, the rlimit wrapper, output capture).
Then the same for a container-like root over the base layer (sandbox_root.py: uid 0, the
layer's /etc, /usr/local, /root, ... bound read-write), and the cost of opening one (copying
the layer), and of opening + closing a real-root episode over a 150 MB image layer
(sandbox_rootfs.py: a copy-on-write view). Prints one line per case and ends with
`result: overhead_ms=...` for `true` in the plain sandbox.

Usage: python benchmarks/sandbox_overhead.py [--quick] [--n N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from arcforge.sandbox import open_sandbox
from arcforge.sandbox.bwrap import PATH
from arcforge.sandbox.root import build_layer
from arcforge.sandbox.rootfs import SANDBOX_UID, base_for, chown_tree, ensure_base, rootfs_blockers
from arcforge.sandbox.rootfs_sandbox import RootfsImage, RootfsSandbox
from arcforge.sandbox.types import Limits


def _median_ms(fn, n: int) -> float:
    fn()  # warm the page cache
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def rootfs_episode(n: int, layer_mb: int = 150) -> None:
    """Open + close of a real-root episode whose image layer holds `layer_mb` MB (target: at
    most 100 ms whatever the size: the view is copy-on-write, nothing is copied)."""
    if blockers := rootfs_blockers():
        print(f"real root: skipped ({'; '.join(blockers)})")
        return
    base = ensure_base(*base_for("python:3.11-slim-bookworm"))
    with tempfile.TemporaryDirectory() as tmp:
        layer = Path(tmp) / "upper"
        big = layer / "usr/share/big"
        big.mkdir(parents=True)
        for i in range(layer_mb):
            (big / f"blob{i}").write_bytes(os.urandom(1 << 20))
        chown_tree(layer, SANDBOX_UID)
        image = RootfsImage((layer, base))
        with RootfsSandbox(image, Limits()) as sb:  # the layer is really there
            assert sb.exec("ls /usr/share/big | wc -l").stdout.strip() == str(layer_mb)
            execs = _median_ms(lambda: sb.exec("true"), n)
        opened = _median_ms(lambda: RootfsSandbox(image, Limits()).close(), n)
    print(
        f"{'true'!r:20} real root (uid 0, copy-on-write view) exec {execs:7.2f} ms (median of {n})"
    )
    print(
        f"real root over a {layer_mb} MB layer: episode open + close {opened:.2f} ms "
        f"(median of {n}; target <= 100 ms)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N=10 instead of 50")
    ap.add_argument("--n", type=int, default=None, help="execs per case")
    args = ap.parse_args()
    n = args.n or (10 if args.quick else 50)
    overhead = {}
    env = {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}  # same python3 as inside
    with open_sandbox("bwrap") as sb:
        for cmd in ("true", "python3 -c pass"):
            plain = _median_ms(lambda c=cmd: subprocess.run(["/bin/bash", "-c", c], env=env), n)
            boxed = _median_ms(lambda c=cmd: sb.exec(c), n)
            overhead[cmd] = boxed - plain
            print(
                f"{cmd!r:20} subprocess {plain:7.2f} ms   bwrap {boxed:7.2f} ms   "
                f"overhead {boxed - plain:6.2f} ms   (median of {n})"
            )
    layer = build_layer(None).layer
    assert layer is not None
    opened = _median_ms(lambda: open_sandbox("bwrap", root=layer).close(), n)
    with open_sandbox("bwrap", root=layer) as sb:
        for cmd in ("true", "python3 -c pass"):
            plain = _median_ms(lambda c=cmd: subprocess.run(["/bin/bash", "-c", c], env=env), n)
            boxed = _median_ms(lambda c=cmd: sb.exec(c), n)
            print(
                f"{cmd!r:20} subprocess {plain:7.2f} ms   container root {boxed:7.2f} ms   "
                f"overhead {boxed - plain:6.2f} ms   (median of {n})"
            )
    print(f"container root: open + close {opened:.2f} ms (median of {n})")
    rootfs_episode(n)
    print(f"result: overhead_ms={overhead['true']:.2f}")


if __name__ == "__main__":
    main()
