"""The GRACE data release converted to tidy tables without executing it.

Source: sands-lab/grace-data@41915bbd5009c378ba3ea1cb43cf27c6db25dfa4 `GRACE_data_release.pickle`
(353,701 bytes, sha256 RELEASE_SHA256): the measurements of Xu et al., "GRACE: A Compressed
Communication Framework for Distributed Machine Learning" (ICDCS 2021), a pickled dict of six
pandas DataFrames, one per task, one row per training run (the runs' W&B summaries and what the
authors' pull_from_wandb.py parsed from each run's log).

Why not pickle.load. Loading a pickle calls whatever callables it names. Two checks stand between
the file and pandas, each enough on its own:

1. `scan` (static, nothing imported or called): every opcode of the stream walked with
   pickletools.genops over a symbolic stack and memo, so that each GLOBAL / STACK_GLOBAL / INST
   is resolved to its (module, name) and each REDUCE / NEWOBJ / NEWOBJ_EX / OBJ / INST to the
   global it calls. Refused: a global not in ALLOWED, a STACK_GLOBAL whose operands are not
   strings pushed by the stream itself, a call whose callable is not such a global (e.g. the
   result of another call), an opcode that reaches outside the stream (PERSID, BINPERSID,
   EXT1/2/4), a malformed stream, a file over MAX_BYTES.
2. `RestrictedUnpickler` (Python's documented "restricting globals" pattern, the pickle module's
   docs): its find_class returns the object of ALLOWED[(module, name)], taken from modules
   imported here by name, and raises for anything else; no module named by the file is imported.

ALLOWED holds the pandas/numpy reconstruction callables of a DataFrame and nothing that imports,
evaluates, opens or runs anything: `builtins.slice`, `numpy.dtype`, `numpy.ndarray`, numpy's
`_reconstruct` and `scalar` (under the release's `numpy.core.multiarray` and today's
`numpy._core.multiarray`), pandas' `DataFrame`, `BlockManager`, `Index`, `_new_Index`,
`RangeIndex` (the release's module paths, and `pandas.DataFrame`, `pandas.Index`,
`pandas.RangeIndex` as a current pandas names them), and
`pandas._libs.internals._unpickle_block` (the block constructor of a DataFrame pickled by a
current pandas with NumPy columns). A column of Arrow strings (a current pandas' default for
text) needs pyarrow's globals and is refused: the release has none.

fickling (PyPI) was tried as a third check and is not used: it is a heuristic, its own CLI says
its safety test "is not guaranteed correct", and on this file it reports LIKELY_UNSAFE for each
pandas and numpy import (anything outside the standard library), so it can neither admit the
release nor refuse anything the allow-list above admits.

The tables (`convert`): one row per measurement (a value the release holds for a run),

    source_row                  the row's position in its table of the release
    run_id, run_name            the run's W&B id and name as released
    task, dataset, model        the release's table (its key), the dataset and model as released
    compressor                  the release's method: none (dense SGD), topk, randomk, dgc,
                                threshold, powersgd, qsgd, terngrad, signsgd, efsignsgd, onebit,
                                8bit, natural, sketch, adaq, inceptionn, signum
    ratio                       the compression ratio (the kept fraction of Top-k, Random-k, DGC,
                                AdaQ), null where the release says n/a
    setting                     the compressor's parameter from the run name: "ratio=0.01",
                                "q=64" (QSGD's and the sketch's levels), "thres=0.001"
                                (threshold), "" for none
    error_feedback              the release's memory column: true / false (error feedback on or
                                off), null for dense SGD (n/a)
    workers                     V100 (one P100 cluster, below) GPUs, one per node
    bandwidth_gbps              1, 10 or 25 (the release's 1g / 10g / 25g), null where n/a
    mode                        throughput | upper-bound | accuracy | data-volume (below)
    collective, backend         allgather / allreduce; mpi / nccl
    gpu, cluster, rdma          v100 / p100; the release's env: mcnodes (their 8-node cluster)
                                or ibex (KAUST's shared cluster); rdma: the PyTorch table only
    optimizer, momentum, run_no, job_id   as released (job_id: the SLURM job on ibex)
    metric, value, unit         the release's column name, its value (float), its unit (UNITS;
                                throughput and data volume: all workers together, per worker)
    note                        why a value needs reading with care: a loss logged NaN; a
                                run whose name and memory tag disagree on error feedback (4
                                ImageNet AdaQ data-volume runs named `adaq_mem_...`, tagged
                                memory false: error_feedback is the tag)

What is left out, and why: a value the release gives as 'n/a', None or a float NaN (not
measured: the W&B summary lacked it); a top_1_accuracy of exactly 0 in an accuracy run of
ImageNet (2 runs): pull_from_wandb.py writes 0 when the log holds no accuracy line ("max_top1
_accuracy is set to 0"), so it is a missing value, not an accuracy. A loss the release holds as
the string 'NaN' (3 ImageNet runs whose top-1 accuracy is 0.1%, chance level) is kept, value NaN,
with a note: the run diverged.

Modes (the release's tags; their meaning read from the numbers): `throughput` runs measure the
training throughput at the given bandwidth; `upper-bound` runs are the same with the
compressor's compression and decompression taken out and its communication kept (their dense
rows equal dense throughput: VGG-19 at 8 workers 176.9 against 177.6 images/s, far below its
1-worker rate x 8 = 232; a compressor's upper bound exceeds its throughput by about its
compression's cost: Top-k 0.01 on ResNet-50 at 2 workers 726 against 416 images/s); `accuracy`
runs train to the end (on ibex, bandwidth n/a); `data-volume` runs log the bytes each worker
sends per iteration.

The provenance (provenance.json): the source repository@commit and path, the pickle's size and
sha256, the importer's version, the globals the scan found with their counts, and the sha256 of
each CSV written.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import pickle
import pickletools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

REPOSITORY = "sands-lab/grace-data"
COMMIT = "41915bbd5009c378ba3ea1cb43cf27c6db25dfa4"
PATH = "GRACE_data_release.pickle"
SOURCE = f"{REPOSITORY}@{COMMIT} {PATH}"
RELEASE_BYTES = 353_701
RELEASE_SHA256 = "32eebf93036e0c6ce295fa276216a1bd9d2fca2e881ea41da2bfa28fbcb5118e"
PAPER = ("Xu, Ho, Abdelmoniem, Dutta, Bergou, Karatsenidis, Canini, Kalnis, GRACE: A Compressed "
         "Communication Framework for Distributed Machine Learning, ICDCS 2021")
# the importer's own version: a change of what convert() writes bumps it
IMPORTER_VERSION = 1
MAX_BYTES = 64 << 20  # the release is 353,701 bytes; anything near this is not it
MEASUREMENTS = "measurements.csv"
MEASUREMENTS_PARQUET = "measurements.parquet"
PROVENANCE = "provenance.json"
COMMITTED = Path(__file__).resolve().parents[2] / "results" / "reference" / "published" / "grace"


def _allowed() -> dict[tuple[str, str], object]:
    import numpy as np
    import numpy._core.multiarray as multiarray
    from pandas._libs.internals import _unpickle_block
    from pandas.core.indexes.base import _new_Index
    from pandas.core.internals.managers import BlockManager

    return {
        ("builtins", "slice"): slice,
        ("numpy", "dtype"): np.dtype,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy.core.multiarray", "_reconstruct"): multiarray._reconstruct,
        ("numpy.core.multiarray", "scalar"): multiarray.scalar,
        ("numpy._core.multiarray", "_reconstruct"): multiarray._reconstruct,
        ("numpy._core.multiarray", "scalar"): multiarray.scalar,
        ("pandas.core.frame", "DataFrame"): pd.DataFrame,
        ("pandas.core.internals.managers", "BlockManager"): BlockManager,
        ("pandas.core.indexes.base", "Index"): pd.Index,
        ("pandas.core.indexes.base", "_new_Index"): _new_Index,
        ("pandas.core.indexes.range", "RangeIndex"): pd.RangeIndex,
        ("pandas._libs.internals", "_unpickle_block"): _unpickle_block,
        ("pandas", "DataFrame"): pd.DataFrame,
        ("pandas", "Index"): pd.Index,
        ("pandas", "RangeIndex"): pd.RangeIndex,
    }


ALLOWED: frozenset[tuple[str, str]] = frozenset({
    ("builtins", "slice"), ("numpy", "dtype"), ("numpy", "ndarray"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
    ("pandas.core.frame", "DataFrame"), ("pandas.core.internals.managers", "BlockManager"),
    ("pandas.core.indexes.base", "Index"), ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.indexes.range", "RangeIndex"), ("pandas._libs.internals", "_unpickle_block"),
    ("pandas", "DataFrame"), ("pandas", "Index"), ("pandas", "RangeIndex"),
})


class Refused(ValueError):
    """The file is not admitted: one line naming what it holds and what is allowed."""


# ------------------------------------------------------------------ the static scan
@dataclass(frozen=True)
class _Global:
    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class _Called:
    """What a call (REDUCE, NEWOBJ, ...) left on the stack: the result of calling `callee`."""

    callee: object


_MARK = object()
_UNKNOWN = object()  # a value the scan does not track (a number, a list, ...)
_STRING_OPS = {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
               "SHORT_BINUNICODE", "BINUNICODE8"}
_OUTSIDE_OPS = {"PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4"}


@dataclass
class Scan:
    """What the static pass found: globals named and calls made, each (module, name) counted."""

    globals: Counter = field(default_factory=Counter)
    calls: Counter = field(default_factory=Counter)
    opcodes: int = 0


def scan(data: bytes) -> Scan:
    """Walk the opcode stream (module docstring, check 1); Refused at the first thing that is
    not admitted. Nothing is imported or called."""
    if len(data) > MAX_BYTES:
        raise Refused(f"the file holds {len(data):,} bytes; a GRACE release pickle is "
                      f"{RELEASE_BYTES:,} (at most {MAX_BYTES:,} read)")
    found = Scan()
    stack: list = []
    memo: dict = {}

    def pop_mark() -> list:
        items = []
        while stack:
            item = stack.pop()
            if item is _MARK:
                return items[::-1]
            items.append(item)
        raise Refused("malformed pickle: a MARK is missing")

    def call(callee, opcode: str) -> None:
        if not isinstance(callee, _Global):
            raise Refused(f"{opcode} calls something that is not an allowed global (the "
                          "result of another call, or a value built by the stream)")
        found.calls[str(callee)] += 1
        stack.append(_Called(callee))

    def name_global(module, name, opcode: str) -> _Global:
        if not (isinstance(module, str) and isinstance(name, str)):
            raise Refused(f"{opcode} names a global the scan cannot read (its module and "
                          "name are not strings of the stream)")
        if (module, name) not in ALLOWED:
            raise Refused(f"the pickle names the global {module}.{name}, which is not "
                          f"allowed: {ALLOWED_TEXT}")
        found.globals[f"{module}.{name}"] += 1
        return _Global(module, name)

    try:
        for op, arg, _pos in pickletools.genops(data):
            found.opcodes += 1
            name = op.name
            if name in _OUTSIDE_OPS:
                raise Refused(f"the pickle uses {name}, which reaches outside the file "
                              "(persistent ids or the copyreg extension registry)")
            if name in _STRING_OPS:
                stack.append(arg.decode("latin-1") if isinstance(arg, bytes) else str(arg))
            elif name == "MARK":
                stack.append(_MARK)
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                stack.append(stack[-1])
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                if arg not in memo:
                    raise Refused(f"malformed pickle: {name} of memo {arg} before it is set")
                stack.append(memo[arg])
            elif name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
                stack.append(name_global(module, attr, name))
            elif name == "STACK_GLOBAL":
                attr, module = stack.pop(), stack.pop()
                stack.append(name_global(module, attr, name))
            elif name == "INST":
                module, _, attr = str(arg).partition(" ")
                pop_mark()
                call(name_global(module, attr, name), name)
            elif name == "OBJ":
                items = pop_mark()
                if not items:
                    raise Refused("malformed pickle: OBJ with nothing to call")
                call(items[0], name)
            elif name == "REDUCE":
                stack.pop()
                call(stack.pop(), name)
            elif name == "NEWOBJ":
                stack.pop()
                call(stack.pop(), name)
            elif name == "NEWOBJ_EX":
                stack.pop()
                stack.pop()
                call(stack.pop(), name)
            elif name == "BUILD":
                stack.pop()  # the state; the object stays (its __setstate__: an allowed class)
            elif name in ("PROTO", "FRAME", "STOP"):
                pass
            else:
                _generic(op, stack, pop_mark)
    except Refused:
        raise
    except (ValueError, IndexError, KeyError) as exc:
        raise Refused(f"malformed pickle: {exc}") from None
    return found


def _generic(op, stack: list, pop_mark) -> None:
    """Any other opcode, from pickletools' own description of what it pops and pushes."""
    before, after = op.stack_before, op.stack_after
    if pickletools.markobject in before:
        pop_mark()
        below = before.index(pickletools.markobject)
    else:
        below = len(before)
    kept = stack[len(stack) - below:] if below else []
    if below:
        del stack[len(stack) - below:]
    if op.name in ("APPENDS", "SETITEMS", "ADDITEMS", "APPEND", "SETITEM"):
        stack.append(kept[0])  # the container stays
        return
    stack.extend(_UNKNOWN for _ in after)


