"""What to do about each reason a task cannot run here: one remedy per kind of blocker.

`arcforge env check` prints every blocker of an unsupported task at once, each with the remedy
`remedy(reason)` finds for it, so a user fixes them in one pass rather than one per run.
"""

from __future__ import annotations

import re

# (pattern on the reason, remedy); the first match wins
REMEDIES = (
    (r"needs a GPU", "run it on a machine with a GPU runtime (docker backend), or drop the task"),
    (r"needs QEMU", "not supported: the sandbox cannot run a virtual machine"),
    (
        r"needs (services|a service|a running service)",
        "fold the service into one image and start it from the test script, or use a Docker host",
    ),
    (r"privileged container", "not supported: the sandbox never grants privileges"),
    (r"USER ", "drop the USER line: the sandbox runs every command as root"),
    (r"--from", "build the stage's output into the context and COPY it from there"),
    (
        r"exceeds this machine",
        "run it on a machine with the task's cores and memory, or raise its timeouts",
    ),
    (
        r"base image .* (not a stock|no Debian stand-in)",
        "use a python, debian or ubuntu base image (the sandbox builds it from Debian packages)",
    ),
    (
        r"apt package\(s\) not on this host",
        "install mmdebstrap so the task gets a real root (apt-get install mmdebstrap), or install "
        "the packages on the host",
    ),
    (
        r"not a writable directory|read-only file system|outside /app",
        "install mmdebstrap so the task gets a real root where every path is writable",
    ),
    (r"need root on the host", "run arcforge as root (or in a container where it is root)"),
    (r"is not installed: apt-get install (\S+)", "apt-get install {0}"),
    (r"mmdebstrap .* failed", "check the Debian mirror is reachable (apt-get update on the host)"),
    (
        r"source .* is not in the build context",
        "put the file next to the Dockerfile (remote URLs are not fetched)",
    ),
    (
        r"downloads at solve time|network access",
        "move the download into the Dockerfile (builds have a network, episodes do not)",
    ),
    (
        r"pip package\(s\) not available offline",
        "pip-install them in the Dockerfile, or install them on the host",
    ),
    (
        r"which the task does not ship|ships no tests/test.sh",
        "the task directory is incomplete: restore the test file from the task's source",
    ),
    (
        r"binary test file",
        "not supported yet: test files reach the verifier as text; make the test generate them",
    ),
    (
        r"Dockerfile (RUN|COPY|ADD|WORKDIR) .*failed",
        "run the failing line in a debian container to see why; the reason is cached: rebuild "
        "after fixing the Dockerfile",
    ),
)


def remedy(reason: str) -> str:
    """The remedy for one blocker (a generic one when none is known)."""
    for pattern, fix in REMEDIES:
        if m := re.search(pattern, reason):
            return fix.format(*m.groups())
    return "see the reason; the task runs once it is resolved"


# The blockers Docker itself could not get past on this machine, by class: a refusal that names
# none of them is a gap in arcforge, not in the machine.
BLOCKER_CLASSES = (
    ("gpu", r"needs a GPU|nvidia|cuda"),
    ("network", r"network access|downloads at solve time|needs the network|not a package registry"),
    ("services", r"needs (services|a service|a running service)|privileged container"),
    ("qemu", r"needs QEMU|KVM"),
    ("non-debian base", r"no Debian stand-in|not a stock|cannot be pulled here"),
    ("missing large file", r"large file|Git LFS|git-annex"),
    ("resources", r"exceeds this machine"),
)


def blocker_class(reason: str) -> str | None:
    """Which of BLOCKER_CLASSES a reason belongs to (None: a gap arcforge should close)."""
    for name, pattern in BLOCKER_CLASSES:
        if re.search(pattern, reason, re.I):
            return name
    return None
