"""Covenant-72B (Lidin et al., arXiv 2603.08163) under our traffic model: its compression ratio
from its chunks, k and bits, and its per-round communication time from that payload and its
peers' links, against the published ">146x compression" and "70 seconds of communication per
round". The numbers only; topkscope.claims.covenant judges them.

Every input is graded (INPUTS): `published` (the paper: the numbers as quoted in this
project's issue 45 from arXiv 2603.08163, cited "arXiv 2603.08163 as quoted"; the paper's own
tables were not read here), `modelled` (our accounting or our model) or `assumed` (a value
nobody stated). The payload is comm.sparse's accounting of one peer's message, reused as the
compressor counts it (comm.compressor.Compressor.wire_format):

    k          = rho d, rho = k_c / C = 64 / 4096     (bounds.k_from_density)
    values     ceil(k b_v / 8)                        b_v = 2 bits (published)
    indices    ceil(k b_i / 8)                        b_i = ceil(log2 C) = 12 bits, chunk-local
                                                      (ChunkTopK.local_index_bits: modelled)
    side       tensors x (1 + 2^b_v) x 4 bytes        a shift and a 2^b table per tensor
                                                      (Quantizer.table_bytes; tensors assumed)
    count      8 bytes                                comm.sparse.COUNT_BYTES

    compression = dense / sparse, dense = d float32 values (comm.sparse.dense_payload)

The round's exchange (alpha = 0: latency is not modelled, so every time is a lower bound; the
links at their quoted rates, line rate, again a lower bound), S = one peer's message, R peers:

    relay, serial        S / up + (R - 1) S / down    (topkscope.perf.patterns.relay_allgather:
    relay, concurrent    max(S / up, (R - 1) S / down)   put once, fetch every other's)
    ring all-gather      (R - 1) S / up               (topkscope.perf.outer.exchange_time, the
                                                      model's outer-loop exchange)
    ring all-reduce      2 (R - 1) / R S / up         (reduce-scatter + all-gather of S bytes; a
                                                      lower bound: summed sparse shards grow)

No topology sends less than the peer's own message up once, S / up, whatever R: that bound
alone is compared when the peer count is unknown. The compute of a round follows from the
published utilisation u and communication c: t_compute = c u / (1 - u).

`closing_assumptions()` says, one assumption at a time (the others as published), what value
would make the predicted round take the published 70 s, and whether such a value exists.

    python -m topkscope.perf.covenant     # prints the tables docs/scaling.md shows
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from topkscope.bounds import k_from_density
from topkscope.comm.sparse import Payload, WireFormat, dense_payload, sparse_payload
from topkscope.perf import patterns
from topkscope.perf.model import Input
from topkscope.perf.networks import Network
from topkscope.perf.outer import OuterMethod, exchange_time

PAPER = "arXiv 2603.08163 as quoted"  # the numbers as issue 45 quotes them; tables not read
GRADES = ("measured", "published", "modelled", "assumed")
MBIT = 1e6  # bits per second in one Mbit/s


@dataclass(frozen=True)
class Graded:
    """One input: its value and unit, its grade (GRADES) and where it comes from."""

    name: str
    value: float
    unit: str
    grade: str
    source: str

    def __post_init__(self) -> None:
        if self.grade not in GRADES:
            raise ValueError(f"{self.name}: grade = {self.grade!r}; allowed: {', '.join(GRADES)}")


def _published(name: str, value: float, unit: str, quoted: str) -> Graded:
    return Graded(name, value, unit, "published", f"{PAPER}: {quoted}")


# a LLaMA-style 80-layer model: per layer q, k, v, o, gate, up, down and two norms, plus the
# embedding, the final norm and the output head; the quantizer keeps one table per tensor
ASSUMED_TENSORS = 80 * 9 + 3
ASSUMED_PEERS = (2, 20)  # the fewest an exchange has; an illustrative count nobody stated

INPUTS: dict[str, Graded] = {g.name: g for g in (
    _published("parameters", 72e9, "parameters", "SparseLoCo at 72B parameters"),
    _published("chunk", 4096, "elements", "chunks of 4,096"),
    _published("k_per_chunk", 64, "values", "k = 64"),
    _published("value_bits", 2, "bits", "2-bit values"),
    _published("error_decay", 0.95, "", "error-feedback decay 0.95"),
    _published("inner_steps", 30, "steps", "30 inner steps"),
    _published("compression", 146, "x", "\">146x compression\" (a lower bound)"),
    _published("communication_s", 70, "s", "\"70 seconds of communication per round\""),
    _published("up_mbit", 110, "Mbit/s", "peers with 110 Mbps up"),
    _published("down_mbit", 500, "Mbit/s", "500 Mbps down"),
    _published("utilisation", 0.945, "", "94.5% compute utilisation"),
    Graded("index_bits", 12, "bits", "modelled",
           "chunk-local indices of ceil(log2 C) bits (topkscope.sparsify.chunk_topk "
           "ChunkTopK.local_index_bits; counts per chunk fixed, so the receiver knows them)"),
    Graded("dense_value_bytes", 4, "bytes", "modelled",
           "the dense reference: d float32 values (comm.sparse.dense_payload)"),
    Graded("tensors", ASSUMED_TENSORS, "tensors", "assumed",
           "80 LLaMA-style layers of 9 tensors, the embedding, the final norm and the head: "
           "one quantizer table each (the quoted numbers give no tensor list)"),
    Graded("peers", ASSUMED_PEERS[1], "peers", "assumed",
           f"nobody stated the peers of a round; {ASSUMED_PEERS[0]} (the fewest an exchange "
           f"has) to {ASSUMED_PEERS[1]} are evaluated"),
    Graded("overlap", 0.0, "", "assumed",
           "none: the exchange follows the H inner steps (SparseLoCo's loop, "
           "topkscope.perf.outer)"),
)}


def value(name: str, inputs: dict[str, Graded] | None = None) -> float:
    return (inputs or INPUTS)[name].value


def selected(inputs: dict[str, Graded] | None = None) -> int:
    """k of one peer's message: rho d with rho = k_c / C (bounds.k_from_density)."""
    d = int(value("parameters", inputs))
    return k_from_density(value("k_per_chunk", inputs) / value("chunk", inputs), d)


