"""One function per figure: DataFrames in, matplotlib Figure out (seaborn styling, no statistics).

| function | figure | input |
|---|---|---|
| gradient_histogram | histograms of g/u in std units + fitted normal and Laplace | hist (+ stats) |
| sorted_magnitudes | sorted |u| curves (convexity of the paper's bound) | sorted-magnitude curves |
| contraction_over_iterations | delta_emp vs 1-k/d, (1-k/d)^2, Gaussian value | stats |
| normality_over_training | skewness, excess kurtosis (+ battery statistics) | stats (+ battery) |
| qq_plot | normal Q-Q plots at snapshot steps | Q-Q points |
| selected_over_k | approximate selectors' count / k and recall | stats |
| selection_time | selection time vs d, ratio to torch.topk | results/bench/selection.csv |
| convergence | loss and held-out metric per sparsifier | train + eval tables |

`save_figure(fig, out_dir, name)` writes name.png and name.pdf atomically.
"""

from topkscope.plots.contraction import contraction_over_iterations
from topkscope.plots.convergence import convergence
from topkscope.plots.histogram import gradient_histogram
from topkscope.plots.normality import normality_over_training
from topkscope.plots.qq import qq_plot
from topkscope.plots.selection_speed import selection_time
from topkscope.plots.selectors import selected_over_k
from topkscope.plots.sorted_magnitudes import sorted_magnitudes
from topkscope.plots.style import figure_style, save_figure
from topkscope.plots.titles import describe_run, figure_title

__all__ = [
    "contraction_over_iterations",
    "convergence",
    "describe_run",
    "figure_style",
    "figure_title",
    "gradient_histogram",
    "normality_over_training",
    "qq_plot",
    "save_figure",
    "selected_over_k",
    "selection_time",
    "sorted_magnitudes",
]
