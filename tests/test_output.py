"""Reporters and rule pages: exact text for the machine formats, SARIF against its schema."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cachelint import docs
from cachelint.changes import ReplaceExpression
from cachelint.finding import Applicability, ChainStep, Edit, Finding, Fix, Span
from cachelint.output import FORMATS, ReportContext, render
from cachelint.vllm_range import from_specifier

SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"  # a copy of the OASIS schema

WORKER = "demo_rl/worker_extension.py"
ROLLOUT = "demo_rl/rollout.py"
BROKEN = "demo_rl/broken.py"

WORKER_SOURCE = """\
class WorkerExtension:
    def update_weights(self, weights):
        load_weights(weights)
        self.model_runner.reset_encoder_cache()

    def other(self):
\tself.model_runner.reset_encoder_cache()
"""

ROLLOUT_SOURCE = """\
import vllm


def refit(engine):
    engine.collective_rpc(
        "reset_encoder_cache",
    )
"""

CL001_PAGE = """\
# CL001 worker-only-cache-reset

## What it does
Flags a cache reset that reaches only the workers. It misses the scheduler.

## Why is this bad?
The scheduler still believes the old entries exist.

## Example
```python
self.model_runner.reset_encoder_cache()
```

## Use instead
```python
await self.engine.reset_encoder_cache()
```

## Fix safety
Unsafe: it changes what runs.

## Options
None.

## References
- vLLM `EngineCore.reset_encoder_cache`
"""

CL002_PAGE = """\
# CL002 version-gated-reset

## What it does
Flags a reset gated on the vLLM version.

## Why is this bad?
Version tests drift.

## Example
```python
# ## not a heading inside a fence
if version >= "0.9":
    engine.reset_mm_cache()
```
"""


@pytest.fixture(autouse=True)
def rule_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sample pages in place of the project's; findings' relative paths are relative to tmp_path."""
    monkeypatch.chdir(tmp_path)
    pages = tmp_path / "rules"
    pages.mkdir()
    (pages / "CL001.md").write_text(CL001_PAGE, encoding="utf-8")
    (pages / "CL002.md").write_text(CL002_PAGE, encoding="utf-8")
    (pages / "README.md").write_text("# not a rule\n", encoding="utf-8")
    monkeypatch.setattr(docs, "rule_pages_dir", lambda: pages)
    return pages


def worker_finding(line: int = 4, col: int = 9, function: str = "WorkerExtension.update_weights") -> Finding:
    end_col = col + len("self.model_runner.reset_encoder_cache()")
    return Finding(
        path=WORKER,
        span=Span(line, col, line, end_col),
        code="CL001",
        name="worker-only-cache-reset",
        message="model_runner.reset_encoder_cache() clears only the worker's encoder cache",
        help="Reset through the engine: `engine.reset_encoder_cache()`",
        fix=Fix(
            "Reset the encoder cache through the engine",
            Applicability.SAFE,
            (Edit(WORKER, Span(line, col + 5, line, col + 17), "engine"),),
            (ReplaceExpression(WORKER, Span(line, col + 5, line, col + 17), "engine"),),
        ),
        function=function,
    )


def rollout_finding() -> Finding:
    return Finding(
        path=ROLLOUT,
        span=Span(5, 5, 7, 6),
        code="CL002",
        name="version-gated-reset",
        message="collective_rpc reset, 50% of runs: stale",
        help="Call the engine-level reset",
        fix=Fix(
            "Use the engine reset",
            Applicability.UNSAFE,
            (Edit(ROLLOUT, Span(5, 5, 7, 6), "engine.reset_encoder_cache()"),),
            (ReplaceExpression(ROLLOUT, Span(5, 5, 7, 6), "engine.reset_encoder_cache()"),),
        ),
        function="refit",
    )


def syntax_finding() -> Finding:
    return Finding(BROKEN, Span(3, 8, 3, 9), "invalid-syntax", "invalid-syntax", "Expected ':'")


