"""Covenant-72B (arXiv 2603.08163) as claims: do its published ">146x compression" and "70
seconds of communication per round" close under our payload accounting and traffic model? The
numbers and every input's grade are topkscope.perf.covenant's; here are the rows and the rule
(topkscope.claims.verdicts.closes_verdict).

    covenant_72b_compression   the ratio of d float32 values to one peer's encoded message
                               (comm.sparse), against ">146x": an exact count (error 0)
    covenant_72b_round         the round's exchange under the model (every topology of
                               perf.covenant, peers 2 to 20: assumed, no overlap), against
                               70 s, with the model's validated error for an exchange without
                               overlap (topkscope.perf.published.validated_errors)

The rows do not depend on any run: `CLAIM` is a reference claim of the registry (scope
"reference", never in a build of the user's runs), its rows written to
results/reference/published/covenant-claims.csv and answered in the README like a profile's;
each row's evidence grade is its weakest input's (the message bytes are our accounting,
modelled; the link rates and the published numbers published):

    python -m topkscope.claims.covenant     # each row's verdict and cause, one line each
"""

from __future__ import annotations

from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.claims.row import ClaimRow, frame
from topkscope.claims.verdicts import closes_verdict
from topkscope.perf import covenant as cv

MODEL = "covenant-72b"
SPARSIFIER = "chunk-topk"
NETWORK = "internet: 110 Mbit/s up, 500 Mbit/s down per peer"
RULE = ("holds if the model's value at every corner of its inputs' bands lies within its "
        "validated error e of the published number (at or above it, less e, for a published "
        "lower bound), fails if at no corner, else inconclusive (closes_verdict); "
        "e = 0 for an exact byte count, the validated error of an exchange without overlap for "
        "a time")


def _graded(grade: str) -> str:
    return ", ".join(g.name for g in cv.INPUTS.values() if g.grade == grade)


INPUTS = (f"published ({cv.PAPER}): {_graded('published')}; modelled: {_graded('modelled')}; "
          f"assumed: {_graded('assumed')}")


def _exchange_error() -> float:
    from topkscope.perf.published import error_family, validated_errors

    return validated_errors()[error_family(SPARSIFIER)]


def compression_row() -> ClaimRow:
    published = cv.value("compression")
    table = cv.compression_table()
    ours = table.iloc[0]
    ratio = float(ours["compression"])
    verdict = closes_verdict([ratio], published, 0.0, at_least=True)
    others = "; ".join(f"{r.encoding} {r.compression:.1f}x" for r in table.iloc[1:].itertuples())
    return ClaimRow(
        model=MODEL, dataset=None, dataset_substitute=None, claim="covenant_72b_compression",
        sparsifier=SPARSIFIER, section="prediction", rule=RULE, verdict=verdict,
        statement="Covenant-72B's \">146x compression\" follows from chunks of 4,096, k = 64 "
                  "and 2-bit values under our payload accounting",
        evidence=(f"one peer's message {int(ours['message_bytes']):,} bytes (k = "
                  f"{cv.selected():,} values of 2 bits, chunk-local indices of "
                  f"{int(ours['index_bits'])} bits, quantizer tables, the count) against "
                  f"{int(ours['dense_bytes']):,} bytes of float32: {ratio:.2f}x; {others}"),
        cause=(f"{ratio:.1f}x {'>=' if ratio >= published else '<'} the published "
               f"{published:g}x only with {int(ours['index_bits'])}-bit chunk-local indices "
               "and a float32 dense reference"),
        condition=f"exact byte count (comm.sparse); inputs: {INPUTS}", network="",
        inputs=INPUTS, baselines="dense float32", model_error=0.0,
        diff_mean=ratio / published, ci_low=ratio / published, ci_high=ratio / published,
        diff_unit="ours / published", n_units=1, fraction=float(verdict == "holds"),
        claim_key="covenant_72b", claim_family="published", evidence_grade="modelled",
        weakest_inputs="the message's bytes under our payload accounting (comm.sparse)")