ALLOWED_TEXT = (f"only the {len(ALLOWED)} pandas/numpy globals that rebuild a DataFrame "
                "(topkscope.importers.grace.ALLOWED)")


# ------------------------------------------------------------------ the restricted load
class RestrictedUnpickler(pickle.Unpickler):
    """pickle.Unpickler whose find_class admits ALLOWED only (module docstring, check 2)."""

    def __init__(self, file) -> None:
        super().__init__(file)
        self._objects = _allowed()

    def find_class(self, module: str, name: str):
        found = self._objects.get((module, name))
        if found is None:
            raise Refused(f"the pickle names the global {module}.{name}, which is not "
                          f"allowed: {ALLOWED_TEXT}")
        return found

    def persistent_load(self, pid):
        raise Refused("the pickle uses a persistent id, which reaches outside the file")


def load(data: bytes) -> tuple[object, Scan]:
    """The unpickled object after both checks (scan first; nothing runs if it refuses)."""
    found = scan(data)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            obj = RestrictedUnpickler(io.BytesIO(data)).load()
        except Refused:
            raise
        except Exception as exc:  # a stream the scan admitted but pandas cannot rebuild
            raise Refused(f"the pickle could not be rebuilt from the allowed globals: "
                          f"{type(exc).__name__}: {exc}") from None
    return obj, found


