"""Columns and dtypes of a result folder's per-step tables (train.parquet, eval.parquet).

One definition, shared by the training loop that writes them and the loader that reads them.
"""

TRAIN_COLUMNS = {
    "step": "int64", "epoch": "int64", "loss": "float64", "lr": "float64", "metric": "float64",
    "metric_name": "object", "density": "float64", "k": "int64", "selected": "float64",
    "selected_min": "int64", "selected_median": "float64", "selected_max": "int64",
    "time_compute": "float64", "time_select": "float64", "time_communicate": "float64",
    "bytes_sent": "int64",
}  # fmt: skip
EVAL_COLUMNS = {
    "step": "int64", "epoch": "int64", "split": "object", "loss": "float64", "metric": "float64",
    "metric_name": "object",
}  # fmt: skip
