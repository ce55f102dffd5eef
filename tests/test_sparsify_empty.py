"""Rules that select nothing send nothing: no silent substitution, and the exchange copes.

A worker whose sparsifier selects nothing contributes an empty update; the mean over
workers must still equal the dense (float64) mean of what each worker sent, and the
unsent u must stay in that worker's residual. `empty_fallback="topk"` is the only way to
get the exact Top-k instead, and it is refused by methods that always select something.
"""

from __future__ import annotations

import pytest
import torch

from tests._topk_reference import exact_topk, published_gaussiank
from topkscope.comm import Layout, SimulatedTransport, WorkerCompressor, exchange
from topkscope.sparsify import available, get_sparsifier, k_from_density

D, K = 10_000, 10  # rho = 0.001


def three_steps_to_nothing() -> torch.Tensor:
    """300 of 10,000 elements at +-1, the rest 0: the published Gaussian-k threshold
    mean + z std (z = 3.29, std = 0.17) is 0.57, so 300 > 4k/3 are above it; x1.5 gives
    0.86 (still 300 above), x1.5 again gives 1.28: the third evaluation finds nothing."""
    u = torch.zeros(D)
    u[:300] = torch.tensor([1.0, -1.0]).repeat(150)
    return u


def constant_magnitude(d: int = D) -> torch.Tensor:
    """|u| constant: every threshold between mean |u| and max |u| equals that magnitude."""
    return torch.tensor([0.5, -0.5]).repeat(d // 2)


# the vector on which each method that can select nothing does so (threshold: lambda above)
EMPTY_CASES = {
    "gaussiank-2019": ({}, three_steps_to_nothing),
    "redsync": ({}, constant_magnitude),
    "redsync-2019": ({}, constant_magnitude),
    "sidco": ({}, constant_magnitude),
    "sidco-fixed": ({}, constant_magnitude),
    "tail-k": ({}, lambda: torch.zeros(D)),  # no strict threshold selects from u = 0
    "threshold": ({"threshold": 2.0}, constant_magnitude),
}


def test_every_method_that_can_select_nothing_has_a_case():
    can = sorted(n for n in available() if get_sparsifier(n).may_return_empty)
    assert can == sorted(EMPTY_CASES)


def test_published_gaussiank_three_evaluations_end_with_nothing():
    u = three_steps_to_nothing()
    chosen, evaluated = published_gaussiank(u, K)
    counts = [int((u.double().abs() > t).sum()) for t in evaluated]
    assert counts == [300, 300, 0] and chosen.size == 0  # > 4k/3, > 4k/3, nothing
    assert [b / a for a, b in zip(evaluated, evaluated[1:])] == pytest.approx([1.5, 1.5])
    assert get_sparsifier("gaussiank-2019").select(u, K).numel() == 0


@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_empty_is_sent_as_empty_unless_the_named_fallback_is_set(name):
    params, make = EMPTY_CASES[name]
    u = make()
    plain = get_sparsifier(name, **params)
    assert plain.select(u, K).numel() == 0 and plain.deviations == ()
    fallback = get_sparsifier(name, **params, empty_fallback="topk")
    got = fallback.select(u, K)
    assert sorted(got.tolist()) == sorted(exact_topk(u.double(), K).tolist())
    assert fallback.deviations == ("empty_fallback=topk",)
    assert get_sparsifier(name, **params, empty_fallback="none").deviations == ()


@pytest.mark.parametrize("name", ["topk", "gaussiank", "randk", "dgc", "dgc-sampled", "dense"])
def test_the_fallback_is_refused_where_the_rule_always_selects(name):
    with pytest.raises(ValueError, match="always selects at least one element"):
        get_sparsifier(name, empty_fallback="topk")


def test_a_bad_fallback_value_names_the_allowed_ones():
    with pytest.raises(ValueError, match="none, topk"):
        get_sparsifier("gaussiank-2019", empty_fallback="exact")


@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_two_workers_one_sending_nothing_equal_the_dense_reference(name):
    """Worker 0 selects nothing, worker 1 an ordinary set; three steps of the real exchange."""
    params, make = EMPTY_CASES[name]
    lay = Layout.of([("w", torch.zeros(D, requires_grad=True))])
    comps = [WorkerCompressor(get_sparsifier(name, **params), lay) for _ in range(2)]
    rho = K / D
    residuals = [torch.zeros(D, dtype=torch.float64) for _ in range(2)]
    references = [get_sparsifier(name, **params) for _ in range(2)]  # a stateful rule keeps its own
    gen = torch.Generator().manual_seed(3)
    for step in range(3):
        g0 = make() if step == 0 else torch.zeros(D)  # u_0 keeps its unsent first gradient
        g1 = torch.randn(D, generator=gen) * (3.0 if name == "threshold" else 1.0)
        result = exchange(SimulatedTransport(2), comps, [g0, g1], rho)
        expected = torch.zeros(D, dtype=torch.float64)
        counts = []
        for p, g in enumerate((g0, g1)):
            u = residuals[p] + g.double()
            sel = references[p].select(u.float(), k_from_density(rho, D))
            mask = torch.zeros(D, dtype=torch.bool)
            mask[sel] = True
            expected += torch.where(mask, u, 0.0)
            residuals[p] = torch.where(mask, 0.0, u)
            counts.append(int(mask.sum()))
        assert counts[0] == 0 and counts[1] > 0
        assert result.counts == counts
        torch.testing.assert_close(result.mean.double(), expected / 2, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(comps[0].feedback.residual("__global__").double(),
                                   residuals[0], rtol=0, atol=0)
