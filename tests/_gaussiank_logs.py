"""Small SLURM logs in the format of the Gaussian-k authors' training code (the .e / .o pair of
kljp/topk_results `job/`), written by the tests with numbers they know.

write_job(folder, job, ...) writes <folder>/topk.e<job> and topk.o<job>: P workers, d
parameters, `iters` loop iterations per epoch and `epochs` loop epochs, the paper's warm-up
[1/64, 0.004, 0.001] with the authors' rule max(density, S), one interval line per worker
every `every` iterations, COMP= / COMM_TOTAL= lines (COMM= for a dense run) with the values
select(it, rank) / comm(it, rank), one validation line per epoch with accuracy acc(epoch) %.
The "Time per iteration" lines follow dist_trainer.py's display rule (loop index i, 0-based,
with i % display == 0 and i > 0; display 40, or iters - 1 for a shorter loop epoch), each
0.3 + 0.01 rank + 0.001 it at the window's last iteration it. `eval_wait` seconds are added to
the COMM of every worker in the iteration after each validation (the first of the next
epoch), and spread over the "Time per iteration" of the window that holds it, as the authors'
code logs rank 0's validation.
"""

from __future__ import annotations

from pathlib import Path

SCHEDULE = [0.015625, 0.004, 0.001]
STAMP = "2022-08-12 16:45:28,224"


def select_time(it: int, rank: int, base: float = 0.1) -> float:
    return base + 0.001 * it + 0.0001 * rank


def comm_time(it: int, rank: int) -> float:
    return 0.01 + 0.0002 * it + 0.00001 * rank


def fwd(it: int, rank: int) -> float:
    return 0.005 + 0.0001 * rank


def bwd(it: int, rank: int) -> float:
    return 0.2 + 0.0002 * rank


def acc(epoch: int) -> float:
    return 50.0 + 10.0 * epoch


def k_of(density: float, d: int, epoch: int) -> int:
    rho = max(density, SCHEDULE[min(epoch, len(SCHEDULE) - 1)])
    return max(int(d * rho), 1)


def display_of(iters: int) -> int:
    """dist_trainer.py's display interval for a loop epoch of `iters` iterations."""
    return 40 if iters > 40 else iters - 1


