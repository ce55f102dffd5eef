"""Statistics on captured gradients: pure functions on arrays, plus loaders of result folders.

Never imports torch.distributed; never plots.
"""
