"""Configuration through the real command line: which file is found, what it changes, how flags override
it, and the one-line errors (exit 2, file + key + what was expected, never a traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import check, tiny_project, write_tree

FOUND = "tiny_rl/worker.py:4:9: CL001 "
PASSED = "All checks passed!\n"
KNOWN_KEYS = (
    "cache-dir, exclude, extend-exclude, extend-refit-functions, extend-select, ignore, multimodal, "
    "output-format, per-file-ignores, refit-functions, select, sglang, version-helpers, vllm, worker-extension-classes"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return tiny_project(tmp_path / "tiny")


def concise(*args: str, cwd: Path) -> tuple[int, str]:
    result = check("--output-format", "concise", "--quiet", *args, cwd=cwd)
    assert result.stderr == ""
    return result.code, result.stdout


def with_tool_table(project: Path, body: str) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + f"\n[tool.cachelint]\n{body}\n", encoding="utf-8")


# ---------------------------------------------------------------- finding the file


def test_without_config_the_finding_is_reported(project: Path) -> None:
    code, stdout = concise(cwd=project)
    assert code == 1
    assert stdout.startswith(FOUND)


def test_pyproject_tool_table(project: Path) -> None:
    with_tool_table(project, 'ignore = ["CL001"]')
    assert concise(cwd=project) == (0, "")


@pytest.mark.parametrize("name", ["cachelint.toml", ".cachelint.toml"])
def test_dedicated_files(project: Path, name: str) -> None:
    write_tree(project, {name: 'ignore = ["CL001"]\n'})
    assert concise(cwd=project) == (0, "")


def test_found_upward_from_each_checked_file_not_the_working_directory(tmp_path: Path, project: Path) -> None:
    write_tree(project, {"tiny_rl/cachelint.toml": 'ignore = ["CL001"]\n'})
    assert concise("tiny/tiny_rl/worker.py", cwd=tmp_path) == (0, "")
    # Each file takes the configuration nearest to it, whatever the first path is (as ruff does) ...
    assert concise("pyproject.toml", "tiny_rl/worker.py", cwd=project) == (0, "")
    assert concise(".", cwd=project) == (0, "")
    # ... and a file beside a folder is not covered by the folder's.
    write_tree(project, {"tiny_rl/cachelint.toml": "", "tiny_rl/sub/cachelint.toml": 'ignore = ["CL001"]\n'})
    code, stdout = concise("tiny_rl/sub", "tiny_rl/worker.py", cwd=project)
    assert code == 1
    assert stdout.startswith(FOUND)


def test_a_pyproject_without_the_table_is_skipped(tmp_path: Path) -> None:
    # The project's own pyproject.toml has no [tool.cachelint]; the monorepo's cachelint.toml above applies.
    project = tiny_project(tmp_path / "repo" / "tiny")
    write_tree(tmp_path / "repo", {"cachelint.toml": 'ignore = ["CL001"]\n'})
    assert concise(cwd=project) == (0, "")


def test_the_nearest_file_wins(tmp_path: Path) -> None:
    project = tiny_project(tmp_path / "repo" / "tiny")
    write_tree(tmp_path / "repo", {"cachelint.toml": 'ignore = ["CL001"]\n'})
    write_tree(project, {".cachelint.toml": 'select = ["CL"]\n'})
    assert concise(cwd=project)[0] == 1


@pytest.mark.parametrize(
    ("files", "winner"),
    [
        ({".cachelint.toml": "", "cachelint.toml": "", "pyproject.toml": ""}, ".cachelint.toml"),
        ({"cachelint.toml": "", "pyproject.toml": ""}, "cachelint.toml"),
        ({"pyproject.toml": ""}, "pyproject.toml"),
    ],
)
def test_order_within_one_folder(project: Path, files: dict[str, str], winner: str) -> None:
    for name in files:
        if name == "pyproject.toml":
            with_tool_table(project, 'output-format = "json"')
        else:
            write_tree(project, {name: 'output-format = "json"\n'})
    result = check("--show-settings", cwd=project)
    assert result.code == 0
    assert json.loads(result.stdout)["config-path"] == str(project / winner)


def test_explicit_config(tmp_path: Path, project: Path) -> None:
    write_tree(tmp_path, {"shared/lint.toml": 'ignore = ["CL001"]\n'})
    write_tree(project, {"cachelint.toml": 'select = ["CL"]\n'})
    assert concise("--config", "../shared/lint.toml", cwd=project) == (0, "")


def test_isolated_ignores_every_file(project: Path) -> None:
    write_tree(project, {"cachelint.toml": 'ignore = ["CL001"]\n'})
    assert concise(cwd=project) == (0, "")
    code, stdout = concise("--isolated", cwd=project)
    assert code == 1
    assert stdout.startswith(FOUND)
    shown = json.loads(check("--show-settings", "--isolated", cwd=project).stdout)
    assert (shown["config-path"], shown["ignore"]) == (None, [])


# ---------------------------------------------------------------- what the keys do, and flags over them


def test_per_file_ignores(project: Path) -> None:
    write_tree(project, {"cachelint.toml": '[per-file-ignores]\n"tiny_rl/work*.py" = ["CL001"]\n'})
    assert concise(cwd=project) == (0, "")
    write_tree(project, {"cachelint.toml": '[per-file-ignores]\n"tests/*.py" = ["CL001"]\n'})
    assert concise(cwd=project)[0] == 1


@pytest.mark.parametrize("key", ["exclude", "extend-exclude"])
def test_excludes(project: Path, key: str) -> None:
    write_tree(project, {"cachelint.toml": f'{key} = ["tiny_rl/worker.py"]\n'})
    assert concise(cwd=project) == (0, "")
    # A file named on the command line is checked anyway, unless --force-exclude (what pre-commit passes).
    assert concise("tiny_rl/worker.py", cwd=project)[0] == 1
    assert concise("tiny_rl/worker.py", "--force-exclude", cwd=project) == (0, "")


def test_select_from_the_file_and_from_the_flag(project: Path) -> None:
    write_tree(project, {"cachelint.toml": 'select = ["CL002"]\n'})
    assert concise(cwd=project) == (0, "")
    code, stdout = concise("--select", "CL001", cwd=project)
    assert code == 1
    assert stdout.startswith(FOUND)


def test_output_format_from_the_file_and_from_the_flag(project: Path) -> None:
    write_tree(project, {"cachelint.toml": 'output-format = "json-lines"\n'})
    result = check(cwd=project)
    assert result.code == 1
    assert json.loads(result.stdout)["code"] == "CL001"
    result = check("--output-format", "concise", "--quiet", cwd=project)
    assert result.stdout.startswith(FOUND)


def test_vllm_from_the_file_and_from_the_flag(project: Path) -> None:
    write_tree(project, {"cachelint.toml": 'vllm = ">=0.20"\nrefit-functions = ["push"]\n'})
    shown = json.loads(check("--show-settings", "--vllm", "==0.19.1", cwd=project).stdout)
    assert (shown["vllm"], shown["refit-functions"]) == ("==0.19.1", ["push"])


# ---------------------------------------------------------------- rule selectors


@pytest.mark.parametrize(
    "table",
    ['select = ["ALL"]', 'select = ["all"]', 'select = ["cl001"]', 'select = ["Cl00"]', 'extend-select = ["ALL"]'],
)
def test_selectors_in_the_file_are_case_insensitive_and_all_means_every_rule(project: Path, table: str) -> None:
    write_tree(project, {"cachelint.toml": (table if table.startswith("select") else "select = []\n" + table) + "\n"})
    code, stdout = concise(cwd=project)
    assert code == 1
    assert stdout.startswith(FOUND)


@pytest.mark.parametrize("flag", ["--select", "--extend-select"])
@pytest.mark.parametrize("value", ["ALL", "all", "cl001", "CL0", "CL00", "cl"])
def test_selectors_on_the_command_line(project: Path, flag: str, value: str) -> None:
    write_tree(project, {"cachelint.toml": 'select = ["CL002"]\n'})
    code, stdout = concise(flag, value, cwd=project)
    assert code == 1
    assert stdout.startswith(FOUND)


def test_selectors_are_shown_upper_case_wherever_they_came_from(project: Path) -> None:
    write_tree(
        project,
        {"cachelint.toml": 'select = ["all"]\nextend-select = ["cl1"]\n[per-file-ignores]\n"t/*" = ["cl00", "all"]\n'},
    )
    shown = json.loads(check("--show-settings", "--ignore", "cl002,Cl003", cwd=project).stdout)
    assert shown["select"] == ["ALL"]
    assert shown["extend-select"] == ["CL1"]
    assert shown["ignore"] == ["CL002", "CL003"]
    assert shown["per-file-ignores"] == {"t/*": ["CL00", "ALL"]}


@pytest.mark.parametrize(
    ("table", "flags", "reported"),
    [
        ('select = ["ALL"]\nignore = ["cl001"]', [], False),  # case folded in ignore too
        ('select = ["CL"]\nignore = ["ALL"]', [], False),  # every rule is a CL rule: ALL is as specific as CL
        ('select = ["CL001"]\nignore = ["ALL"]', [], True),
        ('select = ["ALL"]\nignore = ["CL"]', [], False),
        ("", ["--ignore", "ALL"], False),
        ("", ["--ignore", "all", "--extend-select", "CL001"], True),
        ('[per-file-ignores]\n"tiny_rl/*" = ["ALL"]', [], False),
        ('[per-file-ignores]\n"tiny_rl/*" = ["cl001"]', [], False),
    ],
)
def test_all_and_case_in_select_ignore_and_per_file_ignores(
    project: Path, table: str, flags: list[str], reported: bool
) -> None:
    write_tree(project, {"cachelint.toml": table + "\n"})
    code, stdout = concise(*flags, cwd=project)
    assert (code, stdout.startswith(FOUND)) == ((1, True) if reported else (0, False))


SELECTOR_ERRORS = {
    "unknown code, close to a rule": (
        'select = ["CL999"]',
        "`select` holds an unknown rule selector `CL999`; did you mean `CL009`?",
    ),
    "lower-case unknown code": (
        'extend-select = ["cl999"]',
        "`extend-select` holds an unknown rule selector `cl999`; did you mean `CL009`?",
    ),
    "nothing close": (
        'ignore = ["NOPE"]',
        "`ignore` holds an unknown rule selector `NOPE` (expected `ALL`, `CL`, a rule code such as `CL001` "
        "or a prefix of one; `cachelint rules` lists them)",
    ),
    "a letter short of the linter": (
        'select = ["C"]',
        "`select` holds an unknown rule selector `C`; did you mean `CL`?",
    ),
    "empty": (
        'select = [""]',
        "`select` holds an unknown rule selector `` (expected `ALL`, `CL`, a rule code such as `CL001` "
        "or a prefix of one; `cachelint rules` lists them)",
    ),
    "a rule name": (
        'select = ["worker-only-cache-reset"]',
        "`select` holds an unknown rule selector `worker-only-cache-reset` (expected `ALL`, `CL`, a rule code such as "
        "`CL001` or a prefix of one; `cachelint rules` lists them)",
    ),
    "per-file-ignores": (
        '[per-file-ignores]\n"tests/**" = ["CL001", "CL05"]',
        "`per-file-ignores` holds an unknown rule selector `CL05`; did you mean `CL005`? (for 'tests/**')",
    ),
}


@pytest.mark.parametrize(("table", "message"), SELECTOR_ERRORS.values(), ids=SELECTOR_ERRORS.keys())
def test_unknown_selectors_in_the_file_are_errors(project: Path, table: str, message: str) -> None:
    write_tree(project, {"cachelint.toml": table + "\n"})
    result = check(cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr_lines == [f"cachelint: error: {project / 'cachelint.toml'}: {message}"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--select", "ALL,CL999"], "--select holds an unknown rule selector `CL999`; did you mean `CL009`?"),
        (["--extend-select", "CL1,cl3"], "--extend-select holds an unknown rule selector `cl3`; did you mean `CL`?"),
        (
            ["--ignore", "NOPE"],
            "--ignore holds an unknown rule selector `NOPE` (expected `ALL`, `CL`, a rule code such as "
            "`CL001` or a prefix of one; `cachelint rules` lists them)",
        ),
        (["--select", ""], "--select holds no rule selector"),
        (["--ignore", " , "], "--ignore holds no rule selector"),
    ],
)
def test_unknown_selectors_on_the_command_line_are_errors(project: Path, flags: list[str], message: str) -> None:
    result = check(*flags, cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr_lines == [f"cachelint: error: {message}"]


def test_every_rule_code_and_prefix_is_a_valid_selector() -> None:
    from cachelint.config import validate_selectors
    from cachelint.rules import ALL_RULES

    codes = [rule.info.code for rule in ALL_RULES]
    prefixes = sorted({code[:end] for code in codes for end in range(2, len(code) + 1)})
    assert validate_selectors([*prefixes, "ALL"], "test") == (*prefixes, "ALL")
    assert validate_selectors([code.lower() for code in codes], "test") == tuple(codes)


# ---------------------------------------------------------------- errors


ERRORS = {
    "unknown key, close to a known one": (
        "pyproject.toml",
        '[tool.cachelint]\nselct = ["CL"]\n',
        "{file}: unknown key `selct` in [tool.cachelint]; did you mean `select`?",
    ),
    "unknown key": (
        "cachelint.toml",
        "colour = true\n",
        f"{{file}}: unknown key `colour` at the top level (known keys: {KNOWN_KEYS})",
    ),
    "tool table in a dedicated file": (
        ".cachelint.toml",
        '[tool.cachelint]\nselect = ["CL"]\n',
        "{file}: unknown key `tool` at the top level (.cachelint.toml takes the settings at the top level, "
        "without [tool.cachelint])",
    ),
    "string for a list": (
        "cachelint.toml",
        'select = "CL001"\n',
        "{file}: `select` must be a list of rule codes or prefixes, got 'CL001'",
    ),
    "list for a table": (
        "cachelint.toml",
        'per-file-ignores = ["tests/*"]\n',
        "{file}: `per-file-ignores` must be a table of glob = [codes], got ['tests/*']",
    ),
    "neither auto nor a boolean": (
        "pyproject.toml",
        '[tool.cachelint]\nmultimodal = "yes"\n',
        "{file}: `multimodal` must be \"auto\", true or false, got 'yes'",
    ),
    "unknown output format": (
        "cachelint.toml",
        'output-format = "xml"\n',
        "{file}: `output-format` must be one of full, concise, json, json-lines, sarif, github, gitlab, junit, "
        "got 'xml'",
    ),
    "bad vllm specifier": (
        "cachelint.toml",
        'vllm = ">=banana"\n',
        "{file}: `vllm` must be a version specifier string such as \">=0.18\", got '>=banana'",
    ),
    "number for vllm": (
        "cachelint.toml",
        "vllm = 0.18\n",
        '{file}: `vllm` must be a version specifier string such as ">=0.18", got 0.18',
    ),
    "tool.cachelint not a table": (
        "pyproject.toml",
        "[tool]\ncachelint = 3\n",
        "{file}: [tool.cachelint] must be a table",
    ),
}


@pytest.mark.parametrize(("name", "content", "message"), ERRORS.values(), ids=ERRORS.keys())
def test_config_errors(tmp_path: Path, name: str, content: str, message: str) -> None:
    project = write_tree(tmp_path / "p", {name: content, "a.py": "x = 1\n"})
    result = check("a.py", cwd=project)
    assert result.code == 2
    assert result.stderr_lines == ["cachelint: error: " + message.format(file=project / name)]
    assert result.stdout == ""


def test_invalid_toml(tmp_path: Path) -> None:
    project = write_tree(tmp_path / "p", {"cachelint.toml": 'select = ["CL"]\nignore = \n', "a.py": "x = 1\n"})
    result = check("a.py", cwd=project)
    assert result.code == 2
    [line] = result.stderr_lines
    assert line.startswith(f"cachelint: error: {project / 'cachelint.toml'}: invalid TOML: ")
    assert "line 2" in line
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("where", ["nowhere.toml", "missing/cachelint.toml", "."])
def test_config_that_is_not_a_file(project: Path, where: str) -> None:
    result = check("--config", where, cwd=project)
    assert result.code == 2
    assert result.stderr_lines == [f"cachelint: error: {where}: config file not found"]


def test_errors_come_before_any_output_even_for_show_settings(project: Path) -> None:
    write_tree(project, {"cachelint.toml": "select = 1\n"})
    result = check("--show-settings", cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr_lines == [
        f"cachelint: error: {project / 'cachelint.toml'}: `select` must be a list of rule codes or prefixes, got 1"
    ]


# ---------------------------------------------------------------- the README's reference stays true

CONFIGURATION_PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def readme_section(title: str) -> str:
    """The section `title` of the configuration page."""
    text = CONFIGURATION_PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_readme_documents_every_key() -> None:
    from cachelint.config import _KEYS

    section = readme_section("Configuration")
    documented = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    assert documented == set(_KEYS)


def test_readme_example_configuration_is_valid(tmp_path: Path) -> None:
    section = readme_section("Configuration")
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    project = tiny_project(tmp_path / "tiny")
    write_tree(project, {"pyproject.toml": project.joinpath("pyproject.toml").read_text() + "\n" + example})
    result = check("--show-settings", cwd=project)
    assert result.code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["ignore"] == ["CL004"]
    assert shown["per-file-ignores"] == {"tests/**": ["CL001", "CL003"]}