def read_release(path: str | Path) -> tuple[dict[str, pd.DataFrame], Scan, bytes]:
    """The release's tables by task (both checks passed), the scan and the file's bytes."""
    path = Path(path)
    if not path.is_file():
        raise Refused(f"{str(path)!r} is not a file (the GRACE release: {SOURCE})")
    if path.stat().st_size > MAX_BYTES:
        raise Refused(f"{str(path)!r} holds {path.stat().st_size:,} bytes; a GRACE release "
                      f"pickle is {RELEASE_BYTES:,}")
    data = path.read_bytes()
    obj, found = load(data)
    if not (isinstance(obj, dict) and obj and all(
            isinstance(k, str) and isinstance(v, pd.DataFrame) for k, v in obj.items())):
        raise Refused(f"{str(path)!r} is a pickle of {type(obj).__name__}, not the release's "
                      "dict of DataFrames by task")
    missing = [t for t, df in obj.items() if not set(SETTINGS) <= set(df.columns)]
    if missing:
        raise Refused(f"{str(path)!r}: table(s) {missing} lack the release's setting columns "
                      f"{list(SETTINGS)}")
    return obj, found, data


# ------------------------------------------------------------------ the tidy table
# the release's setting columns, in its order
SETTINGS = ("name", "mode", "backend", "method", "ratio", "memory", "workers", "dataset", "env",
            "gpu_type", "bw", "comm_method", "model", "optimizer", "id", "run_no", "job_id")
