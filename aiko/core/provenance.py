"""Where a run came from — software version, git commit, host, user — in one place: the log header and the
run's own metadata both take it from here."""

from __future__ import annotations

import getpass
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any


def software_version() -> str:
    """The installed distribution's version (what ``pip`` installed), else the package's own when run from a
    checkout that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiko-stack")
    except PackageNotFoundError:
        from aiko import __version__

        return f"{__version__}+checkout"


def source_revision() -> str:
    """The git commit of the code that runs (``+dirty`` with uncommitted changes); "" outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{commit}+dirty" if dirty else commit


def current_user() -> str:
    """The login name for the run metadata; "" where there is none (containers without a passwd entry)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError, ImportError):  # no passwd entry / no pwd module: not worth failing a run for
        return ""


def provenance() -> dict[str, Any]:
    return {
        "software_version": software_version(),
        "git_commit": source_revision(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "user": current_user(),
    }
