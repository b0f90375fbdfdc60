"""The `gitlab` and `junit` formats read by their consumers: the GitLab Code Quality report checked
against the fields GitLab requires (tests/data/gitlab-codequality.schema.json), the JUnit report read by
junitparser (the parser of Python's CI tooling) and by the standard library's XML parser."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest
from cli_runner import DEMO, check, write_tree

junitparser = pytest.importorskip("junitparser")

SCHEMA = json.loads((Path(__file__).parent / "data" / "gitlab-codequality.schema.json").read_text(encoding="utf-8"))
DEMO_CODES = ["CL003", "CL004", "CL004", "CL002", "CL001"]


def report(fmt: str, cwd: Path, *paths: str) -> str:
    result = check("--isolated", "--no-cache", "--output-format", fmt, *paths, cwd=cwd)
    assert result.code in (0, 1), result.stderr
    return result.stdout


def test_gitlab_report_has_what_gitlab_requires() -> None:
    issues = json.loads(report("gitlab", DEMO))
    jsonschema.validate(issues, SCHEMA)
    assert [issue["check_name"] for issue in issues] == DEMO_CODES
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)  # GitLab keeps one issue per fingerprint
    repository = DEMO.parent.parent  # paths are relative to the git repository, as GitLab's diff names them
    for issue in issues:
        path = repository / issue["location"]["path"]
        assert path.is_file(), issue["location"]
        assert issue["description"].startswith(issue["check_name"] + " ")
        assert issue["severity"] == "major"


def test_gitlab_report_of_a_clean_run_is_an_empty_array(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "clean", {"a.py": "x = 1\n"})
    assert json.loads(report("gitlab", root)) == []


def test_gitlab_report_of_a_file_that_does_not_parse(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "broken", {"a.py": "def (:\n"})
    [issue] = json.loads(report("gitlab", root, "a.py"))  # named: parsed even without a trigger word
    jsonschema.validate([issue], SCHEMA)
    assert (issue["check_name"], issue["severity"], issue["location"]["path"]) == ("invalid-syntax", "critical", "a.py")


def test_junit_report_is_read_by_junitparser(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    path.write_text(report("junit", DEMO), encoding="utf-8")
    xml = junitparser.JUnitXml.fromfile(str(path))
    assert (xml.tests, xml.failures, xml.errors) == (5, 5, 0)
    cases = [(suite.name, case) for suite in xml for case in suite]
    assert [case.name for _, case in cases] == [f"cachelint.{code}" for code in DEMO_CODES]
    for suite_name, case in cases:
        [failure] = case.result
        assert isinstance(failure, junitparser.Failure)
        assert failure.type == case.name.removeprefix("cachelint.")
        assert failure.message and failure.text.startswith("line ")
        assert (DEMO / suite_name).is_file() or (DEMO.parent.parent / suite_name).is_file()


def test_junit_report_of_a_clean_run_passes(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "clean", {"a.py": "x = 1\n"})
    path = tmp_path / "report.xml"
    path.write_text(report("junit", root), encoding="utf-8")
    xml = junitparser.JUnitXml.fromfile(str(path))
    assert (xml.tests, xml.failures, xml.errors) == (1, 0, 0)
    [[case]] = [list(suite) for suite in xml]
    assert case.is_passed


def test_junit_report_holds_no_character_xml_cannot(tmp_path: Path) -> None:
    """A file that does not parse is an error, not a failure; a control character from the code (here
    in a name the message quotes) is shown as a picture, which XML 1.0 can hold."""
    root = write_tree(tmp_path / "odd", {"a.py": "def (:\n", "b\x1bc.py": "x = \x01\n"})
    text = report("junit", root, "a.py", "b\x1bc.py")
    ElementTree.fromstring(text.encode("utf-8"))  # well-formed: it raises on a character XML cannot hold
    path = tmp_path / "report.xml"
    path.write_text(text, encoding="utf-8")
    xml = junitparser.JUnitXml.fromfile(str(path))
    assert (xml.tests, xml.failures, xml.errors) == (2, 0, 2)
    assert all(isinstance(case.result[0], junitparser.Error) for suite in xml for case in suite)
    assert "\x1b" not in text and "b\u241bc.py" in text
