"""What the release ships and names: its name on the package index, the version the docs' pre-commit
snippet pins, no web address the project does not own, the rule pages, the license, the changelog, the
Pythons supported and tested, and what goes into the sdist and the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from cachelint import DISTRIBUTION, __version__
from cachelint.docs import page_uri, rule_codes
from cachelint.toml import load_toml

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
CI_PAGE = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
PYPROJECT = load_toml(REPO / "pyproject.toml")
PROJECT = PYPROJECT["project"]


def pre_commit_snippet() -> str:
    return CI_PAGE.split("# .pre-commit-config.yaml\n", 1)[1].split("```", 1)[0]


def test_the_readme_pins_the_release_being_prepared() -> None:
    """The pre-commit `rev:` must name the tag of this release (`v` + the version)."""
    [rev] = re.findall(r"^\s+rev: (\S+)$", pre_commit_snippet(), re.MULTILINE)
    assert rev == f"v{__version__}"


def test_the_distribution_has_a_name_of_its_own() -> None:
    """`cachelint` on the package index is another project: every install line names this one's."""
    assert PROJECT["name"] == DISTRIBUTION != "cachelint"
    assert PROJECT["scripts"] == {"cachelint": "cachelint.__main__:program"}
    assert f"{DISTRIBUTION}[server]" in PROJECT["optional-dependencies"]["test"]
    texts = [README, *(path.read_text(encoding="utf-8") for path in sorted((REPO / "docs").rglob("*.md")))]
    installs = [line for text in texts for line in re.findall(r"pip install [^\n`&|;#]*", text)]
    assert installs
    for line in installs:
        words = [word.strip("'\"") for word in line.split()[2:] if not word.startswith("-")]
        names = [re.split(r"[\[=<>]", word, maxsplit=1)[0] for word in words]
        assert "cachelint" not in names, line


def test_no_web_address_the_project_does_not_own() -> None:
    assert "urls" not in PROJECT
    shipped = [REPO / "README.md", REPO / "pyproject.toml", *sorted((REPO / "cachelint").rglob("*.py"))]
    shipped += [*sorted((REPO / "docs").glob("*.md")), REPO / "mkdocs.yml"]
    for path in shipped:
        assert "github.com/cachelint" not in path.read_text(encoding="utf-8"), path


def test_rule_links_name_the_installed_pages() -> None:
    for code in rule_codes():
        uri = page_uri(code)
        assert uri.startswith("file://")
        assert uri.endswith(f"/{code}.md")


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
        info = f"{DISTRIBUTION.replace('-', '_')}-{__version__}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
    assert {f"cachelint/rule_pages/{code}.md" for code in rule_codes()} <= names
    assert f"{info}/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in metadata
    assert f"Name: {DISTRIBUTION}\n" in metadata
    assert "Project-URL" not in metadata
    assert "Classifier: Programming Language :: Python :: 3.13" in metadata
