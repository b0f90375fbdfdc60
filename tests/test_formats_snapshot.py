"""Every output format, byte for byte, from the real command line on the demo project (fixtures/demo,
checked in a copy so that nothing is written into the source tree).

The expected output lives in tests/snapshots/demo.*. After an intended change (a rule's message, a rule
page, a reporter), regenerate them with

    CACHELINT_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_formats_snapshot.py

and review the diff. In SARIF, three things are normalised: the absolute root URI of the checkout and
the tool version (they depend on where and which release runs), and the texts each rule descriptor
copies from its rule page (test_sarif_content checks them against the pages exactly, so that editing a
page does not churn this snapshot). The rest of the document, its formatting included, is compared
byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_runner import DEMO, check

from cachelint import __version__
from cachelint.docs import all_pages

SNAPSHOTS = Path(__file__).parent / "snapshots"
SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
UPDATE = os.environ.get("CACHELINT_UPDATE_SNAPSHOTS") == "1"

ROOT_PLACEHOLDER = "file:///ROOT/"
VERSION_PLACEHOLDER = "<cachelint version>"

# snapshot file -> the flags after `cachelint check --isolated` (the demo must not pick up this repo's config)
FORMATS = {
    "demo.full.txt": ["--output-format", "full", "--no-color"],
    "demo.full-show-fixes.txt": ["--output-format", "full", "--no-color", "--show-fixes"],
    "demo.concise.txt": ["--output-format", "concise"],
    "demo.json": ["--output-format", "json"],
    "demo.jsonl": ["--output-format", "json-lines"],
    "demo.sarif": ["--output-format", "sarif"],
    "demo.github.txt": ["--output-format", "github"],
    "demo.gitlab.json": ["--output-format", "gitlab"],
    "demo.junit.xml": ["--output-format", "junit"],
}

# Where the demo's bugs are (fixtures/demo/expected_findings.txt says the same).
DEMO_FINDINGS = [
    ("demo_rl/rollout_server.py", 40, "CL003"),
    ("demo_rl/rollout_server.py", 43, "CL004"),
    ("demo_rl/rollout_server.py", 49, "CL004"),
    ("demo_rl/rollout_server.py", 51, "CL002"),
    ("demo_rl/worker_extension.py", 20, "CL001"),
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("snapshots") / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("__pycache__", ".cachelint_cache"))
    return copy


def root_uri(demo: Path) -> str:
    return demo.as_uri() + "/"


def run_demo(demo: Path, args: list[str]) -> str:
    result = check("--isolated", *args, cwd=demo)
    assert result.stderr == ""
    assert result.code == 1  # the demo has findings
    return result.stdout


def dump_sarif(log: Any) -> str:
    """The reporter's own serialisation (checked in `normalised`)."""
    return json.dumps(log, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def normalised(demo: Path, name: str, output: str) -> str:
    if not name.endswith(".sarif"):
        return output
    log = json.loads(output)
    assert dump_sarif(log) == output  # so normalising through JSON loses no formatting difference
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root_uri(demo)
    run["originalUriBaseIds"]["%SRCROOT%"]["uri"] = ROOT_PLACEHOLDER
    assert run["tool"]["driver"]["version"] == __version__
    run["tool"]["driver"]["version"] = VERSION_PLACEHOLDER
    for rule in run["tool"]["driver"]["rules"]:
        if rule["id"].startswith("CL"):  # a rule with a page; the others' texts are the reporter's own
            rule["fullDescription"]["text"] = f"<{rule['id']} page: Why is this bad?>"
            rule["help"] = {"markdown": f"<{rule['id']} page>", "text": f"<{rule['id']} page>"}
    return dump_sarif(log)


def assert_snapshot(name: str, output: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_bytes(output.encode("utf-8"))
    assert path.is_file(), f"no snapshot {path}; create it with CACHELINT_UPDATE_SNAPSHOTS=1"
    expected = path.read_bytes().decode("utf-8")
    assert output == expected, f"{name} differs; if the change is intended, CACHELINT_UPDATE_SNAPSHOTS=1"


@pytest.mark.parametrize("name", FORMATS)
def test_snapshot(demo: Path, name: str) -> None:
    output = run_demo(demo, FORMATS[name])
    assert_snapshot(name, normalised(demo, name, output))
    assert run_demo(demo, FORMATS[name]) == output  # stable from run to run


def test_snapshots_cover_every_output_format() -> None:
    from cachelint.config import OUTPUT_FORMATS

    covered = {args[args.index("--output-format") + 1] for args in FORMATS.values()}
    assert covered == set(OUTPUT_FORMATS)


def test_json_has_the_demo_findings_with_fixes(demo: Path) -> None:
    objects = json.loads(run_demo(demo, ["--output-format", "json"]))
    assert [(item["filename"], item["location"]["row"], item["code"]) for item in objects] == DEMO_FINDINGS
    for item in objects:
        fix = item["fix"]
        assert fix is not None, item["code"]
        assert fix["applicability"] in {"safe", "unsafe", "display"}
        assert item["url"] is None  # the project publishes no rule pages on the web


def test_json_lines_are_the_json_objects(demo: Path) -> None:
    lines = run_demo(demo, ["--output-format", "json-lines"]).splitlines()
    assert [json.loads(line) for line in lines] == json.loads(run_demo(demo, ["--output-format", "json"]))


def test_github_annotations(demo: Path) -> None:
    lines = run_demo(demo, ["--output-format", "github"]).splitlines()
    assert len(lines) == len(DEMO_FINDINGS)
    for line, (path, row, code) in zip(lines, DEMO_FINDINGS, strict=True):
        assert line.startswith(f"::error title=cachelint ({code}),file={path},line={row},col=")
        assert f"::{code} " in line


def sarif_log(demo: Path) -> Any:
    return json.loads(run_demo(demo, ["--output-format", "sarif"]))


def test_sarif_is_valid_against_the_schema(demo: Path) -> None:
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    log = sarif_log(demo)
    validator.validate(log)
    # The validator is not vacuous: a result without its message is rejected.
    del log["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(log)


def test_sarif_content(demo: Path) -> None:
    run = sarif_log(demo)["runs"][0]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": root_uri(demo)}}
    rules = run["tool"]["driver"]["rules"]
    not_rules = ["invalid-syntax", "io-error", "internal-error"]
    assert [rule["id"] for rule in rules] == [page.code for page in all_pages()] + not_rules
    for rule, page in zip(rules, all_pages(), strict=False):
        assert rule["name"] == page.name
        assert rule["shortDescription"] == {"text": page.summary}
        assert rule["fullDescription"] == {"text": page.sections["Why is this bad?"]}
        assert rule["help"] == {"markdown": page.text, "text": page.text}
        assert "helpUri" not in rule
    results = run["results"]
    locations = [
        (
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            result["locations"][0]["physicalLocation"]["region"]["startLine"],
            result["ruleId"],
        )
        for result in results
    ]
    assert locations == DEMO_FINDINGS
    for result in results:
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert len(result["partialFingerprints"]["cachelint/v1"]) == 64
    fingerprints = [result["partialFingerprints"]["cachelint/v1"] for result in results]
    assert len(set(fingerprints)) == len(fingerprints)


def test_sarif_shows_where_the_weight_update_starts(demo: Path) -> None:
    """CL003's chain, from the weight-update root in trainer.py to the reset in rollout_server.py."""
    results = sarif_log(demo)["runs"][0]["results"]
    [cl003] = [result for result in results if result["ruleId"] == "CL003"]

    def where(location: Any) -> tuple[str, int]:
        physical = location["physicalLocation"]
        return physical["artifactLocation"]["uri"], physical["region"]["startLine"]

    chain = [("demo_rl/trainer.py", 27), ("demo_rl/rollout_server.py", 39)]
    assert [where(location) for location in cl003["relatedLocations"]] == chain
    assert [location["id"] for location in cl003["relatedLocations"]] == [0, 1]
    assert cl003["relatedLocations"][0]["message"] == {
        "text": "the weight update starts in `DemoTrainer.update_weights`"
    }
    [flow] = cl003["codeFlows"]
    [thread] = flow["threadFlows"]
    steps = [where(step["location"]) for step in thread["locations"]]
    assert steps == [*chain, ("demo_rl/rollout_server.py", 40)]  # ending at the reset itself
    assert all("codeFlows" not in result for result in results if result["ruleId"] != "CL003")
