"""environment.yml (conda) must pin exactly what pyproject.toml does: dependencies + dev extra."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def env() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def normalised(specs: list[str]) -> dict[str, tuple[frozenset[str], SpecifierSet, str]]:
    """name -> (extras, specifier set, marker), names canonical, one entry per package."""
    reqs = [Requirement(s) for s in specs]
    names = [canonicalize_name(r.name) for r in reqs]
    assert len(names) == len(set(names)), f"a package is listed twice: {sorted(names)}"
    return {n: (frozenset(r.extras), r.specifier, str(r.marker or ""))
            for n, r in zip(names, reqs)}


def pip_section(env: dict) -> list[str]:
    sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert len(sections) == 1, "environment.yml needs exactly one pip: section"
    return sections[0]


def test_header(env: dict) -> None:
    assert env["name"] == "raptor-companion"
    assert env["channels"] == ["conda-forge"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "pip" in conda
    assert "python=3.11" in conda


def test_python_version_is_allowed_by_pyproject(pyproject: dict) -> None:
    assert "3.11" in SpecifierSet(pyproject["project"]["requires-python"])


def test_pip_dependencies_equal_pyproject(env: dict, pyproject: dict) -> None:
    wanted = pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"][
        "dev"]
    got = normalised(pip_section(env))
    expected = normalised(wanted)
    assert got.keys() == expected.keys()
    for name in expected:
        assert got[name] == expected[name], name


def test_no_editable_or_local_installs(env: dict) -> None:
    for spec in pip_section(env):
        assert not spec.startswith(("-", ".", "/")), spec
