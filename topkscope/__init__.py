"""topkscope: an empirical suite for understanding Top-k gradient sparsification.

After Shi, Chu, Cheung, See, "Understanding Top-k Sparsification in Distributed
Deep Learning" (arXiv 1911.08772).
"""

__version__ = "0.1.0"
