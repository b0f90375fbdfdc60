"""One check of every setting: a value the command line refuses is refused with the same words by the
Python API (`Settings`, `cachelint.check`) and by a config file; only the origin in front differs
(`--select`, `Settings: `select``, `<file>: `select``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_runner import check, write_tree

import cachelint
from cachelint import ConfigError, Settings

# flag, its bad value on the command line, the Settings field, the same value as the API takes it, and
# as a config file writes it (TOML).
REFUSED_BY_THE_COMMAND_LINE: list[tuple[str, str, str, Any, str]] = [
    ("--select", "CL999", "select", ("CL999",), '["CL999"]'),
    ("--select", "ALL,cl3", "select", ("ALL", "cl3"), '["ALL", "cl3"]'),
    ("--select", "worker-only-cache-reset", "select", ("worker-only-cache-reset",), '["worker-only-cache-reset"]'),
    ("--extend-select", "C9", "extend_select", ("C9",), '["C9"]'),
    ("--ignore", "NOPE", "ignore", ("NOPE",), '["NOPE"]'),
    ("--vllm", ">=banana", "vllm", ">=banana", '">=banana"'),
    ("--vllm", "<0.5", "vllm", "<0.5", '"<0.5"'),
    ("--sglang", "banana", "sglang", "banana", '"banana"'),
    ("--output-format", "xml", "output_format", "xml", '"xml"'),
]


def cli_problem(tmp_path: Path, flag: str, value: str) -> str:
    result = check(f"{flag}={value}", "--no-cache", cwd=write_tree(tmp_path / "cli", {"a.py": ""}))
    assert (result.code, result.stdout) == (2, "")
    [line] = result.stderr_lines
    prefix = f"cachelint: error: {flag} "
    assert line.startswith(prefix), line
    return line.removeprefix(prefix)


def api_problem(field: str, value: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        Settings(**{field: value})
    prefix = f"Settings: `{field}` "
    assert str(raised.value).startswith(prefix), raised.value
    return str(raised.value).removeprefix(prefix)


@pytest.mark.parametrize(("flag", "value", "field", "api_value", "toml"), REFUSED_BY_THE_COMMAND_LINE)
def test_the_api_and_config_files_refuse_what_the_command_line_refuses(
    tmp_path: Path, flag: str, value: str, field: str, api_value: Any, toml: str
) -> None:
    problem = cli_problem(tmp_path, flag, value)
    assert api_problem(field, api_value) == problem

    key = field.replace("_", "-")
    project = write_tree(tmp_path / "file", {"cachelint.toml": f"{key} = {toml}\n", "a.py": ""})
    result = check("--no-cache", cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr_lines == [f"cachelint: error: {project / 'cachelint.toml'}: `{key}` {problem}"]

    # check() and fix() take the settings as they are: the error comes when they are made, not later.
    with pytest.raises(ConfigError):
        cachelint.check(project, settings=Settings(**{field: api_value}))


@pytest.mark.parametrize("flag", ["--select", "--extend-select", "--ignore"])
def test_an_empty_selector_list_is_refused_only_as_a_flag(tmp_path: Path, flag: str) -> None:
    """`--select "$RULES"` with RULES unset is a mistake; an empty list in `Settings` or a file is not
    (`select = []` with `extend-select` is how ruff users pick rules)."""
    assert cli_problem(tmp_path, flag, " , ") == "holds no rule selector"
    field = flag.removeprefix("--").replace("-", "_")
    assert getattr(Settings(**{field: ()}), field) == ()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("multimodal", "yes", "must be \"auto\", true or false, got 'yes'"),
        ("select", "CL001", "must be a list of rule codes or prefixes, got 'CL001'"),
        ("exclude", ("!",), "must hold gitignore-style patterns, got '!'"),
        (
            "per_file_ignores",
            (("tests/**", ("CL05",)),),
            "holds an unknown rule selector `CL05`; did you mean `CL005`? (for 'tests/**')",
        ),
        (
            "cache_dir",
            "../elsewhere",
            "must be a folder path below the project root, relative to it, got '../elsewhere'",
        ),
        ("refit_functions", ("ok", 3), "must be a list of function names, got ('ok', 3)"),
    ],
)
def test_the_api_refuses_what_a_config_file_refuses(field: str, value: Any, problem: str) -> None:
    assert api_problem(field, value) == problem


def test_good_values_are_kept_as_a_config_file_gives_them() -> None:
    settings = Settings(select=["cl00", "ALL"], per_file_ignores={"tests/**": ["cl001"]}, vllm=">=0.18")  # type: ignore[arg-type]
    assert settings.select == ("CL00", "ALL")
    assert settings.per_file_ignores == (("tests/**", ("CL001",)),)
    assert settings.vllm == ">=0.18"
    assert Settings().select == ("CL",)


def test_every_flag_that_sets_a_setting_is_walked() -> None:
    import dataclasses

    from cachelint.cli import check as check_command

    fields = {item.name for item in dataclasses.fields(Settings)}
    flags = {param.name for param in check_command.params if param.name in fields}
    assert flags == {field for _, _, field, _, _ in REFUSED_BY_THE_COMMAND_LINE}
