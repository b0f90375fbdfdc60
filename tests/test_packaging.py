"""What the release ships and names: the version the README's pre-commit snippet pins, one home URL
everywhere, the rule pages the outputs link to, the license, the changelog, the Pythons supported and
tested, and what goes into the sdist and the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from cachelint import __version__
from cachelint.docs import HELP_URI, HOME_URL, rule_codes
from cachelint.output.sarif import INFORMATION_URI
from cachelint.toml import load_toml

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
PYPROJECT = load_toml(REPO / "pyproject.toml")
PROJECT = PYPROJECT["project"]


def pre_commit_snippet() -> str:
    return README.split("# .pre-commit-config.yaml\n", 1)[1].split("```", 1)[0]


def test_the_readme_pins_the_release_being_prepared() -> None:
    """The pre-commit `rev:` must name the tag of this release (`v` + the version)."""
    [rev] = re.findall(r"^\s+rev: (\S+)$", pre_commit_snippet(), re.MULTILINE)
    assert rev == f"v{__version__}"


def test_one_home_url_everywhere() -> None:
    [repo] = re.findall(r"- repo: (\S+)$", pre_commit_snippet(), re.MULTILINE)
    assert repo == HOME_URL == INFORMATION_URI == PROJECT["urls"]["Homepage"]
    assert all(url.startswith(HOME_URL) for url in PROJECT["urls"].values())
    assert HELP_URI.startswith(HOME_URL + "/")


def test_the_rule_urls_name_pages_that_ship_in_this_repository() -> None:
    """HELP_URI is HOME_URL/blob/main/<path>: <path> is where the page is in this repository, for every rule."""
    branch_path = HELP_URI.removeprefix(HOME_URL + "/blob/main/")
    assert branch_path != HELP_URI
    codes = rule_codes()
    assert codes == sorted(path.stem for path in (REPO / "rules").glob("CL*.md"))
    for code in codes:
        assert (REPO / branch_path.format(code=code)).is_file()
    assert PROJECT["urls"]["Rules"] == HOME_URL + "/tree/main/" + branch_path.rsplit("/", 1)[0]


def test_license_file_is_the_declared_apache_2() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text


def test_changelog_covers_every_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[?(\d+\.\d+\.\d+)\]? - \d{4}-\d{2}-\d{2}$", changelog, re.MULTILINE)
    assert versions[0] == __version__
    assert versions[-1] == "0.1.0"
    assert f"[{__version__}]: {HOME_URL}/releases/tag/v{__version__}" in changelog


def test_the_pythons_supported_are_the_pythons_classified_and_tested() -> None:
    classified = sorted(
        tuple(map(int, item.rsplit(":: ", 1)[1].split(".")))
        for item in PROJECT["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", item)
    )
    major, minor = classified[0]
    assert PROJECT["requires-python"] == f">={major}.{minor}"
    run = (REPO / ".ci/run").read_text(encoding="utf-8")
    [tested] = re.findall(r"^SUPPORTED=\((.*)\)$", run, re.MULTILINE)
    assert [tuple(map(int, version.split("."))) for version in tested.split()] == classified
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == f"{major}.{minor}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built from this checkout by the build backend."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-d", str(out)], cwd=REPO, check=True, capture_output=True
    )
    return out


def test_the_sdist_has_the_docs_the_license_and_the_changelog(built: Path) -> None:
    [sdist] = built.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for name in ("docs/DESIGN.md", "LICENSE", "CHANGELOG.md", "README.md", "rules/CL001.md", "tests/test_packaging.py"):
        assert name in names
    assert "bench/README.md" not in names  # only the top-level README


def test_the_wheel_has_the_rule_pages_and_the_license(built: Path) -> None:
    [wheel] = built.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"cachelint-{__version__}.dist-info/METADATA").decode()
    assert {f"cachelint/rule_pages/{code}.md" for code in rule_codes()} <= names
    assert f"cachelint-{__version__}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in metadata
    assert f"Project-URL: Homepage, {HOME_URL}" in metadata
    assert "Classifier: Programming Language :: Python :: 3.13" in metadata