def wire_format(inputs: dict[str, Graded] | None = None, index_bits: int | None = None,
                value_bits: int | None = None) -> WireFormat:
    """One peer's encoding: b_v bits per value, b_i per index (default the chunk-local
    ceil(log2 C), from topkscope.sparsify's chunk-topk), the quantizer's tables per tensor."""
    from topkscope.sparsify import get_sparsifier
    from topkscope.sparsify.quantize import Quantizer

    bits = int(value("value_bits", inputs) if value_bits is None else value_bits)
    local = get_sparsifier("chunk-topk", chunk_size=int(value("chunk", inputs)))
    index = local.local_index_bits(int(value("parameters", inputs))) if index_bits is None \
        else int(index_bits)
    return WireFormat(bits, index, Quantizer(bits).table_bytes(int(value("tensors", inputs))))


def message(inputs: dict[str, Graded] | None = None, **encoding) -> Payload:
    """One peer's message (comm.sparse.sparse_payload of one worker's k values)."""
    return sparse_payload([selected(inputs)], wire_format(inputs, **encoding))


def dense(inputs: dict[str, Graded] | None = None, value_bytes: int | None = None) -> Payload:
    """The dense pseudo-gradient one peer would send (comm.sparse.dense_payload)."""
    b = int(value("dense_value_bytes", inputs) if value_bytes is None else value_bytes)
    return dense_payload(1, int(value("parameters", inputs)), b)


def compression(inputs: dict[str, Graded] | None = None, **encoding) -> float:
    """Dense bytes over the message's wire bytes (counts, tables and padding included)."""
    return dense(inputs).total / message(inputs, **encoding).total


def compression_table(inputs: dict[str, Graded] | None = None) -> pd.DataFrame:
    """The ratio under each encoding: ours (chunk-local indices), global int64 indices
    (comm.sparse.index_dtype at d >= 2^31), 16-bit indices, and a bf16 dense reference."""
    from topkscope.comm.sparse import index_dtype

    d = int(value("parameters", inputs))
    global_bits = 8 * index_dtype(d).itemsize
    rows = [("chunk-local indices (ours)", {}, None),
            (f"global int{global_bits} indices", {"index_bits": global_bits}, None),
            ("16-bit indices", {"index_bits": 16}, None),
            ("chunk-local indices, bf16 dense reference", {}, 2)]
    out = []
    for name, encoding, dense_bytes in rows:
        sent = message(inputs, **encoding)
        ref = dense(inputs, dense_bytes)
        fmt = wire_format(inputs, **encoding)
        out.append({"encoding": name, "value_bits": fmt.value_bits, "index_bits": fmt.index_bits,
                    "message_bytes": sent.total, "dense_bytes": ref.total,
                    "compression": ref.total / sent.total})
    return pd.DataFrame(out)


# ------------------------------------------------------------------ the round's communication
def links(inputs: dict[str, Graded] | None = None, scale: float = 1.0) -> tuple[float, float]:
    """(beta_up, beta_down) in seconds per byte at the quoted rates (x scale)."""
    up, down = value("up_mbit", inputs) * scale, value("down_mbit", inputs) * scale
    return 8.0 / (up * MBIT), 8.0 / (down * MBIT)