NOT_METRICS = (*SETTINGS, "momentum", "RDMA")
# the unit of each metric column (pull_from_wandb.py says how each was read)
UNITS = {
    "step": "steps", "global_step": "steps", "epoch": "epochs", "best_epoch": "epochs",
    "runtime": "s", "total_images_per_sec": "images/s", "total_throughput": "samples/s",
    "top_1_accuracy": "fraction", "top_5_accuracy": "fraction", "hit_rate": "fraction",
    "best_hit_rate": "fraction", "ndcg": "fraction", "first_to_target": "epochs",
    "loss": "loss", "cost": "loss", "test_cost": "loss", "validation_cost": "loss",
    "perplexity": "perplexity", "test_perplexity": "perplexity",
    "validation_perplexity": "perplexity", "data_volume": "bytes/iteration/worker",
}
IOU = "IoU_Metrics/iou_score_ths_"
# the unit of each task's `throughput` (all workers together; pull_from_wandb.py reads the
# classification tasks' as the mean of the last 100 logged per-worker rates x workers, PTB's as
# the largest logged per-worker rate x workers, the others' from the W&B summary)
THROUGHPUT_UNITS = {
    "cifar10-classification": "images/s", "imagenet-classification": "images/s",
    "PTB-language_modeling": "iterations/s", "DAGM2007-segmentation": "images/s",
    "cifar10-classification-pytorch": "images/s",
}
# the metric each task's throughput is in
THROUGHPUT_METRIC = {"ml-20m-recommendation": "total_throughput"}
BANDWIDTHS = {"1g": 1.0, "10g": 10.0, "25g": 25.0}
NOT_GIVEN = ("n/a", "", None)
DIVERGED = "the release holds the string 'NaN': the loss diverged"
MEMORY_DISAGREES = ("the run name {name!r} says error feedback on, the release's memory tag "
                    "says {tag}: error_feedback is the tag")
