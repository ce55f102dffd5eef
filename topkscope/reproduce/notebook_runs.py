"""Execute every notebook on the runs `topkscope figures` has just made; keep the executed
copies (figures inline) under <results>/notebooks/ with a static HTML export of each.

    distributions, contraction, selectors   once per distribution experiment (its first run)
    convergence                             once per convergence experiment
    pseudo_gradients                        once per outer-loop experiment
    selection_speed                         once per selection benchmark table

Outputs are named <notebook>-<experiment>.ipynb / .html. Each notebook runs under papermill in a
fresh kernel with the results root as its working directory and its parameters naming the run
relative to it (so nothing depends on where the command was started, and the executed copies
hold no machine's folders: they still open their runs when the results root moves); the .ipynb
is written under a temporary name and renamed, as is the HTML. A notebook that fails is
reported and the others still run. `Background` runs them on a worker thread while the
caller goes on (the figures driver: while it draws the next experiments and builds the claims).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from topkscope.io import atomic_write, write_bytes_atomic

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
PER_RUN = ("distributions", "contraction", "selectors")


@dataclass(frozen=True)
class NotebookJob:
    notebook: str          # stem under notebooks/
    label: str             # experiment name, for the output file
    parameters: dict


def relative(path: Path, results_root: Path) -> str:
    """path relative to the results root when inside it (as a notebook run there reads it)."""
    try:
        return str(Path(path).resolve().relative_to(Path(results_root).resolve()))
    except ValueError:
        return str(path)


def notebook_jobs(distribution_runs: dict[str, Path], convergence: Sequence[str],
                  bench_csvs: dict[str, Path], results_root: Path,
                  outer: Sequence[str] = ()) -> list[NotebookJob]:
    """The jobs, their paths relative to results_root (execute them there: `cwd`); outer:
    the outer-loop experiments."""
    jobs = [NotebookJob(nb, exp, {"run_dir": relative(run_dir, results_root)})
            for exp, run_dir in distribution_runs.items() for nb in PER_RUN]
    jobs += [NotebookJob("convergence", exp, {"results_root": ".", "experiment": exp})
             for exp in convergence]
    jobs += [NotebookJob("pseudo_gradients", exp, {"results_root": ".", "experiment": exp})
             for exp in outer]
    jobs += [NotebookJob("selection_speed", exp, {"bench_csv": relative(csv, results_root)})
             for exp, csv in bench_csvs.items()]
    return jobs


def execute(job: NotebookJob, out_dir: Path, notebooks_dir: Path = NOTEBOOKS_DIR,
            cwd: Path | None = None) -> tuple[Path, Path]:
    """Run one notebook with papermill; write <out_dir>/<notebook>-<label>.ipynb and .html."""
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    source = notebooks_dir / f"{job.notebook}.ipynb"
    if not source.is_file():
        raise ValueError(f"no notebook {str(source)!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{job.notebook}-{job.label}"
    # the kernel starts in cwd (nbclient's resources path); papermill's own cwd= would chdir
    # this whole process, under the claims that Background builds meanwhile
    book = papermill.execute_notebook(str(source), None, parameters=job.parameters,
                                      kernel_name="python3", progress_bar=False,
                                      resources={"metadata": {"path": str(cwd or out_dir)}})
    # papermill records where the notebook was read: the repository's name for it, not
    # this machine's folder
    book.metadata.get("papermill", {})["input_path"] = f"notebooks/{job.notebook}.ipynb"
    ipynb = atomic_write(out_dir / f"{stem}.ipynb", lambda tmp: nbformat.write(book, tmp))
    html, _ = HTMLExporter().from_notebook_node(book)
    page = write_bytes_atomic(out_dir / f"{stem}.html", html.encode())
    return ipynb, page


class Background:
    """Executes notebook jobs one at a time on a worker thread while the caller goes on (the
    figures driver hands it each experiment's notebooks as soon as that experiment is drawn,
    and builds the claims meanwhile: the notebook's kernel is a process of its own, so on two
    cores the two proceed side by side). `finish()` waits and returns (files written, one
    line per failed notebook), as execute_all does."""

    def __init__(self, out_dir: Path, log: Callable[[str], None] = print,
                 notebooks_dir: Path = NOTEBOOKS_DIR, cwd: Path | None = None) -> None:
        import queue
        import threading

        self.out_dir, self.log, self.notebooks_dir, self.cwd = out_dir, log, notebooks_dir, cwd
        self.files: list[Path] = []
        self.failures: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="notebooks", daemon=True)
        self._thread.start()

    def submit(self, jobs: Sequence[NotebookJob]) -> None:
        for job in jobs:
            self._queue.put(job)

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            files, failures = execute_all([job], self.out_dir, self.log, self.notebooks_dir,
                                          self.cwd)
            self.files += files
            self.failures += failures

    def finish(self) -> tuple[list[Path], list[str]]:
        self._queue.put(None)
        self._thread.join()
        return self.files, self.failures


def execute_all(jobs: Sequence[NotebookJob], out_dir: Path, log: Callable[[str], None] = print,
                notebooks_dir: Path = NOTEBOOKS_DIR, cwd: Path | None = None
                ) -> tuple[list[Path], list[str]]:
    """execute() each job (in cwd: the results root its paths are relative to); returns
    (files written, one line per failed notebook)."""
    written, failures = [], []
    for job in jobs:
        log(f"  notebook {job.notebook} on {job.label}")
        try:
            written += execute(job, out_dir, notebooks_dir, cwd)
        except Exception as exc:  # noqa: BLE001 - report it, run the others
            line = " ".join(str(exc).split())[:300]
            failures.append(f"notebook {job.notebook}-{job.label}: {line}")
            log(f"  FAILED {failures[-1]}")
    return written, failures