def context(tmp_path: Path, **changes: object) -> ReportContext:
    base = ReportContext(
        root=tmp_path,
        sources={WORKER: WORKER_SOURCE, ROLLOUT: ROLLOUT_SOURCE},
        files_checked=3,
        tool_version="9.9.9",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def rendered(findings: list[Finding], fmt: str, report: ReportContext) -> str:
    out = io.StringIO()
    render(findings, fmt, out, report)
    return out.getvalue()


def all_findings() -> list[Finding]:
    """Deliberately out of order: every format sorts."""
    return [rollout_finding(), worker_finding(), syntax_finding()]


# rule pages


def test_load_page_splits_sections() -> None:
    page = docs.load_page("cl001")
    assert page is not None
    assert (page.code, page.name) == ("CL001", "worker-only-cache-reset")
    assert page.title == "CL001 worker-only-cache-reset"
    assert list(page.sections) == [
        "What it does",
        "Why is this bad?",
        "Example",
        "Use instead",
        "Fix safety",
        "Options",
        "References",
    ]
    assert page.summary == "Flags a cache reset that reaches only the workers."
    assert page.example_code == "self.model_runner.reset_encoder_cache()\n"
    assert page.use_instead_code == "await self.engine.reset_encoder_cache()\n"
    assert page.text == CL001_PAGE


def test_heading_inside_a_fence_is_code() -> None:
    page = docs.load_page("CL002")
    assert page is not None
    assert "## not a heading" in (page.example_code or "")
    assert page.use_instead_code is None


def test_all_pages_and_missing_pages() -> None:
    assert [page.code for page in docs.all_pages()] == ["CL001", "CL002"]
    assert docs.load_page("CL999") is None
    assert docs.load_page("../pyproject") is None
    assert docs.page_uri("CL001") == (docs.rule_pages_dir() / "CL001.md").resolve().as_uri()


def test_rule_pages_dir_is_the_checkout_rules_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    package = Path(docs.__file__).parent
    expected = package / "rule_pages" if (package / "rule_pages").is_dir() else package.parent / "rules"
    assert docs.rule_pages_dir() == expected


# concise, json, json-lines, github: exact text


def test_concise(tmp_path: Path) -> None:
    assert rendered(all_findings(), "concise", context(tmp_path, unsafe_fixable_hidden=1)) == (
        "demo_rl/broken.py:3:8: SyntaxError: Expected ':'\n"
        "demo_rl/rollout.py:5:5: CL002 collective_rpc reset, 50% of runs: stale\n"
        "demo_rl/worker_extension.py:4:9: CL001 [*] model_runner.reset_encoder_cache() clears only the "
        "worker's encoder cache\n"
        "Found 3 problems in 3 files.\n"
        "[*] 1 fixable with the --fix option.\n"
        "(1 hidden fix can be enabled with the --unsafe-fixes option.)\n"
    )


def test_concise_quiet_and_unsafe_fixes(tmp_path: Path) -> None:
    report = context(tmp_path, quiet=True, unsafe_fixes=True)
    assert rendered([rollout_finding()], "concise", report) == (
        "demo_rl/rollout.py:5:5: CL002 [*] collective_rpc reset, 50% of runs: stale\n"
    )


def test_json(tmp_path: Path) -> None:
    # Each finding carries the supported range its file was checked against (null when not known).
    ranges = {ROLLOUT: from_specifier(">=0.18,<0.20", 'pyproject.toml, extra "vllm"')}
    assert rendered([rollout_finding(), syntax_finding()], "json", context(tmp_path, ranges=ranges)) == (
        """\
[
  {
    "cell": null,
    "code": "invalid-syntax",
    "end_location": {
      "column": 9,
      "row": 3
    },
    "filename": "demo_rl/broken.py",
    "fix": null,
    "help": "",
    "location": {
      "column": 8,
      "row": 3
    },
    "message": "Expected ':'",
    "name": "invalid-syntax",
    "noqa_row": null,
    "notes": [],
    "severity": "error",
    "url": null,
    "vllm_range": null
  },
  {
    "cell": null,
    "code": "CL002",
    "end_location": {
      "column": 6,
      "row": 7
    },
    "filename": "demo_rl/rollout.py",
    "fix": {
      "applicability": "unsafe",
      "edits": [
        {
          "content": "engine.reset_encoder_cache()",
          "end_location": {
            "column": 6,
            "row": 7
          },
          "filename": "demo_rl/rollout.py",
          "location": {
            "column": 5,
            "row": 5
          }
        }
      ],
      "message": "Use the engine reset"
    },
    "help": "Call the engine-level reset",
    "location": {
      "column": 5,
      "row": 5
    },
    "message": "collective_rpc reset, 50% of runs: stale",
    "name": "version-gated-reset",
    "noqa_row": 5,
    "notes": [],
    "severity": "error",
    "url": null,
    "vllm_range": {
      "newer": "excluded",
      "range": "0.18.0\u20130.19.1",
      "source": "pyproject.toml, extra \\"vllm\\""
    }
  }
]
"""
    )


def test_json_empty(tmp_path: Path) -> None:
    assert rendered([], "json", context(tmp_path)) == "[]\n"


def test_json_lines(tmp_path: Path) -> None:
    lines = rendered(all_findings(), "json-lines", context(tmp_path)).splitlines()
    assert lines[0] == (
        '{"cell":null,"code":"invalid-syntax","end_location":{"column":9,"row":3},"filename":"demo_rl/broken.py",'
        '"fix":null,"help":"","location":{"column":8,"row":3},"message":"Expected \':\'",'
        '"name":"invalid-syntax","noqa_row":null,"notes":[],"severity":"error","url":null,"vllm_range":null}'
    )
    assert [json.loads(line) for line in lines] == json.loads(rendered(all_findings(), "json", context(tmp_path)))


def test_github(tmp_path: Path) -> None:
    odd = dataclasses.replace(
        worker_finding(), path="demo_rl/a,b:c.py", message="first line\r\nsecond: 100% sure, really"
    )
    assert rendered([odd, *all_findings()], "github", context(tmp_path)) == (
        "::error title=cachelint (CL001),file=demo_rl/a%2Cb%3Ac.py,line=4,col=9,endLine=4,endColumn=48"
        "::CL001 first line%0D%0Asecond: 100%25 sure, really%0A  help: Reset through the engine: "
        "`engine.reset_encoder_cache()`\n"
        "::error title=cachelint (invalid-syntax),file=demo_rl/broken.py,line=3,col=8,endLine=3,endColumn=9"
        "::invalid-syntax Expected ':'\n"
        "::error title=cachelint (CL002),file=demo_rl/rollout.py,line=5,col=5,endLine=7,endColumn=6"
        "::CL002 collective_rpc reset, 50%25 of runs: stale%0A  help: Call the engine-level reset\n"
        "::error title=cachelint (CL001),file=demo_rl/worker_extension.py,line=4,col=9,endLine=4,endColumn=48"
        "::CL001 model_runner.reset_encoder_cache() clears only the worker's encoder cache"
        "%0A  help: Reset through the engine: `engine.reset_encoder_cache()`\n"
    )


def test_github_paths_are_relative_to_the_root(tmp_path: Path) -> None:
    finding = dataclasses.replace(syntax_finding(), path=str(tmp_path / "pkg" / "mod.py"))
    assert ",file=pkg/mod.py," in rendered([finding], "github", context(tmp_path))


def test_machine_formats_are_stable_and_uncoloured(tmp_path: Path) -> None:
    report = context(tmp_path, color=True, statistics=True, quiet=True)
    for fmt in ("json", "json-lines", "sarif", "github"):
        first = rendered(all_findings(), fmt, report)
        assert first == rendered(list(reversed(all_findings())), fmt, report)
        assert "\x1b" not in first


def test_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        render([], "xml", io.StringIO(), context(tmp_path))
    assert FORMATS == ("full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit")


# sarif


def sarif(findings: list[Finding], report: ReportContext) -> Any:
    text = rendered(findings, "sarif", report)
    assert text.endswith("}\n")
    log = json.loads(text)
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    return log


def test_sarif_document(tmp_path: Path) -> None:
    log = sarif(all_findings(), context(tmp_path))
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("cachelint", "9.9.9")
    assert [rule["id"] for rule in driver["rules"]] == [
        "CL001",
        "CL002",
        "invalid-syntax",
        "io-error",
        "internal-error",
    ]
    cl001 = driver["rules"][0]
    assert cl001["name"] == "worker-only-cache-reset"
    assert cl001["shortDescription"] == {"text": "Flags a cache reset that reaches only the workers."}
    assert cl001["fullDescription"] == {"text": "The scheduler still believes the old entries exist."}
    assert cl001["help"] == {"text": CL001_PAGE, "markdown": CL001_PAGE}
    assert "helpUri" not in cl001  # the project publishes no web page of its own
    assert cl001["defaultConfiguration"] == {"level": "error"}
    assert cl001["properties"] == {"tags": ["correctness", "vllm"]}
    syntax_rule = driver["rules"][2]
    assert syntax_rule["shortDescription"] == {"text": "A file that CPython cannot parse."}
    assert syntax_rule["properties"] == {"tags": ["correctness", "syntax"]}
    assert "helpUri" not in syntax_rule  # no page: not a rule
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.absolute().as_uri() + "/"}}

    syntax, rollout, worker = run["results"]
    assert (syntax["ruleId"], syntax["ruleIndex"]) == ("invalid-syntax", 2)
    assert (rollout["ruleId"], rollout["ruleIndex"], worker["ruleIndex"]) == ("CL002", 1, 0)
    assert worker["level"] == "error"
    assert worker["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "demo_rl/worker_extension.py", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 4, "startColumn": 9, "endLine": 4, "endColumn": 48},
            }
        }
    ]
    assert worker["fixes"] == [
        {
            "description": {"text": "Reset the encoder cache through the engine"},
            "artifactChanges": [
                {
                    "artifactLocation": {"uri": "demo_rl/worker_extension.py", "uriBaseId": "%SRCROOT%"},
                    "replacements": [
                        {
                            "deletedRegion": {
                                "startLine": 4,
                                "startColumn": 14,
                                "endLine": 4,
                                "endColumn": 26,
                            },
                            "insertedContent": {"text": "engine"},
                        }
                    ],
                }
            ],
            "properties": {"applicability": "safe"},
        }
    ]
    assert "fixes" not in syntax