COLUMNS = ("source_row", "run_id", "run_name", "task", "dataset", "model",
           "compressor", "ratio", "setting", "error_feedback", "workers", "bandwidth_gbps",
           "mode", "collective", "backend", "gpu", "cluster", "rdma", "optimizer", "momentum",
           "run_no", "job_id", "metric", "value", "unit", "note")


def throughput_metric(task: str) -> str:
    """The metric that holds `task`'s training throughput."""
    return THROUGHPUT_METRIC.get(task, "throughput")


def unit_of(task: str, metric: str) -> str:
    if metric == "throughput" and task in THROUGHPUT_UNITS:
        return THROUGHPUT_UNITS[task]
    if metric.startswith(IOU):
        return "fraction"
    if metric not in UNITS:
        raise Refused(f"table {task!r} has a column {metric!r} the importer has no unit for")
    return UNITS[metric]


def setting_of(run_name: str, method: str) -> tuple[str, bool | None]:
    """(the compressor's parameter, error feedback from the name) from a run name such as
    'topk_mem_ratio=0.01' or 'qsgd_q=64': ("ratio=0.01", True), ("q=64", False)."""
    parts = str(run_name).split("_")
    if parts[0] != method and not (method == "none" and run_name == "none"):
        raise Refused(f"run name {run_name!r} does not start with its method {method!r}")
    rest = parts[1:]
    memory = None
    if rest and rest[0] == "mem":
        memory, rest = True, rest[1:]
    elif method != "none":
        memory = False
    return "_".join(rest), memory


def _text(value) -> str:
    return "" if value in NOT_GIVEN or (isinstance(value, float) and math.isnan(value)) \
        else str(value)


def _number(value) -> float | None:
    """A measured value as a float; None where the release has none (n/a, None, float NaN)."""
    if value in NOT_GIVEN:
        return None
    if isinstance(value, str):
        return math.nan if value == "NaN" else float(value)
    value = float(value)
    return None if math.isnan(value) else value


