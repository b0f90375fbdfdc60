"""`cachelint rules` as a table and piped, shell completion, the `--fix` summary of the machine formats,
SARIF's pin files located as its results are, and CL002's messages naming only supported releases."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from cli_runner import DEMO, cachelint, check
from fixture_cases import analyze_case, rule_cases

from cachelint.rules import ALL_RULES


def test_rules_piped_is_one_unpadded_line_per_rule() -> None:
    result = cachelint("rules", cwd=DEMO, env={"COLUMNS": ""})
    assert result.code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 1 + len(ALL_RULES)
    assert lines[0].split() == ["Code", "Name", "Fix", "Summary"]
    for line, rule in zip(lines[1:], ALL_RULES, strict=True):
        assert line == line.rstrip()
        assert line.startswith(rule.info.code + "  ")
        assert line.endswith(rule.info.summary)


def test_rules_wraps_to_columns() -> None:
    result = cachelint("rules", cwd=DEMO, env={"COLUMNS": "80"})
    assert result.code == 0
    lines = result.stdout.splitlines()
    assert len(lines) > 1 + len(ALL_RULES)  # summaries wrapped
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines)


def test_the_fix_column_names_the_kinds_of_fix_each_rule_makes() -> None:
    """The kinds each rule declares are exactly those its fix fixtures produce (a suggestion shown but
    never applied is not a kind of fix)."""
    made: dict[str, set[str]] = defaultdict(set)
    for case in rule_cases():
        for finding in analyze_case(case).findings:
            if finding.code == case.code and finding.fix is not None and finding.fix.applicability.value != "display":
                made[finding.code].add(finding.fix.applicability.value)
    for rule in ALL_RULES:
        info = rule.info
        if info.code in made:
            assert set(info.fix_kinds) == made[info.code], info.code
        assert (info.fixable == "never") == (not info.fix_kinds), info.code
        assert info.fix_column == (f"{info.fixable} ({' or '.join(info.fix_kinds)})" if info.fix_kinds else "never")
    shown = cachelint("rules", cwd=DEMO, env={"COLUMNS": ""}).stdout
    assert "sometimes (safe or unsafe)" in shown and "always (safe)" in shown


def test_shell_completion_offers_commands_and_formats() -> None:
    """The completion the docs describe: click's, through `_CACHELINT_COMPLETE`."""
    script = cachelint(cwd=DEMO, env={"_CACHELINT_COMPLETE": "bash_source"})
    assert script.code == 0
    assert "_cachelint_completion" in script.stdout and "complete " in script.stdout
    for shell in ("zsh", "fish"):
        sourced = cachelint(cwd=DEMO, env={"_CACHELINT_COMPLETE": f"{shell}_source"})
        assert sourced.code == 0 and "_cachelint_completion" in sourced.stdout, shell
    words = {
        "COMP_WORDS": "cachelint check --output-format ",
        "COMP_CWORD": "3",
        "_CACHELINT_COMPLETE": "bash_complete",
    }
    offered = cachelint(cwd=DEMO, env=words).stdout.split()
    assert {"plain,gitlab", "plain,junit", "plain,sarif"} <= set(offered)
    commands = cachelint(cwd=DEMO, env={**words, "COMP_WORDS": "cachelint ", "COMP_CWORD": "1"}).stdout.split()
    assert {"plain,check", "plain,rules", "plain,server"} <= set(commands)


@pytest.mark.parametrize("fmt", ["json", "sarif", "gitlab"])
def test_fix_with_a_machine_format_says_how_many_it_fixed_on_stderr(tmp_path: Path, fmt: str) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo, ignore=shutil.ignore_patterns("__pycache__", ".cachelint_cache"))
    result = check("--isolated", "--no-cache", "--fix", "--output-format", fmt, cwd=demo)
    assert result.code == 1
    json.loads(result.stdout)  # the report alone on stdout
    assert result.stderr_lines[-1] == "Fixed 1 problem."
    quiet = check("--isolated", "--no-cache", "--fix", "--quiet", "--output-format", fmt, cwd=demo)
    assert quiet.stderr == ""


def test_sarif_pin_files_are_under_the_root_the_results_are(tmp_path: Path) -> None:
    """Run from a folder inside the project: paths relative to the working folder would differ."""
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo, ignore=shutil.ignore_patterns("__pycache__", ".cachelint_cache"))
    sarif = json.loads(check("--isolated", "--output-format", "sarif", "..", cwd=demo / "demo_rl").stdout)
    run = sarif["runs"][0]
    [project] = run["properties"]["supportedVllm"]
    [pin] = project["pins"]
    assert pin["file"] == {"uri": "pyproject.toml", "uriBaseId": "%SRCROOT%"}
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"


def test_cl002_names_only_supported_releases(tmp_path: Path) -> None:
    """The demo's gate (`>= 0.17.0` for a method AsyncLLM has since 0.16.0) skips the reset on 0.16.x:
    said where 0.16 is supported, not for a project on 0.22 and later."""

    def message(*flags: str) -> str:
        result = check("--isolated", "--no-cache", "--select", "CL002", "--output-format", "json", *flags, cwd=DEMO)
        [finding] = json.loads(result.stdout)
        return str(finding["message"])

    assert "skips the reset on 0.16.x" in message()
    newer = message("--vllm", ">=0.22")
    assert "0.16.x" not in newer
    assert newer.endswith(
        f"but AsyncLLM has had it since 0.16.0; every supported release has it (vLLM 0.22.0-{newer.rsplit('-', 1)[1]}"
    )


def test_the_documented_rules_table_has_each_rule_s_fix_column() -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "rules.md").read_text(encoding="utf-8")
    for rule in ALL_RULES:
        info = rule.info
        assert f"| {info.code} | {info.name} | {info.fix_column} |" in readme, info.code
