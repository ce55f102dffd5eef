"""Predicted scaling: a calibrated model of a TopK-SGD step (compute, selection, exchange).

    patterns   communication time of the collectives (alpha-beta model, formulas cited)
    networks   named network presets with cited constants; calibration fits as networks
    calibrate  fit alpha and beta to measured collective times
    inputs     measured compute time, selection time and counts, each with its source
    workload   the paper models' per-worker batch, a synthetic step, its FLOPs (fwd / bwd)
    published  GPU compute and a check of the model from published cluster measurements
    model      t_step = t_compute + t_select + t_communicate; predictions, crossover
    report     the tidy scaling table, its figures and the claims rows
    time_to_accuracy  predicted wall-clock to an accuracy target from the seeded convergence
               runs, its table, figure and claims rows
"""
