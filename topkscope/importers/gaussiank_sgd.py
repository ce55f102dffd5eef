"""Training logs of the Gaussian-k authors' code as result folders: one run per SLURM job.

The logs are runs of the authors' code (hclhkbu/GaussianK-SGD) by the owner of
kljp/topk_results (Daegun Yoon: the commits' author address is the contact that
kljp/micro@0bcbdda94d1b78ab2d2a2d6f3e793da8a80f0515 README.md gives with its paper, Yoon and Oh,
arXiv 2310.00967), not by the Gaussian-k authors. The source format is that of
kljp/topk_results@4d5937cd6c81f7a3869de9d1355bbc520d72ee27 `job/`:
`topk.e<job>` (stderr: the python logging of hclhkbu/GaussianK-SGD's dist_trainer.py,
dl_trainer.py and distributed_optimizer.py) and `topk.o<job>` (stdout: the SLURM header, NCCL's
messages, and per iteration and worker `COMP=<s>` — the selection — and `COMM_TOTAL=<s>, ...`
— the sparse exchange — or `COMM=<s>` — the dense exchange). What is read, line by line:

    .e  Configurations: Namespace(...)            every logged setting (manifest `config`)
        # of parameters / num_batches_per_epoch / _dynamic_densities / max_epochs / Total
        number of tensors / Merged Number of groups            more settings (`config`)
        [e][i/n][rank:r] loss: L, average forward (F) and backward (B) time: T, iotime: IO
                                                  one train row per (interval, rank)
        Time per iteration including communication: X   (no rank: per interval, their mean)
        Epoch E, avg train acc: A, lr: LR, ...    the learning rate of the interval's epoch
        Epoch E, lr: LR, val loss: V, val top-1 acc: A, ...    one eval row (metric = A / 100)
        The number of selected gradients: [...]   per iteration of a loop epoch (one worker)
        slurmstepd: ... CANCELLED ...             the run was stopped (status interrupted)
    .o  SLURM_JOB_ID, SLURM_NODELIST, NCCL version, NCCL's transport ("via P2P/IPC")
        COMP= / COMM_TOTAL= / COMM=               per iteration: P lines, no rank

Train rows (one per logged interval and rank; `step` = the logged iteration): `loss`,
`time_forward`, `time_backward` (each the interval's mean as dl_trainer.py logs it; the
authors' selection and exchange are launched in backward hooks, so a sparse run's
`time_backward` includes its selection), `time_compute` = forward + backward as logged,
`time_io`, `time_select` and `time_communicate` (the mean of the .o lines of the interval's
iterations over all workers: they carry no rank; the iterations that follow a validation left
out, below), `time_iteration` (the mean of the "Time per iteration including communication"
lines logged since the interval's line: dist_trainer.py's mean over its own display window;
null where none was logged), `time_iteration_net` (the same net of the validation wait,
below), `selected` (the mean logged
count per iteration over the interval; the counts are one worker's), `k` (the logged count
where every iteration of the interval selected the same number; the dense exchange: d),
`density` = selected / d. `lr` from the epoch's logged summary. Null: what a log lacks
(`bytes_sent`, the per-worker spread of the counts, the metric of a train row).

`iterations.parquet` (where the .o log times every iteration): one row per iteration,
`step`, `loop_epoch`, the logged `selected` count and its `density`, the workers' mean and
largest `time_select` / `time_communicate` (`_max`: the slowest worker, whom the exchange waits
for), and `after_eval`.

Validation waits. dl_trainer.py validates on rank 0 at the start of the iteration that follows
every num_batches_per_epoch iterations (inside the timed train call); the other workers wait in
that iteration's exchange, whose logged COMM then holds the whole validation (1.1-1.4 s in the
VGG-16 jobs, against a median under 1 ms). That iteration (step = the evaluated step + 1) is
`after_eval` in iterations.parquet: kept there, left out of the train rows' interval means and
of every median and model input. dist_trainer.py's "Time per iteration" is the mean over a
display window (40 iterations of its loop, or iters_per_epoch - 1 when that is smaller; the
window runs on over loop epochs), so a window that holds an after_eval iteration carries its
wait too: `time_iteration_net` is the logged mean less, per after_eval iteration in the window,
its excess (the slowest worker's COMM there less the run's median of the slowest worker's COMM
over the other iterations) over the window's length; a window with no after_eval iteration is
as logged; one with an after_eval iteration in a log without per-iteration COMM is null. The
windows are placed from the loop's length (the logged count lists) and the authors' display
rule; a log whose number of lines does not fit that rule gets no `time_iteration_net`.

The run's epochs: dl_trainer.py's epoch (train rows' `epoch`, the eval rows) counts
num_batches_per_epoch batches, dist_trainer.py's loop — the density warm-up's epoch and
max_epochs — iters_per_epoch = the length of a logged selection list; the manifest records
both (`steps_per_epoch`: the loop's). Status: complete when the log holds max_epochs ends of
loop epochs; interrupted when SLURM cancelled the job (its line is the error); failed
otherwise (the log's last error line, or how far it got).

Density: the authors' rule is rho = max(density, S[min(epoch, len(S) - 1)]) with S the logged
_dynamic_densities (distributed_optimizer.py get_current_density), and density 1 exchanges
every gradient densely (sparsifier `dense`). A target below S's last value therefore never
trains: the manifest names it as a deviation, and `density_trained` is the density the log's
counts show at the end.
"""

