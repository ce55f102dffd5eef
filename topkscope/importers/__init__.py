"""Published training runs read into standard result folders (launcher `published`).

    gaussiank_sgd   the SLURM logs of the Gaussian-k authors' training code
                    (dist_trainer.py / dl_trainer.py / distributed_optimizer.py), one run per
                    job: `topkscope import gaussiank-sgd PATH... --results RESULTS`

An imported run is a result folder like ours (manifest.json, train.parquet, eval.parquet),
found by topkscope.manifest.find_runs; what its log lacks is null, never filled in.
"""

FORMATS = ("gaussiank-sgd",)
