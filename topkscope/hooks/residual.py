"""Is e the error-feedback residual of u for the selection I, i.e. e = u with u[I] = 0?

When it is (the usual case: e is what the worker keeps), e's statistics follow from u's and
the few selected entries (`moments.residual_sums`) instead of a pass of their own. The check
is exact: I holds no repeated index, e[I] == 0, and e == u everywhere outside I.
"""

from __future__ import annotations

import numpy as np
import torch

_MAX_SHARE = 8  # selections above d / 8 elements: a direct pass over e is as cheap


def residual_selection(u: torch.Tensor, e: torch.Tensor | None, selected: torch.Tensor | None,
                       e_given: bool) -> torch.Tensor | None:
    """selected when e is u with u[selected] = 0 and selected is duplicate-free, else None.

    e_given=False means e was derived from u and selected by the caller (no check of e).
    """
    if selected is None or e is None:
        return None
    d = u.numel()
    if selected.numel() > d // _MAX_SHARE:
        return None
    if u.device.type != "cpu":
        if torch.unique(selected).numel() != selected.numel():
            return None
        if e_given and not torch.equal(e, u.index_fill(0, selected, 0)):
            return None
        return selected
    sel = np.sort(selected.numpy())
    if sel.size > 1 and not (sel[1:] != sel[:-1]).all():
        return None
    if e_given:
        ua, ea = u.numpy(), e.numpy()
        differ = np.flatnonzero(ua != ea)  # NaN differs from itself: such e is measured directly
        if differ.size > sel.size or not (ea[sel] == 0).all():
            return None
        at = np.searchsorted(sel, differ)  # every difference must be a selected index
        if differ.size and (at[-1] >= sel.size or not (sel[at] == differ).all()):
            return None
    return selected