def chained_finding() -> Finding:
    """A finding at the end of a call chain: a weight update in one file reaching a reset in another."""
    chain = (
        ChainStep("demo_rl/trainer.py", Span(12, 9, 12, 23), "the weight update starts in `Trainer.update_weights`"),
        ChainStep(ROLLOUT, Span(4, 5, 4, 10), "`Trainer.update_weights` calls `refit`"),
    )
    return dataclasses.replace(rollout_finding(), code="CL001", chain=chain)


def test_sarif_chain_as_related_locations_and_a_code_flow(tmp_path: Path) -> None:
    (result,) = sarif([chained_finding()], context(tmp_path))["runs"][0]["results"]  # valid against the schema

    def place(uri: str, line: int, col: int, end_col: int, text: str) -> dict[str, Any]:
        return {
            "physicalLocation": {
                "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": line, "startColumn": col, "endLine": line, "endColumn": end_col},
            },
            "message": {"text": text},
        }

    root = place("demo_rl/trainer.py", 12, 9, 23, "the weight update starts in `Trainer.update_weights`")
    hop = place("demo_rl/rollout.py", 4, 5, 10, "`Trainer.update_weights` calls `refit`")
    assert result["relatedLocations"] == [{"id": 0, **root}, {"id": 1, **hop}]
    reset = {
        "physicalLocation": result["locations"][0]["physicalLocation"],
        "message": {"text": "collective_rpc reset, 50% of runs: stale"},
    }
    assert result["codeFlows"] == [{"threadFlows": [{"locations": [{"location": p} for p in (root, hop, reset)]}]}]