def tidy(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per measurement (module docstring), in the release's order."""
    rows = []
    for task, df in tables.items():
        metrics = [c for c in df.columns if c not in NOT_METRICS]
        for position, rec in enumerate(df.to_dict("records")):
            setting, memory = setting_of(rec["name"], rec["method"])
            released = {"true": True, "false": False}.get(str(rec["memory"]))
            disagree = released is not None and memory is not None and released != memory
            ratio = _number(rec["ratio"])
            base = {
                "source_row": position, "run_id": rec["id"],
                "run_name": rec["name"], "task": task, "dataset": rec["dataset"],
                "model": rec["model"], "compressor": rec["method"], "ratio": ratio,
                "setting": setting, "error_feedback": released,
                "workers": int(rec["workers"]), "bandwidth_gbps": BANDWIDTHS.get(rec["bw"]),
                "mode": rec["mode"], "collective": rec["comm_method"],
                "backend": rec["backend"], "gpu": rec["gpu_type"], "cluster": rec["env"],
                "rdma": {"true": True, "false": False}.get(str(rec.get("RDMA"))),
                "optimizer": rec["optimizer"], "momentum": _number(rec.get("momentum")),
                "run_no": int(rec["run_no"]), "job_id": _text(rec["job_id"])}
            for metric in metrics:
                raw = rec[metric]
                if metric == "top_1_accuracy" and not isinstance(raw, str) and raw is not None \
                        and float(raw) == 0.0 and rec["mode"] == "accuracy":
                    continue  # the authors' "no accuracy in the log" marker (docstring)
                value = _number(raw)
                if value is None:
                    continue
                notes = [DIVERGED] if isinstance(raw, str) and raw == "NaN" else []
                if disagree:
                    notes.append(MEMORY_DISAGREES.format(name=rec["name"], tag=rec["memory"]))
                rows.append({**base, "metric": metric, "value": value,
                             "unit": unit_of(task, metric), "note": "; ".join(notes)})
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in ("error_feedback", "rdma"):
        out[col] = out[col].astype("boolean")
    for col in ("ratio", "bandwidth_gbps", "momentum", "value"):
        out[col] = out[col].astype("float64")
    return out


def read_measurements(path: str | Path = COMMITTED / MEASUREMENTS) -> pd.DataFrame:
    """The tidy table from its CSV (the committed one by default), with the dtypes tidy()
    gives: empty text cells read as "", booleans as the nullable boolean."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"GRACE measurements {str(path)!r} do not exist (topkscope import "
                         "grace FILE --out DIR writes them)")
    text = ["run_id", "run_name", "task", "dataset", "model", "compressor",
            "setting", "mode", "collective", "backend", "gpu", "cluster", "optimizer",
            "job_id", "metric", "unit", "note"]
    table = pd.read_csv(path, dtype={c: str for c in text}, keep_default_na=False,
                        na_values={c: [""] for c in ("ratio", "bandwidth_gbps", "momentum",
                                                     "value", "error_feedback", "rdma")})
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"{str(path)!r} is not a GRACE measurements CSV: it lacks "
                         f"{sorted(missing)}")
    for col in ("error_feedback", "rdma"):
        table[col] = table[col].map({True: True, False: False, "True": True,
                                     "False": False}).astype("boolean")
    return table[list(COLUMNS)]


def csv_bytes(table: pd.DataFrame) -> bytes:
    """The tidy table as CSV (floats as Python writes them: round-trip exact)."""
    return table.to_csv(index=False, lineterminator="\n").encode()


@dataclass(frozen=True)
class Conversion:
    """Every file `write` puts in the output folder, prepared in memory."""

    files: dict[str, bytes]
    table: pd.DataFrame
    scan: Scan
    sha256: str


def convert(path: str | Path, source: str = SOURCE) -> Conversion:
    """Read the release at `path` (both checks) and prepare the tidy CSV, its parquet and the
    provenance; nothing is written."""
    tables, found, data = read_release(path)
    table = tidy(tables)
    csv = csv_bytes(table)
    parquet = io.BytesIO()
    table.to_parquet(parquet, engine="pyarrow", index=False)
    sha = hashlib.sha256(data).hexdigest()
    from topkscope import __version__

    provenance = {
        "source": source, "paper": PAPER, "bytes": len(data), "sha256": sha,
        "matches_release": sha == RELEASE_SHA256,
        "importer": f"topkscope.importers.grace version {IMPORTER_VERSION} "
                    f"(topkscope {__version__})",
        "loaded_with": "static opcode scan, then a restricted unpickler (allowed globals only); "
                       "never pickle.load",
        "globals": dict(sorted(found.globals.items())),
        "calls": dict(sorted(found.calls.items())),
        "tables": {task: {"rows": int(len(df)), "columns": [str(c) for c in df.columns]}
                   for task, df in tables.items()},
        "measurements": int(len(table)),
        "files": {MEASUREMENTS: hashlib.sha256(csv).hexdigest()},
    }
    files = {MEASUREMENTS: csv, MEASUREMENTS_PARQUET: parquet.getvalue(),
             PROVENANCE: (json.dumps(provenance, indent=2) + "\n").encode()}
    return Conversion(files, table, found, sha)


def write(conversion: Conversion, out: str | Path) -> list[Path]:
    """Each prepared file into `out`, atomically (a reader never sees half a file)."""
    from topkscope.io import write_bytes_atomic

    out = Path(out)
    return [write_bytes_atomic(out / name, data) for name, data in conversion.files.items()]


def provenance(folder: str | Path = COMMITTED) -> dict:
    """The provenance.json of a converted folder (the committed one by default)."""
    path = Path(folder) / PROVENANCE
    if not path.is_file():
        raise ValueError(f"{str(path)!r} does not exist")
    return json.loads(path.read_text())


def short_source(prov: dict | None = None) -> str:
    """'sands-lab/grace-data@41915bb GRACE_data_release.pickle' for a row's inputs."""
    src = (prov or {}).get("source", SOURCE)
    repo_commit, _, path = src.partition(" ")
    repo, _, commit = repo_commit.partition("@")
    return f"{repo}@{commit[:7]} {path}"

