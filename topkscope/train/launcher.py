"""torchrun as `topkscope run --launcher torchrun` starts it: torch's own launcher
(torch.distributed.run), with what it says itself kept in the run folder's log and what
happened to the workers handed back to the launching process (topkscope.train.failures).

    python -m topkscope.train.launcher TORCHRUN-ARGUMENTS...   (env TOPKSCOPE_RUN_DIR: the run)

- torchrun's log lines and tracebacks ("Sending process ... closing signal SIGTERM", the
  ChildFailedError summary, the SignalException traceback on Ctrl-C) go to <run>/run.log, not
  the terminal; the workers keep the terminal (progress bar, their one-line messages);
- workers that failed (a signal or an exit status) are written to <run>/.worker-failures.json;
- the exit status: 0; 1 when a worker failed; 128 + signal when torchrun was stopped by
  SIGINT/SIGTERM (which it forwards to the workers, which stop cleanly).
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import sys
import traceback
from pathlib import Path

from topkscope.train.failures import FAILURES, RUN_DIR_ENV, append_log, failures_of


def _capture_logging(stream: io.StringIO) -> None:
    """Every stderr handler of the loggers torch has set up (torch's own formatter on the
    "torch" loggers, Python's last resort for the rest) writes to stream instead."""
    handler = logging.StreamHandler(stream)
    logging.getLogger().addHandler(handler)
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for h in getattr(logger, "handlers", []):
            if isinstance(h, logging.StreamHandler) and h.stream in (sys.stderr, sys.stdout):
                h.setStream(stream)


def main(argv: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    run_dir = Path(os.environ.get(RUN_DIR_ENV, "."))
    said = io.StringIO()
    _capture_logging(said)
    code = 0
    try:
        run(parse_args(argv))
    except ChildFailedError as exc:
        if run_dir.is_dir():
            (run_dir / FAILURES).write_text(json.dumps(failures_of(exc)))
        said.write(traceback.format_exc())
        code = 1
    except SignalException as exc:
        said.write(traceback.format_exc())
        code = 128 + int(exc.sigval)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except Exception:  # noqa: BLE001 - torchrun itself failed: its traceback goes to the log
        said.write(traceback.format_exc())
        code = 1
    finally:
        if append_log(run_dir, said.getvalue()) is None and said.getvalue() and code not in (
                0, 128 + signal.SIGINT, 128 + signal.SIGTERM):
            sys.stderr.write(said.getvalue())  # no run folder to keep it in
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
