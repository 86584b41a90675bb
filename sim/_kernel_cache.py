"""Drop a package's numba cache when any of its sources changed, so no kernel runs stale machine code.

numba's on-disk cache (`cache=True`) keys each kernel on its *own* file's timestamp and size: a kernel that calls a
kernel of another file keeps its cached machine code, with the old callee compiled in, when only the callee's file
changes (numba documents this limit: "changes to other functions called by the cached function are not detected").
A compiled step that inlines the sweep, the contact laws and the obstacles from six files would then silently run
yesterday's physics. Here: one digest of all the package's sources, stored beside the cache; when it differs, the
package's cache files are removed before any kernel is loaded, and every kernel compiles again on first use.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

log = logging.getLogger(__name__)

STAMP_NAME = "numba-sources.sha256"


def sources_digest(package_dir: Path) -> str:
    """SHA-256 over the names and contents of the package's Python sources."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def drop_stale_kernels(package_dir: Path) -> bool:
    """Remove the numba cache of `package_dir` (its __pycache__/*.nbi, *.nbc) if its sources changed since the cache
    was last stamped; True if it did. Call from the package's __init__, before any kernel is called. A cache
    directory that cannot be written is left as it is (numba then uses its user-wide cache, keyed the same way)."""
    cache_dir = package_dir / "__pycache__"
    stamp = cache_dir / STAMP_NAME
    current = sources_digest(package_dir)
    try:
        if stamp.read_text().strip() == current:
            return False
    except OSError:
        pass
    try:
        cache_dir.mkdir(exist_ok=True)
        removed = 0
        for path in list(cache_dir.glob("*.nbi")) + list(cache_dir.glob("*.nbc")):
            path.unlink(missing_ok=True)
            removed += 1
        stamp.write_text(current + "\n")
    except OSError as exc:
        log.debug("numba cache of %s left as it is: %s", package_dir, exc)
        return False
    if removed:
        log.info("sources of %s changed: %d numba cache files removed (kernels compile again)", package_dir, removed)
    return True