def uplink(inputs: dict[str, Graded] | None = None) -> Network:
    """The peer's uplink as a network of topkscope.perf.networks (alpha not modelled)."""
    beta_up, _ = links(inputs)
    rate = f"{value('up_mbit', inputs):g} Mbit/s up ({PAPER})"
    return Network("covenant-up", 0.0, beta_up, "not modelled (0: a lower bound)", rate)


def outer_method(inputs: dict[str, Graded] | None = None) -> OuterMethod:
    """The round's exchange as topkscope.perf.outer sees it: k values of b_v bits and
    chunk-local indices, the quantizer's tables, every H inner steps."""
    fmt = wire_format(inputs)
    return OuterMethod("covenant-72b", int(value("inner_steps", inputs)), False,
                       selected(inputs), fmt.value_bits, fmt.index_bits, fmt.side_bytes)


TOPOLOGIES = ("relay, serial", "relay, concurrent", "ring all-gather", "ring all-reduce")


def round_seconds(topology: str, peers: int, inputs: dict[str, Graded] | None = None,
                  scale: float = 1.0) -> float:
    """Seconds of one round's exchange (module docstring) among `peers` peers; scale
    multiplies both link rates."""
    nbytes = message(inputs).total
    beta_up, beta_down = links(inputs, scale)
    if topology.startswith("relay"):
        return patterns.relay_allgather(peers, nbytes, 0.0, beta_up, beta_down,
                                        concurrent=topology.endswith("concurrent"))
    if topology == "ring all-gather":
        net = uplink(inputs) if scale == 1.0 else Network("scaled", 0.0, beta_up, "", "")
        return exchange_time(outer_method(inputs), peers, int(value("parameters", inputs)), net)
    if topology == "ring all-reduce":
        return patterns.ring_allreduce(peers, nbytes, 0.0, beta_up)
    raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}, got {topology!r}")


def upload_bound(inputs: dict[str, Graded] | None = None) -> float:
    """S / up: the peer's own message sent once, which every topology needs."""
    return message(inputs).total * links(inputs)[0]


def compute_per_round(inputs: dict[str, Graded] | None = None) -> float:
    """t_compute = c u / (1 - u) from the published utilisation u and communication c."""
    u, c = value("utilisation", inputs), value("communication_s", inputs)
    return c * u / (1.0 - u)


def round_table(inputs: dict[str, Graded] | None = None,
                peers: tuple[int, ...] = ASSUMED_PEERS) -> pd.DataFrame:
    """Per topology and peer count: the round's exchange, the per-inner-step time of
    topkscope.perf.outer (compute from the published utilisation), the utilisation it gives
    and its ratio to the published 70 s."""
    published = value("communication_s", inputs)
    compute = compute_per_round(inputs)
    H = int(value("inner_steps", inputs))
    per_step = Input(compute / H, f"{PAPER}: 94.5% utilisation at 70 s per round, "
                                  "t_compute = c u / (1 - u) (modelled)")
    rows = []
    for topology in TOPOLOGIES:
        for R in peers:
            t = round_seconds(topology, R, inputs)
            rows.append({"topology": topology, "peers": R, "round_s": t,
                         "ratio_to_published": t / published,
                         "utilisation": compute / (compute + t),
                         # topkscope.perf.outer's t_compute + (t_select + T_exchange) / H
                         "inner_step_s": per_step.value + t / H})
    return pd.DataFrame(rows)


def index_entropy_bits(inputs: dict[str, Graded] | None = None) -> float:
    """log2 binom(C, k_c) / k_c: the fewest bits per index any encoding of a chunk's index set
    needs (all sets equally likely)."""
    C, kc = int(value("chunk", inputs)), int(value("k_per_chunk", inputs))
    return (math.lgamma(C + 1) - math.lgamma(kc + 1) - math.lgamma(C - kc + 1)) \
        / math.log(2) / kc