from __future__ import annotations

import ast
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from topkscope.manifest import PUBLISHED

SOURCE = "kljp/topk_results@4d5937cd6c81f7a3869de9d1355bbc520d72ee27"
AUTHORS_CODE = "hclhkbu/GaussianK-SGD@0de3eeb675930d5f81515735bbdf2f30c35162e5"
EXPERIMENT = "gaussiank-sgd"
LAUNCHER = PUBLISHED  # the manifest `launcher` of an imported run (one home: topkscope.manifest)
GPU_NOT_NAMED = "not named"
ITERATIONS = "iterations.parquet"
SEED_NOT_PUBLISHED = "not published"
SPARSIFIERS = {"none": "dense", "topk": "topk", "randomk": "randk", "gaussian": "gaussiank-2019"}
TRAIN_EXTRA = ("rank", "time_forward", "time_backward", "time_io", "time_iteration",
               "time_iteration_net")
ITERATION_COLUMNS = ("step", "loop_epoch", "selected", "density", "time_select",
                     "time_select_max", "time_communicate", "time_communicate_max",
                     "after_eval")
# dist_trainer.py logs its time per iteration every DISPLAY iterations of its loop (fewer
# when a loop epoch is shorter: iters_per_epoch - 1)
DISPLAY = 40
# training-set sizes (the datasets' own definitions: CIFAR-10 has 50,000 training images,
# Krizhevsky 2009) to place the display windows of a log without count lists (a dense run):
# dist_trainer.py's loop runs samples // (P x batch x nsteps_update) iterations, checked
# against the logged num_batches_per_epoch = ceil(samples / (P x batch))
TRAIN_SAMPLES = {"cifar10": 50_000}
# the GPU where the source names it: kljp/topk_results commit d484573 ("#9 A100 results are
# added") added exactly these jobs; the A100's memory size (40 or 80 GB) is not named
GPU_NAMED_BY_SOURCE = {
    job: ("A100", "kljp/topk_results@d484573c59d0bae18911fc437bec27f54c0988cc commit message "
                  "'#9 A100 results are added' (the commit that added the job)")
    for job in ("130672", "130673", "130675")}

_JOB_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<kind>[eo])(?P<job>\d+)$")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
_INTERVAL = re.compile(
    r"\[\s*(\d+)\]\[\s*(\d+)/\s*(\d+)\]\[rank:(\d+)\] loss: (\S+), average forward \((\S+)\) "
    r"and backward \((\S+)\) time: (\S+), iotime: (\S+)")
_ITER_TIME = re.compile(r"Time per iteration including communication: (\S+), Speed: (\S+) ")
_TRAIN_EPOCH = re.compile(r"INFO Epoch (\d+), avg train acc: (\S+), lr: (\S+), avg loss: (\S+)")
_VAL_EPOCH = re.compile(r"INFO Epoch (\d+), lr: (\S+), val loss: (\S+), val top-1 acc: (\S+),")
_TRAIN_ITER = re.compile(r"INFO train iter: (\d+), num_batches_per_epoch: (\d+)")
_SETTING = re.compile(r"(\w+)=('[^']*'|\"[^\"]*\"|[^,()]+)")
_INFO_INT = {"# of parameters: ": "params", "num_batches_per_epoch: ": "num_batches_per_epoch",
             "max_epochs: ": "max_epochs", "Total number of tensors: ": "tensors",
             "Merged Number of groups: ": "merged_groups"}


class LogError(ValueError):
    """A line of a log that has the shape of a known line but cannot be read: one line
    naming the file and line number."""


@dataclass(frozen=True)
class Job:
    """One SLURM job: its stderr (.e) and stdout (.o) files."""

    job_id: str
    e_path: Path
    o_path: Path


@dataclass
class ParsedRun:
    """What one job's logs say, before anything is written."""

    job: Job
    manifest: dict
    train: dict[str, list]
    eval: dict[str, list]
    status: str
    error: str | None = None
    iterations: dict[str, list] | None = None


