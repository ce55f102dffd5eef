"""TopK-SGD in a PyTorch Lightning Trainer: a callback that creates the hook's state once the
process group exists and registers the hook on the DDP-wrapped model itself, on any device
(Lightning registers communication hooks on CUDA only).

    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp",
                        callbacks=[TopKCallback("results/my-exp/run1", sparsifier="topk",
                                                density=0.01, recorder={"schedule": 10})])

Needs `lightning` (`pip install topkscope[lightning]`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError as exc:  # an optional dependency
    raise ImportError("topkscope.integrations.lightning needs lightning: pip install "
                      "'topkscope[lightning]' (or pip install lightning)") from exc

from topkscope.integrations import register_topk


class TopKCallback(Callback):
    """TopK-SGD through the DDP communication hook, with the run recorded in `out_dir`.

    out_dir: the run folder (rank 0 writes the manifest and train.parquet there, every rank
    its Recorder parts); recorder: the Recorder's keyword arguments (schedule, densities,
    snapshot_schedule, ...), or None for no recorder (then only the hook's own tables);
    state_args: TopKHookState's (sparsifier, density, selection, dense_steps, seed, run_fields,
    ...). The Trainer's first optimizer is recorded in the manifest. After each step the hook
    ran, the step's loss (the training_step's), lr (the first parameter group's) and epoch are
    noted into train.parquet. The run ends `complete` with fit, or `failed` / `interrupted` with
    the exception that stopped it.
    """

    def __init__(self, out_dir: str | Path, recorder: dict[str, Any] | None = None,
                 **state_args: Any) -> None:
        super().__init__()
        self.out_dir = Path(out_dir)
        self.recorder_args = recorder
        self.state_args = state_args
        self.state = None
        self._noted = 0  # the hook's step count when the last row was noted

    def on_fit_start(self, trainer, pl_module) -> None:
        """The model is wrapped in DDP and the process group exists: register the hook."""
        from topkscope.hooks import Recorder

        rec = None
        if self.recorder_args is not None:
            rec = Recorder(self.out_dir, rank=trainer.global_rank, **self.recorder_args)
        args = {"run_dir": self.out_dir, "recorder": rec, **self.state_args}
        if trainer.optimizers and "optimizer" not in args:
            args["optimizer"] = trainer.optimizers[0]
        try:
            self.state = register_topk(trainer.strategy.model, **args)
        except BaseException as exc:
            if rec is not None:
                rec.fail(exc)
            raise
        self._noted = self.state.step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        state = self.state
        if state is None or state.step == self._noted:
            return  # the hook did not run on this batch (e.g. gradient accumulation)
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        values = {"epoch": int(trainer.current_epoch)}
        if loss is not None:
            values["loss"] = float(loss)
        if trainer.optimizers:
            values["lr"] = float(trainer.optimizers[0].param_groups[0]["lr"])
        state.note(**values)
        self._noted = state.step

    def on_fit_end(self, trainer, pl_module) -> None:
        if self.state is not None:
            self.state.close()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if self.state is not None:
            self.state.close(exception)
