"""Benchmark experiment configs (e.g. experiments/selection-speed.yaml), validated.

    experiment: <name>            benchmark: <script in benchmarks/, without .py>
    output: <file under results/bench/>    args: [<arguments for every profile>]
    description: <text>           profiles: {quick: {args: [...]}, full: {args: [...]}}

The command is `python benchmarks/<benchmark>.py <args> <profile args> --out <results>/bench/<output>`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import yaml

KEYS = ("experiment", "description", "benchmark", "output", "args", "profiles")
PROFILE_KEYS = ("args",)


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    experiment: str
    benchmark: str
    output: str
    args: tuple[str, ...]
    description: str = ""

    def command(self, python: str, benchmarks_dir: Path, results_root: Path) -> list[str]:
        out = Path(results_root) / "bench" / self.output
        return [python, str(Path(benchmarks_dir) / f"{self.benchmark}.py"), *self.args,
                "--out", str(out)]


def _strings(value, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise ValueError(f"{where} = {value!r} must be a list of command-line arguments")
    return [str(v) for v in value]


def load_benchmark_config(path: str | Path, profile: str) -> BenchmarkConfig:
    """Read and validate a benchmark config; the profile's args follow the common ones."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"benchmark config {str(path)!r} does not exist") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"benchmark config {str(path)!r} must be a mapping of keys to values")
    unknown = [k for k in raw if k not in KEYS]
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {path.name}; allowed: {', '.join(KEYS)}")
    for key in ("experiment", "benchmark", "output"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ValueError(f"{path.name}: {key} = {raw.get(key)!r} must be a non-empty string")
    if "/" in raw["benchmark"] or "/" in raw["output"]:
        raise ValueError(f"{path.name}: benchmark and output must be plain names, not paths")
    profiles = raw.get("profiles") or {}
    if profile not in profiles:
        raise ValueError(f"profile {profile!r} is not defined in {path.name}; "
                         f"profiles: {', '.join(profiles) or 'none'}")
    block = profiles[profile] or {}
    bad = [k for k in block if k not in PROFILE_KEYS]
    if bad:
        raise ValueError(f"unknown key(s) {bad} in {path.name} profiles.{profile}; allowed: args")
    args = _strings(raw.get("args"), "args") + _strings(block.get("args"), f"profiles.{profile}.args")
    return BenchmarkConfig(raw["experiment"], raw["benchmark"], raw["output"], tuple(args),
                           raw.get("description") or "")