def test_sarif_without_a_chain_has_no_code_flow(tmp_path: Path) -> None:
    for result in sarif(all_findings(), context(tmp_path))["runs"][0]["results"]:
        assert "relatedLocations" not in result and "codeFlows" not in result


def test_finding_json_keeps_the_chain() -> None:
    finding = chained_finding()
    assert Finding.from_json(json.loads(json.dumps(finding.to_json()))) == finding


def test_noqa_row_is_where_a_directive_can_go(tmp_path: Path) -> None:
    source = 'x = f(1, """\nabc\n""")\ny = 1 + \\\n    2\nz = (\n    3)  # a comment\\\n'
    findings = [
        dataclasses.replace(worker_finding(line=line, col=1), path="demo_rl/rows.py", fix=None)
        for line in (1, 2, 4, 5, 6, 7)
    ] + [syntax_finding()]
    report = context(tmp_path, sources={"demo_rl/rows.py": source})
    rows = {
        (item["filename"], item["location"]["row"]): item["noqa_row"]
        for item in json.loads(rendered(findings, "json", report))
    }
    assert rows == {
        ("demo_rl/broken.py", 3): None,  # a syntax error cannot be suppressed
        ("demo_rl/rows.py", 1): 3,  # the line ends inside a string: the statement's last line
        ("demo_rl/rows.py", 2): 3,
        ("demo_rl/rows.py", 4): 5,  # continued with a backslash
        ("demo_rl/rows.py", 5): 5,
        ("demo_rl/rows.py", 6): 6,  # within brackets: the line itself
        ("demo_rl/rows.py", 7): 7,  # a backslash in a comment continues nothing
    }


