"""One function per figure: DataFrames in, matplotlib Figure out (seaborn styling, no statistics).

| function | figure | input |
|---|---|---|
| gradient_histogram | histograms of g/u in std units + fitted normal and Laplace | hist (+ stats) |
| sorted_magnitudes | sorted |u| curves (convexity of the paper's bound) | sorted-magnitude curves |
| contraction_over_iterations | delta_emp vs 1-k/d, (1-k/d)^2, Gaussian, fitted value | stats (+ fits) |
| normality_over_training | skewness, excess kurtosis (+ battery statistics) | stats (+ battery) |
| qq_plot | normal Q-Q plots at snapshot steps | Q-Q points |
| selected_over_k | approximate selectors' count / k and recall | stats |
| selection_time | selection time vs d, ratio to torch.topk | results/bench/selection.csv |
| convergence | loss and held-out metric per sparsifier and condition, mean over seeds | train + eval tables |
| accuracy_vs_elements | held-out metric vs cumulative elements communicated | eval + `elements` |
| density_sensitivity | held-out metric per density, per method, dense as reference | eval + `density` |
| gap_against_term | convergence gap to Dense vs the EF bound's term (1-q)/q^2, per method | contraction_convergence points |
| selected_per_step | selected/k per step in each method's own run, min-max over workers | train table |
| published_runs | imported GPU runs: validation accuracy per epoch, the split of an iteration | eval rows + medians |
| model_vs_measured | the step-time model against the GRACE release: throughput and speed-up over dense | topkscope.perf.grace model rows |

`save_figure(fig, out_dir, name)` writes name.png and name.pdf atomically.
"""

from topkscope.plots.contraction import contraction_over_iterations
from topkscope.plots.contraction_gap import gap_against_term
from topkscope.plots.convergence import accuracy_vs_elements, convergence, density_sensitivity
from topkscope.plots.grace import model_vs_measured
from topkscope.plots.histogram import gradient_histogram
from topkscope.plots.normality import normality_over_training
from topkscope.plots.published import published_runs
from topkscope.plots.qq import qq_plot
from topkscope.plots.selection_speed import selection_time
from topkscope.plots.selectors import selected_over_k, selected_per_step
from topkscope.plots.sorted_magnitudes import sorted_magnitudes
from topkscope.plots.style import figure_style, save_figure
from topkscope.plots.titles import describe_run, figure_title

__all__ = [
    "accuracy_vs_elements",
    "contraction_over_iterations",
    "convergence",
    "density_sensitivity",
    "describe_run",
    "figure_style",
    "figure_title",
    "gap_against_term",
    "gradient_histogram",
    "model_vs_measured",
    "normality_over_training",
    "published_runs",
    "qq_plot",
    "save_figure",
    "selected_over_k",
    "selected_per_step",
    "selection_time",
    "sorted_magnitudes",
]