def find_jobs(paths: Iterable[str | Path]) -> list[Job]:
    """The jobs that PATHs name: files `<prefix>.e<job>` / `<prefix>.o<job>` or folders
    holding them (as the source's `job/`), each job's pair complete, in job order, none
    twice. ValueError (one line) for a path that does not exist, a file of another name, a
    folder without logs, or half a pair."""
    files: dict[str, dict[str, Path]] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ValueError(f"{str(path)!r} does not exist (expected a log file "
                             "<prefix>.e<job> / <prefix>.o<job> or a folder of them)")
        if path.is_dir():
            found = [p for p in sorted(path.iterdir()) if _JOB_FILE.match(p.name)]
            if not found:
                raise ValueError(f"{str(path)!r} holds no job logs (<prefix>.e<job>, "
                                 "<prefix>.o<job>)")
        else:
            if not _JOB_FILE.match(path.name):
                raise ValueError(f"{str(path)!r} is not a job log; allowed: <prefix>.e<job> "
                                 "or <prefix>.o<job> (e.g. topk.e129090)")
            found = [path]
        for p in found:
            m = _JOB_FILE.match(p.name)
            files.setdefault(m["job"], {})[m["kind"]] = p
    jobs = []
    for job_id in sorted(files, key=int):
        pair = files[job_id]
        missing = {"e", "o"} - set(pair)
        if missing:
            have = next(iter(pair.values()))
            raise ValueError(f"job {job_id}: {str(have)!r} has no .{missing.pop()}{job_id} "
                             "beside it (a job is its .e and .o pair)")
        jobs.append(Job(job_id, pair["e"], pair["o"]))
    return jobs


def _float(text: str, path: Path, lineno: int, what: str) -> float:
    try:
        return float(text.rstrip(","))
    except ValueError:
        raise LogError(f"{path}:{lineno}: cannot read {what} from {text!r}") from None


def parse_settings(text: str, path: Path, lineno: int) -> dict:
    """The Namespace(...) of a Configurations line as a dict of Python values."""
    inner = text[text.index("Namespace(") + len("Namespace("):text.rindex(")")]
    out = {}
    for key, value in _SETTING.findall(inner):
        try:
            out[key] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise LogError(f"{path}:{lineno}: cannot read setting {key}={value!r}") from None
    if not out:
        raise LogError(f"{path}:{lineno}: a Configurations line without settings")
    return out


def _stamp(line: str) -> str | None:
    m = _STAMP.match(line)
    if not m:
        return None
    when = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    return when.isoformat(timespec="seconds").replace("+00:00", "") + " (log clock)"


@dataclass
class _ELog:
    settings: dict | None = None
    info: dict = field(default_factory=dict)
    schedule: list[float] | None = None
    intervals: list[tuple] = field(default_factory=list)   # epoch, it, rank, loss, f, b, t, io
    iter_times: dict[int, list[float]] = field(default_factory=dict)  # iteration -> times
    iter_lines: list[tuple[int, float]] = field(default_factory=list)  # (since, time), in order
    train_lr: dict[int, float] = field(default_factory=dict)          # logged epoch -> lr
    evals: list[tuple] = field(default_factory=list)       # step, epoch, lr, loss, acc
    selected: list[list[int]] = field(default_factory=list)  # per loop epoch
    cancelled: str | None = None
    error: str | None = None
    first: str | None = None
    last: str | None = None


def _read_e(path: Path) -> _ELog:
    log = _ELog()
    last_iter = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if "rank:" in line and "average forward" in line:
                m = _INTERVAL.search(line)
                if m is None:
                    raise LogError(f"{path}:{lineno}: cannot read an interval line: "
                                   f"{line.strip()[:100]!r}")
                vals = [_float(v, path, lineno, "an interval's numbers") for v in m.groups()[4:]]
                log.intervals.append((int(m[1]), int(m[2]), int(m[4]), *vals))
                stamp = _stamp(line)
                log.first = log.first or stamp
                log.last = stamp or log.last
                continue
            if "Time per iteration including communication:" in line:
                if "%f" in line:
                    continue  # the source line that the DeprecationWarning quotes
                m = _ITER_TIME.search(line)
                if m is None:
                    raise LogError(f"{path}:{lineno}: cannot read a time per iteration: "
                                   f"{line.strip()[:100]!r}")
                since = log.intervals[-1][1] if log.intervals else 0
                value = _float(m[1], path, lineno, "the time per iteration")
                log.iter_times.setdefault(since, []).append(value)
                log.iter_lines.append((since, value))
                continue
            if "INFO" in line:
                _read_info(log, line, path, lineno, last_iter)
                m = _TRAIN_ITER.search(line)
                if m:
                    last_iter = int(m[1])
                continue
            if "CANCELLED" in line and "slurmstepd" in line:
                log.cancelled = line.strip()
            elif line.startswith(("Traceback", "RuntimeError", "Error", "ERROR")) or \
                    "Open RTE was unable" in line:
                log.error = log.error or line.strip()
    return log