def fingerprint(result: Any) -> str:
    return str(result["partialFingerprints"]["cachelint/v1"])


def test_sarif_fingerprints_survive_moving_code(tmp_path: Path) -> None:
    before = sarif([worker_finding(line=4)], context(tmp_path))
    after = sarif([worker_finding(line=40)], context(tmp_path))
    (old,) = before["runs"][0]["results"]
    (new,) = after["runs"][0]["results"]
    assert fingerprint(old) == fingerprint(new)
    expected = hashlib.sha256(b"CL001|demo_rl/worker_extension.py|WorkerExtension.update_weights|0").hexdigest()
    assert fingerprint(old) == expected


def test_sarif_fingerprints_count_occurrences_within_a_function(tmp_path: Path) -> None:
    findings = [worker_finding(line=4), worker_finding(line=7), worker_finding(line=7, function="other")]
    results = sarif(findings, context(tmp_path))["runs"][0]["results"]
    prints = [fingerprint(result) for result in results]
    assert len(set(prints)) == 3
    moved = [worker_finding(line=10), worker_finding(line=20), worker_finding(line=2, function="other")]
    moved_results = sarif(moved, context(tmp_path))["runs"][0]["results"]
    assert {fingerprint(result) for result in moved_results} == set(prints)


def test_sarif_without_findings_or_pages(tmp_path: Path, rule_pages: Path) -> None:
    for page in rule_pages.glob("*.md"):
        page.unlink()
    log = sarif([], context(tmp_path))
    assert log["runs"][0]["results"] == []
    assert [rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]] == [
        "invalid-syntax",
        "io-error",
        "internal-error",
    ]


def test_sarif_file_outside_root_gets_an_absolute_uri(tmp_path: Path) -> None:
    outside = tmp_path.parent / "elsewhere.py"
    finding = dataclasses.replace(syntax_finding(), path=str(outside))
    log = sarif([finding], context(tmp_path / "project"))
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": outside.absolute().as_uri()}


# full


def test_full_frame(tmp_path: Path) -> None:
    text = rendered([worker_finding()], "full", context(tmp_path))
    assert text == (
        "demo_rl/worker_extension.py:4:9: CL001 [*] model_runner.reset_encoder_cache() clears only the "
        "worker's encoder cache\n"
        "  |\n"
        "3 |         load_weights(weights)\n"
        "4 |         self.model_runner.reset_encoder_cache()\n"
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ CL001\n"
        "5 |\n"
        "  |\n"
        "  = help: Reset through the engine: `engine.reset_encoder_cache()`\n"
        "\n"
        "Found 1 problem in 1 file.\n"
        "[*] 1 fixable with the --fix option.\n"
    )


def test_full_expands_tabs_under_the_marker(tmp_path: Path) -> None:
    finding = worker_finding(line=7, col=2, function="WorkerExtension.other")
    lines = rendered([finding], "full", context(tmp_path, quiet=True)).splitlines()
    code_line, marker_line = lines[3], lines[4]
    assert code_line == "7 |     self.model_runner.reset_encoder_cache()"
    assert marker_line == "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ CL001"
    assert lines[-2:] == ["  = help: Reset through the engine: `engine.reset_encoder_cache()`", ""]


