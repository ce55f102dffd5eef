"""train.parquet and eval.parquet: what their rows mean. The table itself (rows kept in memory,
rewritten atomically on flush, trimmed on resume) is `topkscope.io.Table`, shared with the DDP
hook's run log (so `comm` never imports `train`); the columns are `topkscope.schema`'s.

train.parquet, one row per step: loss and metric (accuracy, or perplexity for language
models) over all workers' batches; `k` = the target count per worker at the step's density;
`selected` = mean elements sent per worker, and `selected_min` / `selected_median` /
`selected_max` the same count over the P workers (0 when a worker sent nothing); times in
seconds per worker (mean over the simulated workers; rank 0's own under torchrun), where
time_communicate includes waiting for the slowest worker; bytes_sent = payload put on the wire
by all workers together (comm.sparse).
"""

from topkscope.io import Table  # noqa: F401  (the training loop imports it from here)
