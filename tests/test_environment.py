"""environment.yml must name exactly the runtime dependencies of pyproject.toml."""

import re

import tomllib
import yaml

from tests.conftest import REPO

# pip name -> conda name where they differ
CONDA_NAME = {"torch": "pytorch", "duckdb": "python-duckdb"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower()


def _pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _environment():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    conda, pip = set(), set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip |= {_name(p) for p in dep["pip"] if not p.startswith("-e")}
        else:
            conda.add(_name(dep))
    return env, conda, pip


def test_environment_names_every_runtime_and_dev_dependency_and_nothing_else():
    project = _pyproject()
    wanted = {CONDA_NAME.get(_name(s), _name(s)) for s in project["dependencies"]}
    wanted |= {CONDA_NAME.get(_name(s), _name(s)) for s in project["optional-dependencies"]["dev"]}
    _, conda, pip = _environment()
    listed = (conda | pip) - {"python", "pip"}
    assert wanted - listed == set(), f"missing from environment.yml: {wanted - listed}"
    assert listed - wanted == set(), f"environment.yml names packages pyproject lacks: {listed - wanted}"


def test_environment_installs_the_package_itself_and_pins_torch_like_the_makefile():
    env, conda, _ = _environment()
    pip_block = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    assert "-e ." in pip_block
    makefile = (REPO / "Makefile").read_text()
    pin = re.search(r"^TORCH \?= torch==([\d.]+)", makefile, re.M).group(1)
    assert f"pytorch={pin}" in env["dependencies"]