def test_full_multi_line_span_shows_every_line(tmp_path: Path) -> None:
    text = rendered([rollout_finding()], "full", context(tmp_path, quiet=True))
    assert text == (
        "demo_rl/rollout.py:5:5: CL002 collective_rpc reset, 50% of runs: stale\n"
        "  |\n"
        "4 | def refit(engine):\n"
        "5 |     engine.collective_rpc(\n"
        "  |     ^^^^^^^^^^^^^^^^^^^^^^ CL002\n"
        '6 |         "reset_encoder_cache",\n'
        "7 |     )\n"
        "  |\n"
        "  = help: Call the engine-level reset\n"
        "\n"
    )


def test_full_shows_fixes_as_diffs(tmp_path: Path) -> None:
    text = rendered([worker_finding()], "full", context(tmp_path, show_fixes=True, quiet=True))
    assert (
        "  = fix (safe): Reset the encoder cache through the engine\n"
        "    @@ -3,3 +3,3 @@\n"
        "             load_weights(weights)\n"
        "    -        self.model_runner.reset_encoder_cache()\n"
        "    +        self.engine.reset_encoder_cache()\n"
    ) in text


def test_full_without_source_and_special_codes(tmp_path: Path) -> None:
    internal = Finding("demo_rl/x.py", Span(9, 9, 9, 9), "internal-error", "internal-error", "boom")
    text = rendered([syntax_finding(), internal], "full", context(tmp_path))
    assert text.splitlines() == [
        "demo_rl/broken.py:3:8: SyntaxError: Expected ':'",
        "",
        "demo_rl/x.py:1:1: internal error: boom",
        "",
        "Found 2 problems in 2 files.",
    ]


def test_full_summary_forms(tmp_path: Path) -> None:
    assert rendered([], "full", context(tmp_path)) == "All checks passed!\n"
    assert rendered([], "full", context(tmp_path, fixed_count=2)) == "Fixed 2 problems.\nAll checks passed!\n"
    assert rendered([], "full", context(tmp_path, quiet=True)) == ""
    text = rendered(all_findings(), "full", context(tmp_path, fixed_count=1, unsafe_fixable_hidden=2))
    assert text.endswith(
        "\nFixed 1 problem.\n"
        "Found 3 problems in 3 files.\n"
        "[*] 1 fixable with the --fix option.\n"
        "(2 hidden fixes can be enabled with the --unsafe-fixes option.)\n"
    )


@pytest.mark.parametrize("fmt", ["full", "concise"])
@pytest.mark.parametrize("changes", [{}, {"color": True}, {"quiet": True}, {"statistics": True, "color": True}])
def test_clean_run_prints_what_rich_prints(tmp_path: Path, fmt: str, changes: dict[str, bool]) -> None:
    """A run without findings is reported without importing rich, in the very bytes rich would print."""
    from cachelint.output.concise import render_concise
    from cachelint.output.full import render_full

    report = context(tmp_path, **changes)
    through_rich = io.StringIO()
    (render_full if fmt == "full" else render_concise)([], through_rich, report)
    assert rendered([], fmt, report) == through_rich.getvalue()


ODD = "demo_rl/\u6a21\u578b\tx.py"  # wide characters and a tab in the path
ODD_SOURCE = (
    "def f():\n    \u540d\u524d = 1\t# \u30b3\u30e1\u30f3\u30c8\n    x = '" + "y" * 400 + "' + engine.reset()\n"
)


def odd_findings() -> list[Finding]:
    """Wide characters, tabs and terminal escapes in paths, messages and code; a line too long to show."""
    return [
        Finding(ODD, Span(2, 5, 2, 7), "CL001", "worker-only-cache-reset", "\u540d\u524d\tis \x1b[2Jstale", "a\ttab"),
        Finding(ODD, Span(3, 412, 3, 426), "CL002", "version-gated-reset", "long", "h", notes=("note\u2028two",)),
    ]


