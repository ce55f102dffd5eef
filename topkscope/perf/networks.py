"""Named networks: a latency alpha (seconds per message) and an inverse bandwidth beta
(seconds per byte), each with where its numbers come from.

The line rates (LINE_RATES): beta is the nominal line rate of the link (what the standard or
vendor specifies), so each is an optimistic bound: real collectives reach a fraction of it (TCP, protocol
overheads). alpha is the per-ring-step latency NCCL assumes in its own cost model
(src/graph/tuning.cc, the `hwLat` table, Ring algorithm, Simple protocol: 14.0 us for a
network hop in current releases, 3.4 us for NVLink), which is lower than what a TCP socket
achieves on Ethernet; calibrate (benchmarks/calibrate_comm.py) or give --alpha/--beta for a
real cluster.

    link       line rate            beta (s/B)   alpha (s)   source of the rate
    1gbe       1 Gbit/s             8.0e-9       14e-6       IEEE 802.3ab (1000BASE-T)
    10gbe      10 Gbit/s            8.0e-10      14e-6       IEEE 802.3ae / 802.3an
    25gbe      25 Gbit/s            3.2e-10      14e-6       IEEE 802.3by
    ib100      100 Gbit/s (EDR 4x)  8.0e-11      14e-6       InfiniBand Trade Association, EDR
    nvlink     150 GB/s per dir.    6.67e-12     3.4e-6      NVIDIA V100 SXM2: 6 NVLink 2.0
                                                             links x 25 GB/s per direction

The names a user types first give the predictions validated on published measurements: where
a published cluster measured a link, its plain name is the fitted preset, which carries an
effective-bandwidth factor, the fraction of the line rate that dense ring all-reduces reached
there (beta = line-rate beta / factor), fitted by topkscope.perf.published to the
ddl-benchmarks measurements of ResNet-50 and BERT-Large on 16 and 32 GPUs (BERT-Base held out;
docs/scaling.md has the table); its line rate is then `<name>-line`:

    10gbe        10 Gbit/s x FIT_FACTORS["10gbe"]   the 32-GPU cluster's 10GbE, TCP/IP
    ib100        100 Gbit/s x FIT_FACTORS["ib100"]  the same cluster's 100 Gb InfiniBand, RDMA
    10gbe-line   10 Gbit/s line rate
    ib100-line   100 Gbit/s line rate

1gbe, 25gbe and nvlink have no published measurement: line rate only. The fitted presets were
named `10gbe-fit` / `ib100-fit` and the line rates `10gbe` / `ib100` before; the old `-fit`
names still resolve (DEPRECATED_NAMES), and `current_names` reads tables written then.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

NCCL_NET_RING_LATENCY = 14.0e-6     # hwLat[NET][Ring][Simple], us -> s
NCCL_NVLINK_RING_LATENCY = 3.4e-6   # hwLat[NVLINK][Ring][Simple]
# effective fraction of the line rate, fitted by topkscope.perf.published.fit_factors to the
# committed published measurements (a test refits and compares)
FIT_FACTORS = {"10gbe": 0.935, "ib100": 0.408}


@dataclass(frozen=True)
class Network:
    """alpha seconds per message, beta seconds per byte; source says where each came from."""

    name: str
    alpha: float
    beta: float
    alpha_source: str
    beta_source: str
    # a separate fit for the all-reduce (calibration measures both collectives); None: the same
    allreduce_alpha: float | None = None
    allreduce_beta: float | None = None
    # the fraction of the line rate beta stands for (1: the line rate itself; fitted presets:
    # the effective bandwidth measured on a published cluster)
    bandwidth_factor: float = 1.0

    def constants(self, collective: str) -> tuple[float, float]:
        """(alpha, beta) for "allreduce" or "allgather"."""
        if collective == "allreduce":
            return (self.alpha if self.allreduce_alpha is None else self.allreduce_alpha,
                    self.beta if self.allreduce_beta is None else self.allreduce_beta)
        if collective == "allgather":
            return self.alpha, self.beta
        raise ValueError(f"collective must be allreduce or allgather, got {collective!r}")

    @property
    def bandwidth_gbit(self) -> float:
        """Bandwidth in Gbit/s (1 / beta in bits)."""
        return 8.0 / self.beta / 1e9 if self.beta > 0 else float("inf")


def _gbit(rate_gbit: float) -> float:
    return 8.0 / (rate_gbit * 1e9)


FIT_SOURCE = ("fitted to published dense all-reduce times (HKBU-HPML/ddl-benchmarks, ResNet-50 "
              "and BERT-Large, 16-32 GPUs; topkscope.perf.published)")


def fitted(line_rate: Network, factor: float) -> Network:
    """`line_rate` with its bandwidth scaled by `factor` (beta / factor), named as the link
    (its name less LINE)."""
    if not 0 < factor <= 1:
        raise ValueError(f"bandwidth factor must be in (0, 1], got {factor!r}")
    return Network(line_rate.name.removesuffix(LINE), line_rate.alpha, line_rate.beta / factor,
                   line_rate.alpha_source,
                   f"preset ({line_rate.bandwidth_gbit:g} Gbit/s line rate x {factor:.3f} "
                   f"effective, {FIT_SOURCE})", bandwidth_factor=factor)


LINE = "-line"  # the suffix of a line-rate preset whose link also has a fitted one
_NCCL_NET = "preset (NCCL tuning.cc hwLat NET/Ring/Simple)"
# the nominal line rate of each link, by the link's name (the published rows' `network`)
LINE_RATES: dict[str, Network] = {
    "1gbe": Network("1gbe", NCCL_NET_RING_LATENCY, _gbit(1.0), _NCCL_NET,
                    "preset (1 Gbit/s line rate, IEEE 802.3ab)"),
    "10gbe": Network("10gbe", NCCL_NET_RING_LATENCY, _gbit(10.0), _NCCL_NET,
                     "preset (10 Gbit/s line rate, IEEE 802.3ae)"),
    "25gbe": Network("25gbe", NCCL_NET_RING_LATENCY, _gbit(25.0), _NCCL_NET,
                     "preset (25 Gbit/s line rate, IEEE 802.3by)"),
    "ib100": Network("ib100", NCCL_NET_RING_LATENCY, _gbit(100.0), _NCCL_NET,
                     "preset (100 Gbit/s InfiniBand EDR 4x line rate)"),
    "nvlink": Network("nvlink", NCCL_NVLINK_RING_LATENCY, 1.0 / 150e9,
                      "preset (NCCL tuning.cc hwLat NVLINK/Ring/Simple)",
                      "preset (V100 SXM2: 6 NVLink 2.0 links x 25 GB/s per direction)"),
}
PRESETS: dict[str, Network] = {}
for _name, _net in LINE_RATES.items():
    if _name in FIT_FACTORS:
        _net = replace(_net, name=_name + LINE)
        PRESETS[_name] = fitted(_net, FIT_FACTORS[_name])
        PRESETS[_name + LINE] = _net
    else:
        PRESETS[_name] = _net
# the fitted presets' names before they took the plain ones (kept for one release)
DEPRECATED_NAMES = {f"{name}-fit": name for name in FIT_FACTORS}


LINK_NAMES = {"1gbe": "1 GbE", "10gbe": "10 GbE", "25gbe": "25 GbE",
              "ib100": "100 Gb InfiniBand", "nvlink": "NVLink"}


def display_name(name: str) -> str:
    """A preset as people write it: '10gbe' -> '10 GbE (fitted)', '10gbe-line' -> '10 GbE
    (line rate)', '1gbe' -> '1 GbE'; an unknown name as it is."""
    name = DEPRECATED_NAMES.get(str(name), str(name))
    link = name.removesuffix(LINE)
    if link not in LINK_NAMES:
        return name
    if name.endswith(LINE):
        return f"{LINK_NAMES[link]} (line rate)"
    return LINK_NAMES[link] + (" (fitted)" if link in FIT_FACTORS else "")


