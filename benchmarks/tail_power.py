"""How often the tails' likelihood ratios decide, on series of known law: the power of the
test the tails claims read (topkscope.analysis.tails.tail_class on tails.per_coordinate).

For each law (Student-t with 2 and 3 degrees of freedom: power-law tails of index 2 and 3;
Gaussian and Laplace: none) and each series length T (the steps a coordinate is followed
over), --coordinates independent series of T draws (seed 0) are classified as a recorded
coordinate is: the share the power law won with a heavy index (`power_law`: at most
tails.HEAVY_INDEX) or a steep one (`steep`), an exponential or lognormal tail
won (`alternative`), neither (`undecided`), and the CPU milliseconds a coordinate took.

    .venv/bin/python benchmarks/tail_power.py [--coordinates 200] [--lengths 50,120,400]
    -> results/bench/tail_power.csv and the table on stdout
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd
from _options import benchmark_parser

from topkscope.analysis import tails

LAWS = {
    "student-t(2)": lambda rng, shape: rng.standard_t(2, shape),
    "student-t(3)": lambda rng, shape: rng.standard_t(3, shape),
    "gaussian": lambda rng, shape: rng.standard_normal(shape),
    "laplace": lambda rng, shape: rng.laplace(size=shape),
}


def shares(law: str, length: int, coordinates: int) -> dict:
    rng = np.random.default_rng(0)
    values = LAWS[law](rng, (length, coordinates))
    start = time.process_time()
    found = tails.per_coordinate(values)
    spent = time.process_time() - start
    classes = np.array([tails.tail_class(r) for r in found.to_dict("records")])
    return {"law": law, "steps": length, "coordinates": coordinates,
            "power_law": float(np.mean(classes == tails.POWER_LAW)),
            "steep": float(np.mean(classes == tails.STEEP)),
            "alternative": float(np.mean(classes == tails.ALTERNATIVE)),
            "undecided": float(np.mean(classes == tails.UNDECIDED)),
            "ms_per_coordinate": 1000.0 * spent / coordinates}


def build_parser():
    ap = benchmark_parser(__file__, __doc__, quick="40 coordinates, lengths 50 and 120")
    ap.add_argument("--coordinates", type=int, default=200, help="series per law and length")
    ap.add_argument("--lengths", default="50,120,400", help="series lengths, comma-separated")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        lengths = [int(x) for x in args.lengths.split(",")]
    except ValueError:
        print(f"error: --lengths = {args.lengths!r}; allowed: integers separated by commas",
              file=sys.stderr)
        return 2
    if args.quick:
        args.coordinates, lengths = 40, [50, 120]
    if args.coordinates < 1 or min(lengths) < 30:
        print(f"error: --coordinates = {args.coordinates} must be >= 1 and every length >= 30 "
              f"(got {lengths})", file=sys.stderr)
        return 2
    table = pd.DataFrame([shares(law, n, args.coordinates) for law in LAWS for n in lengths])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    table.to_csv(tmp, index=False)
    tmp.replace(args.out)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