def _read_info(log: _ELog, line: str, path: Path, lineno: int, last_iter: int) -> None:
    if "Configurations: Namespace(" in line:
        if log.settings is None:
            log.settings = parse_settings(line, path, lineno)
            log.first = log.first or _stamp(line)
        return
    if "The number of selected gradients:" in line:
        text = line.split("The number of selected gradients:", 1)[1].strip()
        body = text[1:-1] if text.startswith("[") and text.endswith("]") else None
        if body is None:
            raise LogError(f"{path}:{lineno}: a selected-gradients line without a list")
        try:
            log.selected.append([int(v) for v in body.split(",") if v.strip()])
        except ValueError:
            raise LogError(f"{path}:{lineno}: cannot read the selected counts") from None
        log.last = _stamp(line) or log.last
        return
    if "_dynamic_densities:" in line:
        text = line.split("_dynamic_densities:", 1)[1].strip()
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise LogError(f"{path}:{lineno}: cannot read _dynamic_densities {text!r}") from None
        log.schedule = None if value is None else [float(v) for v in value]
        return
    m = _VAL_EPOCH.search(line)
    if m:
        nums = [_float(v, path, lineno, "an evaluation's numbers") for v in m.groups()[1:]]
        log.evals.append((last_iter, int(m[1]), *nums))
        log.last = _stamp(line) or log.last
        return
    m = _TRAIN_EPOCH.search(line)
    if m:
        log.train_lr[int(m[1])] = _float(m[3], path, lineno, "the learning rate")
        return
    for prefix, key in _INFO_INT.items():
        if prefix in line and key not in log.info:
            text = line.split(prefix, 1)[1].strip()
            if not text.isdigit():
                raise LogError(f"{path}:{lineno}: cannot read {prefix.strip()} {text!r}")
            log.info[key] = int(text)
            return


@dataclass
class _OLog:
    header: dict = field(default_factory=dict)
    select: list[float] = field(default_factory=list)
    communicate: list[float] = field(default_factory=list)
    communicate_kind: str | None = None
    transports: set = field(default_factory=set)
    error: str | None = None


_VIA = re.compile(r" via (\S+)")


def _read_o(path: Path) -> _OLog:
    log = _OLog()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith("COMP="):
                log.select.append(_float(line[5:].strip(), path, lineno, "COMP="))
            elif line.startswith("COMM_TOTAL="):
                log.communicate.append(_float(line[11:].split(",")[0], path, lineno,
                                              "COMM_TOTAL="))
                log.communicate_kind = "COMM_TOTAL"
            elif line.startswith("COMM="):
                log.communicate.append(_float(line[5:].strip(), path, lineno, "COMM="))
                log.communicate_kind = log.communicate_kind or "COMM"
            elif line.startswith("SLURM_"):
                key, _, value = line.partition("=")
                log.header[key.strip()] = value.strip()
            elif line.startswith("NCCL version"):
                log.header["nccl_version"] = line.split("NCCL version", 1)[1].strip()
            elif " via " in line:
                m = _VIA.search(line)
                if m:
                    log.transports.add(m[1])
            elif line.startswith("slurmstepd") and "CANCELLED" in line:
                log.error = line.strip()
            elif "Open RTE was unable" in line:
                log.error = log.error or line.strip()
    return log


def _by_iteration(values: list[float], workers: int) -> np.ndarray | None:
    """The .o lines as (iterations, P): P lines an iteration, no rank; None when the count is
    not a multiple of P (the iterations cannot be told apart)."""
    if not values or workers < 1 or len(values) % workers:
        return None
    return np.asarray(values, dtype=np.float64).reshape(-1, workers)


def _per_iteration(values: list[float], workers: int) -> np.ndarray | None:
    """The mean over the P workers of each iteration's lines (None as _by_iteration)."""
    grid = _by_iteration(values, workers)
    return None if grid is None else grid.mean(axis=1)


def _window_mean(per_iter: np.ndarray | None, lo: int, hi: int,
                 keep: np.ndarray | None = None) -> float | None:
    """Mean of per_iter over iterations lo+1 .. hi (1-based), only those where `keep` is True
    (default: all); None outside what was logged or when none is kept."""
    if per_iter is None or hi <= lo or hi > per_iter.size:
        return None
    window = per_iter[lo:hi] if keep is None else per_iter[lo:hi][keep[lo:hi]]
    return float(window.mean()) if window.size else None


def after_eval_steps(eval_steps: Iterable[int], iterations: int) -> np.ndarray:
    """Mask over the 1-based steps 1..iterations: True at each step that follows a validation
    (step = an evaluated step + 1; dl_trainer.py validates on rank 0 at the start of that
    iteration, and the other workers wait for it in its exchange)."""
    mask = np.zeros(int(iterations), dtype=bool)
    for step in eval_steps:
        if 0 < int(step) < iterations:
            mask[int(step)] = True  # index step is the 1-based step + 1
    return mask