def is_fitted(name: str) -> bool:
    """Whether the preset `name` was fitted on published measurements (else: a line rate)."""
    net = PRESETS.get(str(name))
    return net is not None and net.bandwidth_factor != 1.0


def current_names(names) -> dict[str, str]:
    """{name as a table wrote it: today's preset name}. A table naming any `<link>-fit` preset
    was written before the renaming: there `<link>` was the line rate (today `<link>-line`)
    and `<link>-fit` the fitted preset (today `<link>`)."""
    names = [str(n) for n in names]
    if not any(n in DEPRECATED_NAMES for n in names):
        return {n: n for n in names}
    return {n: DEPRECATED_NAMES.get(n, n + LINE if n in FIT_FACTORS else n) for n in names}


def available() -> list[str]:
    """Preset names, slowest first."""
    return sorted(PRESETS, key=lambda n: -PRESETS[n].beta)


def resolve(name: str | None, alpha: float | None = None, beta: float | None = None) -> Network:
    """The preset `name` (or a calibration CSV path) with alpha and/or beta replaced by user
    values (source "user").

    With no preset both alpha and beta must be given (the network is then named "user").
    """
    for label, value in (("alpha", alpha), ("beta", beta)):
        if value is not None and not value >= 0:
            raise ValueError(f"{label} must be a number >= 0, got {value!r}")
    if name is not None and Path(name).suffix == ".csv":
        net = from_calibration(name)
    elif name is None:
        if alpha is None or beta is None:
            raise ValueError("give a network preset or both alpha and beta; presets: "
                             + ", ".join(available()))
        return Network("user", float(alpha), float(beta), "user", "user")
    else:
        key = DEPRECATED_NAMES.get(name.lower(), name.lower())
        if key not in PRESETS:
            raise ValueError(f"unknown network {name!r}; presets: {', '.join(available())} "
                             "(or a calibration CSV from benchmarks/calibrate_comm.py)")
        net = PRESETS[key]
    if alpha is None and beta is None:
        return net
    # a user value replaces the constant for both collectives
    return Network(f"{net.name}+user",
                   net.alpha if alpha is None else float(alpha),
                   net.beta if beta is None else float(beta),
                   net.alpha_source if alpha is None else "user",
                   net.beta_source if beta is None else "user",
                   net.allreduce_alpha if alpha is None else None,
                   net.allreduce_beta if beta is None else None,
                   net.bandwidth_factor if beta is None else 1.0)


def from_calibration(path: str | Path, workers: str = "all") -> Network:
    """The network measured by benchmarks/calibrate_comm.py: its fit CSV (columns collective,
    workers, alpha, beta), the rows fitted over `workers` ("all": every process count)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"calibration file {str(path)!r} does not exist")
    fit = pd.read_csv(path)
    missing = {"collective", "workers", "alpha", "beta"} - set(fit.columns)
    if missing:
        raise ValueError(f"{str(path)!r} is not a calibration fit: it lacks {sorted(missing)}")
    rows = fit[fit["workers"].astype(str) == workers].set_index("collective")
    if not {"allreduce", "allgather"} <= set(rows.index):
        raise ValueError(f"{str(path)!r} has no allreduce and allgather fit for workers={workers}")
    source = f"measured here (calibration {path.name})"
    ag, ar = rows.loc["allgather"], rows.loc["allreduce"]
    return Network(f"calibrated:{path.stem}", float(ag["alpha"]), float(ag["beta"]), source,
                   source, float(ar["alpha"]), float(ar["beta"]))
