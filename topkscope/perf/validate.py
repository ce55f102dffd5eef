"""Predicted against measured step times of real multi-process runs (benchmarks/scaling_validation.py).

Per (model, P) the model is fed:
    compute   the median over the dense run's steps of (wall step - exchange time of the last
              process to arrive): every part of a step but the exchange (forward, backward,
              the update, the wait for the slowest process's compute), measured in the dense
              run at that P and used for every method (none of it depends on the method)
    select    the selection benchmark CSV at the run's d and density (not the run's own times)
    counts    the method's own run: median over steps of the largest count over workers / k
    network   the calibration fit for that process count (benchmarks/calibrate_comm.py), with
              the layout of this repository's transport (counts, then one packed, padded
              all-gather)
and its t_step is compared with the measured median wall-clock step (the slowest process).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from topkscope.perf import model
from topkscope.perf.inputs import selection_time
from topkscope.perf.model import Input
from topkscope.perf.networks import from_calibration

STEP_COLUMNS = {"model", "workers", "method", "d", "density", "wall", "time_select",
                "time_communicate", "count_max"}
TRANSPORT_OPTIONS = model.Options(layout="packed", padded=True, algorithm="ring")


def validation_table(steps: pd.DataFrame, calibration_csv, selection: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, workers, method): measured and predicted medians and their ratio."""
    from topkscope.sparsify.base import k_from_density

    missing = STEP_COLUMNS - set(steps.columns)
    if missing:
        raise ValueError(f"step table lacks {sorted(missing)}")
    rows = []
    for (name, P), grp in steps.groupby(["model", "workers"], sort=True):
        dense = grp[grp["method"] == "dense"]
        if dense.empty:
            raise ValueError(f"{name} at P={P} has no dense run to measure compute from")
        compute = Input(float(np.median(dense["wall"] - dense["time_communicate"])),
                        f"measured here (dense run at P={P}: wall - exchange)")
        net = from_calibration(calibration_csv, workers=str(int(P)))
        for method, g in grp.groupby("method", sort=False):
            d, density = int(g["d"].iloc[0]), float(g["density"].iloc[0])
            k = k_from_density(density, d)
            sel = selection_time(selection, method, d, density)
            if sel is None:
                raise ValueError(f"the selection CSV has no {method!r} rows")
            ratio = Input(1.0 if method == "dense" else float(np.median(g["count_max"])) / k,
                          "measured (this run: largest count over workers per step)")
            pred = model.step(method, int(P), d, density, net, compute,
                              model.MethodInputs(sel, ratio), TRANSPORT_OPTIONS)
            measured = float(np.median(g["wall"]))
            rows.append({
                "model": name, "workers": int(P), "method": method, "d": d, "steps": len(g),
                "measured_step_s": measured, "predicted_step_s": pred["t_step"],
                "ratio_pred_over_meas": pred["t_step"] / measured,
                "measured_select_s": float(np.median(g["time_select"])),
                "predicted_select_s": pred["t_select"],
                "measured_comm_s": float(np.median(g["time_communicate"])),
                "predicted_comm_s": pred["t_comm"],
                "compute_s": compute.value, "count_ratio": ratio.value,
                "alpha": net.alpha, "beta": net.beta,
                "compute_source": compute.source, "select_source": sel.source,
                "comm_source": net.alpha_source, "options": TRANSPORT_OPTIONS.label(),
            })
    return pd.DataFrame(rows)