def closing_assumptions(inputs: dict[str, Graded] | None = None) -> pd.DataFrame:
    """One assumption at a time, the others as published or modelled: the value it would need
    for the round to take the published 70 s (t = 70 s solved), whether that value is
    possible, and what it replaces."""
    published = value("communication_s", inputs)
    nbytes = message(inputs).total
    k = selected(inputs)
    up, down = value("up_mbit", inputs), value("down_mbit", inputs)
    compute = compute_per_round(inputs)
    beta_up, beta_down = links(inputs)
    R = int(value("peers", inputs))
    rows = []
    # overlap: the share of each topology's exchange hidden behind the round's compute
    for topology in ("relay, concurrent", "relay, serial", "ring all-gather"):
        t = round_seconds(topology, R, inputs)
        hidden = 1.0 - published / t
        rows.append({"assumption": f"overlap with compute ({topology}, {R} peers)",
                     "needed": f"{hidden:.0%} of {t:.0f} s hidden",
                     "instead_of": "none (the exchange follows the inner steps)",
                     "possible": t - published <= compute,
                     "why": f"{t - published:.0f} s to hide behind {compute:.0f} s of compute"})
    need_up = nbytes * 8 / published / MBIT
    fetched = 1 + math.floor(published / (nbytes * beta_down))  # peers a 70 s download allows
    rows.append({"assumption": f"uplink rate (relay, concurrent, {R} peers)",
                 "needed": f">= {need_up:.0f} Mbit/s", "instead_of": f"{up:g} Mbit/s",
                 "possible": R <= fetched,
                 "why": f"the message up once in 70 s; the downloads then take "
                        f"{(R - 1) * nbytes * beta_down:.0f} s ({fetched} peers at most fit)"})
    bits = published * up * MBIT / k - value("value_bits", inputs)
    entropy = index_entropy_bits(inputs)
    rows.append({"assumption": "index encoding", "needed": f"<= {bits:.2f} bits per index",
                 "instead_of": f"{int(value('index_bits', inputs))} bits (chunk-local)",
                 "possible": bits >= entropy,
                 "why": f"a set of {int(value('k_per_chunk', inputs))} of "
                        f"{int(value('chunk', inputs))} needs >= {entropy:.2f} bits per index"})
    rows.append({"assumption": "peers (relay, concurrent)", "needed": f"<= {fetched} peers",
                 "instead_of": f"{R} (assumed)", "possible": upload_bound(inputs) <= published,
                 "why": f"the upload alone takes {upload_bound(inputs):.0f} s at any peer count"})
    rows.append({"assumption": "topology", "needed": "any",
                 "instead_of": "relay / ring", "possible": upload_bound(inputs) <= published,
                 "why": f"every topology sends the message up once: >= "
                        f"{upload_bound(inputs):.0f} s"})
    for topology in ("relay, serial", "relay, concurrent"):
        peers = _peers_within(topology, published, inputs, scale=8.0)
        rows.append({"assumption": f"rates read as MB/s, not Mbit/s ({topology})",
                     "needed": f"<= {peers} peers",
                     "instead_of": f"{up:g} / {down:g} Mbit/s", "possible": peers >= 2,
                     "why": f"up {nbytes * beta_up / 8:.1f} s, each download "
                            f"{nbytes * beta_down / 8:.2f} s"})
    return pd.DataFrame(rows)


def _peers_within(topology: str, seconds: float, inputs, scale: float) -> int:
    """The most peers whose exchange takes at most `seconds` (1: not even two)."""
    peers = 1
    while peers < 10_000 and round_seconds(topology, peers + 1, inputs, scale) <= seconds:
        peers += 1
    return peers


# ------------------------------------------------------------------ docs/scaling.md
def inputs_markdown(inputs: dict[str, Graded] | None = None) -> str:
    lines = ["| input | value | grade | source |", "|---|---|---|---|"]
    for g in (inputs or INPUTS).values():
        shown = f"{g.value:,.0f}" if g.value >= 1000 else f"{g.value:g}"
        lines.append(f"| {g.name} | {shown} {g.unit} | {g.grade} | {g.source} |".replace(
            "  |", " |"))
    return "\n".join(lines)


def markdown(inputs: dict[str, Graded] | None = None) -> str:
    """The Covenant section's tables of docs/scaling.md (a test compares them)."""
    comp = compression_table(inputs)
    rounds = round_table(inputs)
    closing = closing_assumptions(inputs)
    lines = [inputs_markdown(inputs), "",
             "| encoding | bits per value + index | bytes per peer | compression |",
             "|---|---|---|---|"]
    lines += [f"| {r.encoding} | {r.value_bits} + {r.index_bits} | {r.message_bytes:,} | "
              f"{r.compression:.1f}x |" for r in comp.itertuples()]
    lines += ["", "| topology | peers | round s | / published 70 s | utilisation |",
              "|---|---|---|---|---|"]
    lines += [f"| {r.topology} | {r.peers} | {r.round_s:.1f} | {r.ratio_to_published:.2f} | "
              f"{r.utilisation:.1%} |" for r in rounds.itertuples()]
    lines += ["", "| assumption (alone) | needed for 70 s | instead of | possible | why |",
              "|---|---|---|---|---|"]
    lines += [f"| {r.assumption} | {r.needed} | {r.instead_of} | "
              f"{'yes' if r.possible else 'no'} | {r.why} |" for r in closing.itertuples()]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a printer
    print(markdown())