def round_row(error: float | None = None) -> ClaimRow:
    error = _exchange_error() if error is None else error
    published = cv.value("communication_s")
    rounds = cv.round_table()
    predicted = rounds["round_s"].tolist()
    verdict = closes_verdict(predicted, published, error)
    low, high = rounds["round_s"].min(), rounds["round_s"].max()
    bound = cv.upload_bound()
    closing = cv.closing_assumptions()
    closes = "; ".join(f"{r.assumption}: {r.needed}" for r in closing.itertuples() if r.possible)
    never = "; ".join(r.assumption for r in closing.itertuples() if not r.possible)
    return ClaimRow(
        model=MODEL, dataset=None, dataset_substitute=None, claim="covenant_72b_round",
        sparsifier=SPARSIFIER, section="prediction", rule=RULE, verdict=verdict,
        reason="" if verdict in ("holds", "fails") else "input-band-too-wide",
        statement="Covenant-72B's \"70 seconds of communication per round\" is what our model "
                  "predicts for its payload at 110 Mbit/s up and 500 Mbit/s down",
        evidence=(f"one peer's message {cv.message().total:,} bytes; predicted round "
                  f"{low:.0f}-{high:.0f} s over {', '.join(cv.TOPOLOGIES)} and "
                  f"{cv.ASSUMED_PEERS[0]}-{cv.ASSUMED_PEERS[1]} peers (assumed), no overlap "
                  f"(assumed); the upload alone, at any peer count, {bound:.1f} s = "
                  f"{bound / published:.2f}x the published {published:g} s (line rate, no "
                  f"latency: lower bounds); model error +-{error:.1%}; would close: {closes}; "
                  f"would not, alone: {never}"),
        cause=(f"the peer's {cv.message().total / 1e9:.2f} GB message takes {bound:.0f} s to "
               f"upload at 110 Mbit/s, {bound / published:.2f}x the published {published:g} s, "
               f"at any peer count and topology; it closes if most of the exchange overlaps "
               f"the {cv.compute_per_round():.0f} s of compute a round has at 94.5% utilisation"),
        condition=f"prediction, not a measurement; inputs: {INPUTS}", network=NETWORK,
        inputs=INPUTS, baselines="published 70 s", model_error=error,
        diff_mean=bound / published, ci_low=low / published, ci_high=high / published,
        diff_unit="predicted / published", n_units=len(predicted),
        fraction=sum(abs(p / published - 1) <= error for p in predicted) / len(predicted),
        claim_key="covenant_72b", claim_family="published", evidence_grade="modelled",
        weakest_inputs="the message's bytes under our payload accounting; the upload time at "
                       "the link's line rate")


def rows() -> list[ClaimRow]:
    """Both rows."""
    return [compression_row(), round_row()]


REFERENCE_CSV = (__import__("pathlib").Path(__file__).resolve().parents[2] / "results"
                 / "reference" / "published" / "covenant-claims.csv")


def numbers(table) -> str:
    """'146.3× by our accounting against the published >146×; uploading one peer's 1.97 GB
    takes 143 s at 110 Mbit/s, 2.05× the published 70 s'."""
    by = table.set_index("claim")
    parts = []
    if "covenant_72b_compression" in by.index:
        r = by.loc["covenant_72b_compression"]
        parts.append(f"compression {r['diff_mean'] * cv.value('compression'):.1f}× by our "
                     f"accounting against the published >{cv.value('compression'):g}×")
    if "covenant_72b_round" in by.index:
        r = by.loc["covenant_72b_round"]
        bound = r["diff_mean"] * cv.value("communication_s")
        parts.append(f"uploading one peer's {cv.message().total / 1e9:.2f} GB alone takes "
                     f"{bound:.0f} s at 110 Mbit/s, {r['diff_mean']:.2f}× the published "
                     f"{cv.value('communication_s'):g} s")
    return "; ".join(parts)


CLAIM = Claim("covenant_72b", "Do Covenant-72B's published compression and communication "
              "time close under our traffic model?", "Covenant-72B's published numbers close "
              "under our traffic model", RULE, "prediction", "reference", rows,
              family="published",
              questions=(Question("covenant_72b", "Do the production point's numbers "
                                  "(SparseLoCo at 72B over the internet: Covenant-72B) close "
                                  "under our traffic model?", on="any", order=230),),
              show=Presentation("published", "closes under our model", numbers))
if __name__ != "__main__":  # `python -m` runs this file again after the package import
    register_claim(CLAIM)


def write(path=None) -> None:
    """Write both rows to the committed reference table (results/reference/published/
    covenant-claims.csv)."""
    from topkscope.claims.row import to_csv
    from topkscope.io import atomic_write

    atomic_write(path or REFERENCE_CSV, lambda tmp: to_csv(frame(rows()), tmp))


if __name__ == "__main__":  # pragma: no cover - writes the reference table, prints each row
    write()
    for row in frame(rows()).itertuples():
        print(f"{row.claim}: {row.verdict}: {row.cause}")