def display_windows(iters_per_epoch: int, epochs: int) -> list[tuple[int, int]]:
    """The (first, last) 1-based steps of each "Time per iteration" window of dist_trainer.py,
    in the order logged: at loop index i (0-based) with i % display == 0 and i > 0, display =
    DISPLAY, or iters_per_epoch - 1 when iters_per_epoch <= DISPLAY; a window starts after the
    previous one ends, across loop epochs. Empty when the loop is too short to log."""
    if iters_per_epoch < 2:
        return []
    display = DISPLAY if iters_per_epoch > DISPLAY else iters_per_epoch - 1
    windows, start = [], 1
    for epoch in range(int(epochs)):
        for i in range(display, iters_per_epoch, display):
            end = epoch * iters_per_epoch + i + 1
            windows.append((start, end))
            start = end + 1
    return windows


def net_iteration_times(lines: Sequence[float], workers: int, windows: Sequence[tuple],
                        after_eval: np.ndarray, comm_max: np.ndarray | None) -> list | None:
    """Each logged time per iteration net of the validation waits of its window (the module
    docstring): lines come P to a window, in window order. None when the lines do not fit the
    windows (their count is not P per window)."""
    if workers < 1 or len(lines) != workers * len(windows):
        return None
    excess = None
    if comm_max is not None and comm_max.size:
        n = min(comm_max.size, after_eval.size)
        normal = comm_max[:n][~after_eval[:n]]
        base = float(np.median(normal)) if normal.size else 0.0
        excess = np.maximum(comm_max[:n] - base, 0.0)
    out = []
    for j, value in enumerate(lines):
        first, last = windows[j // workers]
        waits = np.flatnonzero(after_eval[first - 1:last]) + first - 1
        if not waits.size:
            out.append(float(value))
        elif excess is None or waits.max() >= excess.size:
            out.append(None)
        else:
            out.append(float(value) - float(excess[waits].sum()) / (last - first + 1))
    return out


def _sparsifier(settings: dict) -> str:
    compressor = str(settings.get("compressor"))
    if float(settings.get("density", 1.0)) >= 1.0:
        return "dense"  # distributed_optimizer.py: density 1 takes the dense all-reduce
    return SPARSIFIERS.get(compressor, f"published:{compressor}")


def _effective_schedule(schedule: list[float] | None, density: float) -> list[float]:
    """The warm-up's per-epoch densities the authors' rule trains at: max(density, S[e]) for
    every entry but the last (the last is the floor applied from then on)."""
    if not schedule or density >= 1.0:
        return []
    return [max(density, s) for s in schedule[:-1]]


def parse_job(job: Job, source: str = SOURCE) -> ParsedRun:
    """Read one job's .e and .o into a manifest and the train and eval columns."""
    elog, olog = _read_e(job.e_path), _read_o(job.o_path)
    s = elog.settings or {}
    folder = job.e_path.parent.name
    files = [f"{source} {folder + '/' if folder else ''}{p.name}"
             for p in (job.e_path, job.o_path)]
    workers = int(s.get("nworkers") or 0)
    d = elog.info.get("params")
    density = float(s["density"]) if "density" in s else None
    sparsifier = _sparsifier(s) if s else None
    groups = elog.info.get("merged_groups") or 1
    per_epoch = [np.asarray(lst, dtype=np.int64) for lst in elog.selected]
    sel_iters: list[np.ndarray] = []
    for counts in per_epoch:
        if counts.size and counts.size % groups == 0:
            sel_iters.append(counts.reshape(-1, groups).sum(axis=1))
        elif counts.size:
            sel_iters = []
            break
    loop_iters = int(sel_iters[0].size) if sel_iters else None
    selected = np.concatenate(sel_iters).astype(np.float64) if sel_iters else None
    select = _per_iteration(olog.select, workers)
    communicate = _per_iteration(olog.communicate, workers)
    comm_grid = _by_iteration(olog.communicate, workers)
    loop_length = loop_iters or _loop_length(s, elog, olog, workers, len(elog.selected))
    lines = [v for _, v in elog.iter_lines]
    windows = display_windows(loop_length or 0, len(elog.selected) + 1)
    n_iters = max([0 if selected is None else selected.size, (loop_length or 0) * len(
        elog.selected)] + [v.size for v in (select, communicate) if v is not None])
    after = after_eval_steps([ev[0] for ev in elog.evals], n_iters)
    keep = ~after
    net = None
    if workers and lines and len(lines) % workers == 0 and len(lines) // workers <= len(windows):
        net = net_iteration_times(lines, workers, windows[:len(lines) // workers], after,
                                  None if comm_grid is None else comm_grid.max(axis=1))
    net_times: dict[int, list] = {}
    for (since, _), value in zip(elog.iter_lines, net or []):
        net_times.setdefault(since, []).append(value)

    train = {c: [] for c in ("step", "epoch", "rank", "loss", "lr", "metric", "metric_name",
                             "density", "k", "selected", "selected_min", "selected_median",
                             "selected_max", "time_compute", "time_select",
                             "time_communicate", "bytes_sent", "payload_bytes", "contraction",
                             "time_forward", "time_backward", "time_io", "time_iteration",
                             "time_iteration_net")}
    previous: dict[int, int] = {}
    for epoch, it, rank, loss, fwd, bwd, _trainer_time, io in elog.intervals:
        lo = previous.get(rank, 0)
        previous[rank] = it
        times = elog.iter_times.get(it)
        sent = k = dens = None
        if sparsifier == "dense" and d:
            k, dens = d, 1.0
        elif selected is not None and lo < it <= selected.size:
            window = selected[lo:it]
            sent = float(window.mean())
            k = int(window[0]) if (window == window[0]).all() else None
            dens = sent / d if d else None
        train["step"].append(it)
        train["epoch"].append(epoch)
        train["rank"].append(rank)
        train["loss"].append(loss)
        train["lr"].append(elog.train_lr.get(epoch + 1))
        train["metric"].append(None)
        train["metric_name"].append(None)
        train["density"].append(dens)
        train["k"].append(k)
        train["selected"].append(sent)
        for c in ("selected_min", "selected_median", "selected_max", "bytes_sent",
                  "payload_bytes", "contraction"):
            train[c].append(None)
        train["time_compute"].append(fwd + bwd)
        train["time_select"].append(_window_mean(select, lo, it, keep))
        train["time_communicate"].append(_window_mean(communicate, lo, it, keep))
        train["time_forward"].append(fwd)
        train["time_backward"].append(bwd)
        train["time_io"].append(io)
        train["time_iteration"].append(float(np.mean(times)) if times else None)
        nets = net_times.get(it) if times else None
        train["time_iteration_net"].append(
            float(np.mean(nets)) if nets and all(v is not None for v in nets) else None)
    evals = {"step": [], "epoch": [], "split": [], "loss": [], "metric": [], "metric_name": [],
             "lr": []}
    for step, epoch, lr, loss, acc in elog.evals:
        evals["step"].append(step)
        evals["epoch"].append(epoch)
        evals["split"].append("val")
        evals["loss"].append(loss)
        evals["metric"].append(acc / 100.0)
        evals["metric_name"].append("accuracy")
        evals["lr"].append(lr)

    max_epochs = elog.info.get("max_epochs", s.get("max_epochs"))
    loop_epochs = len(elog.selected)
    error = olog.error or elog.cancelled or elog.error
    if not s:
        status, error = "failed", error or "the log has no Configurations line (never started)"
    elif max_epochs is not None and loop_epochs >= int(max_epochs):
        status, error = "complete", None
    elif elog.cancelled or (olog.error and "CANCELLED" in olog.error):
        status = "interrupted"
    else:
        status = "failed"
        error = error or f"the log ends after {loop_epochs} of {max_epochs} epochs"
    schedule = _effective_schedule(elog.schedule, density or 1.0)
    deviations = []
    if elog.schedule and density is not None and density < elog.schedule[-1]:
        deviations.append(f"density floor {elog.schedule[-1]:g} (the authors' rule: rho = "
                          f"max(density, {elog.schedule[-1]:g}) after the warm-up)")
    trained = None
    if sparsifier == "dense":
        trained = 1.0
    elif sel_iters and d:
        trained = float(sel_iters[-1].mean()) / d
    from topkscope.train.config import DENSITY_SCHEDULES

    named = next((name for name, values in DENSITY_SCHEDULES.items()
                  if list(values) == schedule), None)
    manifest = {
        "experiment": EXPERIMENT, "run_id": job.job_id, "launcher": LAUNCHER,
        "model": s.get("dnn"), "dataset": s.get("dataset"), "dataset_substitute": None,
        "sparsifier": sparsifier, "density": density, "density_trained": trained,
        "density_schedule": named if named is not None else schedule,
        "density_schedule_values": schedule, "deviations": deviations,
        "seed": None, "seed_note": SEED_NOT_PUBLISHED, "workers": workers or None,
        "world_size": workers or None,
        "batch_per_worker": s.get("batch_size"), "steps_per_epoch": loop_iters,
        "published_compressor": s.get("compressor"),
        "config": {**s, **elog.info, "_dynamic_densities": elog.schedule},
        "epochs_reached": loop_epochs, "max_epochs": max_epochs,
        "evaluated_epochs": len(elog.evals),
        "gpu": GPU_NAMED_BY_SOURCE.get(job.job_id, (GPU_NOT_NAMED,))[0],
        "gpu_source": GPU_NAMED_BY_SOURCE.get(job.job_id, (None, None))[1],
        "node": olog.header.get("SLURM_NODELIST"),
        "slurm_job_id": olog.header.get("SLURM_JOB_ID", job.job_id),
        "nccl_version": olog.header.get("nccl_version"),
        "nccl_transport": sorted(olog.transports),
        "communicate_line": olog.communicate_kind,
        "logged_start": elog.first, "logged_end": elog.last,
        "source": {"files": files, "code": AUTHORS_CODE},
        "timing_alignment": _alignment_note(olog, workers, select, communicate),
    }
    return ParsedRun(job, manifest, train, evals, status, error,
                     _iterations(olog, workers, sel_iters, d, sparsifier, after))


def _loop_length(settings: dict, elog: _ELog, olog: _OLog, workers: int,
                 epochs: int) -> int | None:
    """dist_trainer.py's iterations per loop epoch for a log without count lists: the .o
    log's iterations over the loop epochs where they divide evenly, else from the training
    set's size (TRAIN_SAMPLES) where that agrees with the logged num_batches_per_epoch;
    None otherwise."""
    grid = _by_iteration(olog.communicate or olog.select, workers)
    if grid is not None and epochs and grid.shape[0] % epochs == 0:
        return grid.shape[0] // epochs
    samples = TRAIN_SAMPLES.get(str(settings.get("dataset")))
    batch, steps = int(settings.get("batch_size") or 0), int(settings.get("nsteps_update") or 1)
    if not samples or not workers or not batch:
        return None
    logged = elog.info.get("num_batches_per_epoch")
    if logged is not None and logged != -(-samples // (workers * batch)):
        return None
    return samples // (workers * batch * steps)


def _iterations(olog: _OLog, workers: int, sel_iters: list, d, sparsifier,
                after: np.ndarray) -> dict | None:
    """iterations.parquet: one row per iteration of the .o lines (loop epoch, the logged count
    and its density, the workers' mean and largest selection and exchange times); None
    without per-iteration lines."""
    select = _by_iteration(olog.select, workers)
    comm = _by_iteration(olog.communicate, workers)
    n = max((g.shape[0] for g in (select, comm) if g is not None), default=0)
    if not n:
        return None
    counts = np.concatenate(sel_iters).astype(np.float64) if sel_iters else None
    epochs = np.concatenate([np.full(len(c), e) for e, c in enumerate(sel_iters)]) \
        if sel_iters else None

    def col(values, i):
        return None if values is None or i >= len(values) else float(values[i])

    out = {c: [] for c in ITERATION_COLUMNS}
    for i in range(n):
        sent = col(counts, i)
        out["step"].append(i + 1)
        out["loop_epoch"].append(None if epochs is None or i >= len(epochs) else int(epochs[i]))
        out["selected"].append(sent)
        out["density"].append(1.0 if sparsifier == "dense" else
                              (sent / d if sent is not None and d else None))
        for name, grid in (("select", select), ("communicate", comm)):
            out[f"time_{name}"].append(None if grid is None or i >= grid.shape[0]
                                       else float(grid[i].mean()))
            out[f"time_{name}_max"].append(None if grid is None or i >= grid.shape[0]
                                           else float(grid[i].max()))
        out["after_eval"].append(bool(i < after.size and after[i]))
    return out


def _alignment_note(olog: _OLog, workers: int, select, communicate) -> str:
    if not olog.select and not olog.communicate:
        return "the .o log has no per-iteration times"
    bad = [name for name, lines, per in (("COMP", olog.select, select),
                                          (olog.communicate_kind, olog.communicate, communicate))
           if lines and per is None]
    if bad:
        return (f"{', '.join(bad)} lines are not a multiple of P = {workers}: their iterations "
                "cannot be told apart, the times are null")
    return (f"the .o lines carry no rank: iteration i is lines (i-1)P+1 .. iP, averaged over "
            f"the P = {workers} workers")


# ---------------------------------------------------------------- writing
def _tables(parsed: ParsedRun):
    import pyarrow as pa

    from topkscope.schema import EVAL_COLUMNS, RUN_KEYS, TRAIN_COLUMNS, run_identity

    types = {"int64": pa.int64(), "Int64": pa.int64(), "float64": pa.float64(),
             "object": pa.string()}
    identity = run_identity(EXPERIMENT, parsed.manifest)  # the manifest names both
    keys = [(k, pa.string()) for k in RUN_KEYS]
    train_fields = [(c, types[t]) for c, t in TRAIN_COLUMNS.items()]
    train_fields.insert(2, ("rank", pa.int64()))
    train_fields += [(c, pa.float64()) for c in TRAIN_EXTRA if c != "rank"]
    eval_fields = [(c, types[t]) for c, t in EVAL_COLUMNS.items()] + [("lr", pa.float64())]

    def with_identity(columns: dict[str, list]) -> dict[str, list]:
        n = len(next(iter(columns.values()), []))
        return {**{k: [identity[k]] * n for k in RUN_KEYS}, **columns}

    train = pa.table(with_identity(parsed.train), schema=pa.schema(keys + train_fields))
    evals = pa.table(with_identity(parsed.eval), schema=pa.schema(keys + eval_fields))
    iterations = None
    if parsed.iterations is not None:
        iterations = pa.table(parsed.iterations, schema=pa.schema(
            [("step", pa.int64()), ("loop_epoch", pa.int64())]
            + [(c, pa.float64()) for c in ITERATION_COLUMNS[2:-1]]
            + [("after_eval", pa.bool_())]))
    return train, evals, iterations


def write_run(parsed: ParsedRun, results: Path) -> Path:
    """The run's folder RESULTS/<experiment>/<job id>, built under a temporary name and renamed
    into place (an earlier import of the same job is replaced whole)."""
    import pyarrow.parquet as pq

    from topkscope.manifest import Manifest

    final = Path(results) / EXPERIMENT / parsed.job.job_id
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.importing-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        train, evals, iterations = _tables(parsed)
        pq.write_table(train, tmp / "train.parquet")
        pq.write_table(evals, tmp / "eval.parquet")
        if iterations is not None:
            pq.write_table(iterations, tmp / ITERATIONS)
        manifest = Manifest(tmp, **parsed.manifest)
        if parsed.status == "complete":
            manifest.complete()
        elif parsed.status == "interrupted":
            manifest._end("interrupted", error=parsed.error)
        else:
            manifest.fail(parsed.error or "failed")
        old = None
        if final.exists():
            old = final.parent / f".{final.name}.replaced-{os.getpid()}"
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def import_runs(paths: Sequence[str | Path], results: str | Path, source: str = SOURCE,
                progress: Callable[[Job], None] | None = None) -> list[Path]:
    """Every job under `paths` read first (a bad log raises before anything is written), then
    each written as a run folder under `results`; returns the folders in job order."""
    jobs = find_jobs(paths)
    parsed = []
    for job in jobs:
        parsed.append(parse_job(job, source))
        if progress is not None:
            progress(job)
    return [write_run(p, Path(results)) for p in parsed]


def column_median(frame, col: str) -> float:
    """The median of a DataFrame column's logged values (nulls left out); NaN when none is."""
    if col not in frame:
        return math.nan
    x = frame[col].astype("float64").dropna()
    return float(np.median(x)) if len(x) else math.nan


def run_summary(run) -> dict:
    """One imported run in one row: its settings, status, final validation accuracy and the
    medians of its logged times at the target density (after the warm-up), for
    results/reference/published/runs.csv: the selection and the exchange over the iterations
    of iterations.parquet that do not follow a validation (over the intervals where the log
    has no per-iteration times), forward and backward over the intervals, the time per
    iteration over the display windows, net of the validation waits."""
    m = run.manifest
    tr = run.train
    target = tr
    values = m.get("density_schedule_values") or []
    if values and "density" in tr and m.get("density_trained"):
        target = tr[np.isclose(tr["density"].astype("float64"), float(m["density_trained"]))]
    ev = run.eval
    final = float(ev["metric"].iloc[-1]) if len(ev) else math.nan

    its = None
    path = Path(run.path) / ITERATIONS
    if path.is_file() and m.get("density_trained") is not None:
        import pandas as pd

        its = pd.read_parquet(path)
        its = its[np.isclose(its["density"].astype("float64"), float(m["density_trained"]),
                             rtol=1e-3) & ~its["after_eval"].astype(bool)]

    def median(col: str) -> float:
        if its is not None and col in its and its[col].notna().any():
            return column_median(its, col)
        return column_median(target, col)

    cfg = m.get("config") or {}
    return {"job": m.get("run_id"), "model": m.get("model"), "dataset": m.get("dataset"),
            "sparsifier": m.get("sparsifier"), "compressor": m.get("published_compressor"),
            "density": m.get("density"), "density_trained": m.get("density_trained"),
            "workers": m.get("workers"), "batch_per_worker": m.get("batch_per_worker"),
            "lr": cfg.get("lr"), "params": cfg.get("params"), "node": m.get("node"),
            "gpu": m.get("gpu"), "status": m.get("status"),
            "epochs": m.get("epochs_reached"), "max_epochs": m.get("max_epochs"),
            "final_accuracy": final, "final_epoch": int(ev["epoch"].iloc[-1]) if len(ev)
            else None, "median_forward_s": median("time_forward"),
            "median_backward_s": median("time_backward"),
            "median_select_s": median("time_select"),
            "median_communicate_s": median("time_communicate"),
            "median_iteration_s": median("time_iteration_net"),
            "median_iteration_logged_s": median("time_iteration"),
            "median_select_slowest_s": median("time_select_max"),
            "intervals_target": int(len(target)),
            "source": "; ".join((m.get("source") or {}).get("files") or [])}