@pytest.mark.parametrize("fmt", ["full", "concise"])
@pytest.mark.parametrize(
    "changes",
    [{}, {"show_fixes": True}, {"statistics": True}, {"fixed_count": 1, "unsafe_fixable_hidden": 2}, {"quiet": True}],
)
def test_plain_text_is_what_rich_prints_without_colour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, changes: dict[str, object]
) -> None:
    """Without colour the human formats write their rows' text themselves, byte for byte what rich prints."""
    from cachelint.output import human
    from cachelint.output.concise import render_concise
    from cachelint.output.full import render_full

    findings = [*all_findings(), *odd_findings()]
    report = context(tmp_path, sources={WORKER: WORKER_SOURCE, ROLLOUT: ROLLOUT_SOURCE, ODD: ODD_SOURCE}, **changes)
    written = rendered(findings, fmt, report)

    def through_rich(printer: human.Printer, out: io.StringIO, color: bool) -> None:
        printer.out, printer.console = out, human.make_console(out, color)

    monkeypatch.setattr(human.Printer, "__init__", through_rich)
    printed = io.StringIO()
    (render_full if fmt == "full" else render_concise)(sorted(findings, key=Finding.sort_key), printed, report)
    assert written == printed.getvalue()
    assert "\t" not in written  # expanded, as rich does
    if not changes.get("statistics") and not changes.get("quiet"):
        assert "\u241b[2J" in written  # the escape shown as its control picture


def test_a_run_with_findings_without_colour_does_not_import_rich() -> None:
    """Most runs (CI, hooks, pipes) print without colour, and need no rich."""
    demo = Path(__file__).parents[1] / "fixtures" / "demo"
    script = (
        "import sys\n"
        "from cachelint.cli import main\n"
        "sys.argv = ['cachelint', 'check', '--no-cache', '--show-fixes', sys.argv[1]]\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(sorted(name for name in sys.modules if name.startswith('rich')), file=sys.stderr)\n"
    )
    environment = {name: value for name, value in os.environ.items() if name != "FORCE_COLOR"}
    done = subprocess.run([sys.executable, "-c", script, str(demo)], capture_output=True, text=True, env=environment)
    assert "CL001" in done.stdout
    assert "= fix (" in done.stdout
    assert done.stderr.splitlines()[-1] == "[]"


def test_a_run_without_fixes_does_not_make_the_change_types(tmp_path: Path) -> None:
    """Most commits touch files no rule can flag; making the change dataclasses costs every such run."""
    (tmp_path / "pyproject.toml").write_text("[tool.cachelint]\n")
    (tmp_path / "train.py").write_text("def loss(batch):\n    return batch.mean()\n")
    script = (
        "import sys\n"
        "from cachelint.cli import main\n"
        "sys.argv = ['cachelint', 'check', '--no-cache', sys.argv[1]]\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print('cachelint.finding' in sys.modules, 'cachelint.changes' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "True False"


def test_full_statistics(tmp_path: Path) -> None:
    findings = [*all_findings(), worker_finding(line=7, col=2)]
    assert rendered(findings, "full", context(tmp_path, statistics=True)) == (
        "2  CL001           worker-only-cache-reset  [*]\n"
        "1  CL002           version-gated-reset\n"
        "1  invalid-syntax  invalid-syntax\n"
        "\n"
        "Found 4 problems in 3 files.\n"
        "[*] 2 fixable with the --fix option.\n"
    )


def test_full_in_colour_styles_the_gutter_not_the_code(tmp_path: Path) -> None:
    text = rendered([worker_finding()], "full", context(tmp_path, color=True, quiet=True))
    assert text.splitlines()[:5] == [
        "\x1b[1mdemo_rl/worker_extension.py\x1b[0m\x1b[36m:4:9:\x1b[0m \x1b[1;31mCL001\x1b[0m \x1b[36m[*]\x1b[0m "
        "model_runner.reset_encoder_cache() clears only the worker's encoder cache",
        "\x1b[1;34m  |\x1b[0m",
        "\x1b[1;34m3 |\x1b[0m         load_weights(weights)",
        "\x1b[1;34m4 |\x1b[0m         self.model_runner.reset_encoder_cache()",
        "\x1b[1;34m  |\x1b[0m         \x1b[1;31m^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\x1b[0m\x1b[1;31m CL001\x1b[0m",
    ]


def test_full_colour_only_when_asked(tmp_path: Path) -> None:
    assert "\x1b[" not in rendered(all_findings(), "full", context(tmp_path))
    assert "\x1b[" in rendered(all_findings(), "full", context(tmp_path, color=True))