def write_job(folder: Path, job: str, *, workers: int = 2, d: int = 1000, iters: int = 4,
              epochs: int = 3, max_epochs: int | None = None, every: int = 4,
              compressor: str = "topk", density: float = 0.001, batch: int = 32,
              dnn: str = "vgg16", lr: float = 0.1, cancelled: bool = False,
              with_times: bool = True, bad_line: str | None = None,
              select_base: float = 0.1, acc_shift: float = 0.0, eval_wait: float = 0.0,
              comm=None) -> tuple[Path, Path]:
    comm = comm_time if comm is None else comm
    folder.mkdir(parents=True, exist_ok=True)
    max_epochs = epochs if max_epochs is None else max_epochs
    ns = (f"Namespace(batch_size={batch}, compressor='{compressor}', data_dir='./data', "
          f"dataset='cifar10', density={density}, dnn='{dnn}', lr={lr}, "
          f"max_epochs={max_epochs}, nsteps_update=1, num_steps=35, nworkers={workers}, "
          f"nwpernode={workers}, pretrain=None, saved_dir='./logs/iclr', threshold=524288000)")
    e = ["/bin/bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8)"]
    for _ in range(workers):
        e.append(f"{STAMP} [dist_trainer.py:135] INFO Configurations: {ns}")
        e.append(f"{STAMP} [dl_trainer.py:254] INFO num_batches_per_epoch: {iters}")
        e.append(f"{STAMP} [distributed_optimizer.py:63] INFO _dynamic_densities: "
                 f"{SCHEDULE}")
        e.append(f"{STAMP} [distributed_optimizer.py:323] INFO # of parameters: {d}")
        e.append(f"{STAMP} [distributed_optimizer.py:325] INFO Merged Number of groups: 1")
        e.append(f"{STAMP} [dist_trainer.py:62] INFO max_epochs: {max_epochs}")
    o = ["==========================================", f"SLURM_JOB_ID = {job}",
         "SLURM_NODELIST = gpu99", "==========================================",
         "NCCL version 2.8.4+cuda11.2",
         "gpu99:1:2 [0] NCCL INFO Channel 00 : 0[1f000] -> 1[20000] via P2P/IPC"]
    dense = density >= 1.0 or compressor == "none"
    display = display_of(iters)
    window_start = 1
    for epoch in range(epochs):
        for i in range(1, iters + 1):
            it = epoch * iters + i
            waits = eval_wait if (epoch > 0 and i == 1) else 0.0
            for rank in range(workers):
                if with_times and not dense:
                    o.append(f"COMP={select_time(it, rank, select_base):.6f}")
            for rank in range(workers):
                if with_times:
                    c = comm(it, rank) + waits
                    o.append(f"COMM={c:.6f}" if dense else
                             f"COMM_TOTAL={c:.6f}, COMM_VAL={c:.6f}, COMM_ID=0.000010")
            if it % every == 0:
                for rank in range(workers):
                    e.append(f"{STAMP} [dl_trainer.py:731] WARNING [{epoch:3d}][{it:5d}/"
                             f"{iters:5d}][rank:{rank}] loss: {2.0 - 0.01 * it:.3f}, average "
                             f"forward ({fwd(it, rank):.6f}) and backward ({bwd(it, rank):.6f}) "
                             f"time: 0.300000, iotime: 0.001000 ")
            if (i - 1) % display == 0 and i > 1:
                n = it - window_start + 1
                held = sum(eval_wait for s in range(window_start, it + 1)
                           if s > iters and (s - 1) % iters == 0)
                window_start = it + 1
                e.append("dist_trainer.py:90: DeprecationWarning: The 'warn' method is "
                         "deprecated, use 'warning' instead")
                e.append("  logger.warn('Time per iteration including communication: %f, "
                         "Speed: %f images/s', time_per_iter, batch_size * nsteps_update / "
                         "time_per_iter)")
                for rank in range(workers):
                    value = 0.3 + 0.01 * rank + 0.001 * it + held / n
                    e.append(f"{STAMP} [dist_trainer.py:90] WARNING Time per iteration "
                             f"including communication: {value:.6f}, "
                             "Speed: 100.000000 images/s")
        for _ in range(workers):
            e.append(f"{STAMP} [dl_trainer.py:634] INFO train iter: {(epoch + 1) * iters}, "
                     f"num_batches_per_epoch: {iters}")
            e.append(f"{STAMP} [dl_trainer.py:635] INFO Epoch {epoch + 1}, avg train acc: "
                     f"40.0, lr: {0.01 * (epoch + 1):.6f}, avg loss: 1.5")
        e.append(f"{STAMP} [dl_trainer.py:822] INFO Epoch {epoch + 1}, lr: "
                 f"{0.01 * (epoch + 1):.6f}, val loss: 1.0, val top-1 acc: {acc(epoch) + acc_shift:.6f}, "
                 "top-5 acc: 99.0")
        if dense:
            e.append(f"{STAMP} [distributed_optimizer.py:142] INFO Average number of selected "
                     f"gradients: nan, exact k: {k_of(density, d, epoch + 1)}")
            e.append(f"{STAMP} [distributed_optimizer.py:143] INFO The number of selected "
                     "gradients: []")
        else:
            k = k_of(density, d, epoch)
            e.append(f"{STAMP} [distributed_optimizer.py:142] INFO Average number of selected "
                     f"gradients: {k:.6f}, exact k: {k_of(density, d, epoch + 1)}")
            e.append(f"{STAMP} [distributed_optimizer.py:143] INFO The number of selected "
                     f"gradients: [{', '.join([str(k)] * iters)}]")
    if bad_line is not None:
        e.insert(10, bad_line)
    if cancelled:
        o.append(f"slurmstepd: error: *** JOB {job} ON gpu99 CANCELLED AT 2022-08-04T05:11:13 "
                 "***")
    e_path, o_path = folder / f"topk.e{job}", folder / f"topk.o{job}"
    e_path.write_text("\n".join(e) + "\n")
    o_path.write_text("\n".join(o) + "\n")
    return e_path, o_path
