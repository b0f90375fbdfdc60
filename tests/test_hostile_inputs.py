"""Odd and hostile inputs to the readers of pins and patterns: requirement files that include
themselves, local version labels and wheel URLs, versions too long to read, patterns git accepts and
pathspec cannot read, and inputs built to make the static readers work without end. Each gives the
right range or a clear message, the documented exit code, and bounded work (the time bounds are
generous: they catch exponential or quadratic work, not speed, which bench/run_bench.py measures)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from cli_runner import cachelint, check, write_tree

import cachelint as api
from cachelint.config import ConfigError, Settings
from cachelint.pins import read_declared
from cachelint.setup_py import MAX_SIZE, read_setup_requirements
from cachelint.vllm_range import SGLANG, VLLM, Distribution, read_supported_range

ENGINE = 'from vllm import LLM\n\nllm = LLM("model")\n'
LONG_VERSION = "1" * 5000  # more digits than Python turns into a number (4,300)


def _range(root: Path, dist: Distribution = VLLM) -> str:
    return read_supported_range(root, dist).label("-")


# -- item 6: includes that come back ---------------------------------------------------------------


def test_a_requirements_file_that_includes_itself_keeps_its_pins(tmp_path: Path) -> None:
    write_tree(tmp_path, {"requirements.txt": "-r requirements.txt\nvllm==0.10.1.1\n", "a.py": ENGINE})
    assert _range(tmp_path) == "0.10.1.1"
    result = check(".", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "Checked for vLLM 0.10.1.1 (requirements.txt)" in result.stdout
    assert "no vLLM pin found" not in result.stderr


def test_a_cycle_included_from_a_third_file_is_read_once_within_it(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "requirements-a.txt": "-r requirements-b.txt\nvllm>=0.20\n",
            "requirements-b.txt": "-r requirements-a.txt\nvllm<0.21\n",
            "requirements.txt": "-r requirements-a.txt\n",
        },
    )
    declared = read_declared(tmp_path)
    # One alternative: requirements.txt with both files' pins (a and b are not alternatives of their own).
    assert [sorted(pin.requirement for pin in alternative) for alternative in declared.alternatives] == [
        ["vllm<0.21", "vllm>=0.20"]
    ]
    assert _range(tmp_path) == "0.20.0-0.20.2"


def test_a_dependency_group_that_includes_itself_keeps_its_pins(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pyproject.toml": '[project]\nname = "x"\n[dependency-groups]\n'
            'a = ["vllm==0.10.1.1", {include-group = "a"}, {include-group = "b"}]\n'
            'b = [{include-group = "a"}]\n',
        },
    )
    assert _range(tmp_path) == "0.10.1.1"


# -- item 7: local version labels and wheel URLs -------------------------------------------------------

WHEEL = "https://github.com/vllm-project/vllm/releases/download/v0.10.1.1/vllm-0.10.1.1+cu126-cp38-abi3-manylinux1_x86_64.whl"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("vllm==0.19.0+cu121", "0.19.0"),
        ("vllm==0.19.0+cu121 ; sys_platform == 'linux'", "0.19.0"),
        ("vllm>=0.18,==0.19.0+rocm631", "0.19.0"),
        (WHEEL, "0.10.1.1"),
        (f"vllm @ {WHEEL}", "0.10.1.1"),
        (f"vllm @ {WHEEL} ; python_version >= '3.9'", "0.10.1.1"),
    ],
)
def test_a_build_of_a_release_is_that_release(tmp_path: Path, line: str, expected: str) -> None:
    write_tree(tmp_path, {"requirements.txt": line + "\n", "a.py": ENGINE})
    assert _range(tmp_path) == expected
    result = check(".", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert f"Checked for vLLM {expected} (requirements.txt)" in result.stdout


def test_excluding_a_build_does_not_exclude_the_release(tmp_path: Path) -> None:
    write_tree(tmp_path, {"requirements.txt": "vllm>=0.19,<0.20,!=0.19.0+cu121\n"})
    assert _range(tmp_path) == "0.19.0-0.19.1"


@pytest.mark.parametrize(
    "line",
    [
        "sglang[all]==0.4.6.post1+cu124",
        "https://example.org/wheels/sglang-0.4.6.post1+cu124-py3-none-any.whl",
        "sglang @ https://example.org/wheels/sglang-0.4.6.post1+cu124-py3-none-any.whl",
    ],
)
def test_a_build_of_an_sglang_release_is_that_release(tmp_path: Path, line: str) -> None:
    write_tree(tmp_path, {"requirements.txt": line + "\n"})
    assert _range(tmp_path, SGLANG) == "0.4.6.post1"


# -- item 11: versions too long to read ---------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        f"vllm=={LONG_VERSION}",
        f"vllm>=0.10,<{LONG_VERSION}",
        f"vllm @ https://example.org/vllm-{LONG_VERSION}-py3-none-any.whl",
    ],
)
def test_a_version_too_long_to_read_is_an_unreadable_pin(tmp_path: Path, line: str) -> None:
    write_tree(tmp_path, {"requirements.txt": line + "\n", "a.py": ENGINE})
    supported = read_supported_range(tmp_path)
    assert supported.releases[0].public == "0.6.0"  # every known release: the pin says nothing readable
    result = check(".", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "internal error" not in result.stderr
    assert "cannot tell which vLLM release" in result.stderr or "no vLLM pin found" in result.stderr
    assert all(len(line) < 1000 for line in result.stderr_lines)


def test_a_version_too_long_to_read_in_the_settings_is_a_config_error(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.py": ENGINE})
    given = check("--vllm", f"=={LONG_VERSION}", ".", cwd=tmp_path)
    assert given.code == 2
    assert "--vllm must be a version specifier" in given.stderr
    assert "internal error" not in given.stderr
    write_tree(tmp_path, {"pyproject.toml": f'[tool.cachelint]\nvllm = "=={LONG_VERSION}"\n'})
    configured = check(".", cwd=tmp_path)
    assert configured.code == 2
    assert "`vllm` must be a version specifier" in configured.stderr
    assert all(len(line) < 1000 for line in given.stderr_lines + configured.stderr_lines)
    assert "internal error" not in configured.stderr
    with pytest.raises(ConfigError, match="`vllm`"):
        api.check(tmp_path, cache=False)


# -- item 10: patterns pathspec cannot read -------------------------------------------------------------

UNREADABLE_PATTERNS = ["[z-a]", "!", "\\", "[[:foo:]]"]


def test_unreadable_gitignore_lines_are_ignored_with_one_warning_each(tmp_path: Path) -> None:
    lines = [*UNREADABLE_PATTERNS, "skipped.py"]
    write_tree(
        tmp_path,
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".gitignore": "\n".join(lines) + "\n",
            "sub/.gitignore": "[z-a]\n",
            "a.py": ENGINE,
            "skipped.py": ENGINE,
            "sub/b.py": ENGINE,
        },
    )
    result = cachelint("check", "--no-cache", ".", cwd=tmp_path, env={"PYTHONWARNINGS": "always"})
    assert result.code == 0, result.stderr
    assert "Warning" not in result.stderr  # no raw FutureWarning
    for pattern in UNREADABLE_PATTERNS:
        warning = (
            f"cachelint: warning: .gitignore: `{pattern}` is not a pattern cachelint can read: the line is ignored"
        )
        assert result.stderr_lines.count(warning) == 1
    assert "cachelint: warning: sub/.gitignore: `[z-a]` is not a pattern cachelint can read" in result.stderr
    found = api.check(tmp_path, cache=False)
    assert found.files_checked == 2  # a.py and sub/b.py: the readable line `skipped.py` still holds
    assert any("`[z-a]` is not a pattern cachelint can read" in warning for warning in found.warnings)


@pytest.mark.parametrize("pattern", UNREADABLE_PATTERNS)
@pytest.mark.parametrize("key", ["exclude", "extend-exclude", "per-file-ignores"])
def test_an_unreadable_pattern_in_the_settings_is_a_config_error(tmp_path: Path, key: str, pattern: str) -> None:
    quoted = '"' + pattern.replace("\\", "\\\\") + '"'
    value = f'{{{quoted} = ["CL001"]}}' if key == "per-file-ignores" else f"[{quoted}]"
    write_tree(tmp_path, {"pyproject.toml": f"[tool.cachelint]\n{key} = {value}\n", "a.py": ENGINE})
    for command in (["check", "."], ["check", "--show-settings", "."], ["clean", "."]):
        result = cachelint(*command, cwd=tmp_path, env={"PYTHONWARNINGS": "always"})
        assert result.code == 2, (command, result.stderr)
        assert f"`{key}` must hold gitignore-style patterns" in result.stderr
        assert "internal error" not in result.stderr and "Warning" not in result.stderr
    with pytest.raises(ConfigError, match=f"`{key}`"):
        api.check(tmp_path, cache=False)


@pytest.mark.parametrize("field", ["exclude", "per_file_ignores"])
def test_an_unreadable_pattern_in_api_settings_is_a_config_error(tmp_path: Path, field: str) -> None:
    write_tree(tmp_path, {"a.py": ENGINE + "llm.collective_rpc('reset_encoder_cache')\n"})
    value = (("[z-a]", ("CL",)),) if field == "per_file_ignores" else ("[z-a]",)
    with pytest.raises(ConfigError, match="must hold gitignore-style patterns, got '\\[z-a\\]'"):
        api.check(tmp_path, settings=Settings(**{field: value}), cache=False)  # type: ignore[arg-type]


# -- item 9: bounded work -----------------------------------------------------------------------------

BOUND = 20.0  # seconds: linear work on these inputs takes well under one on a loaded machine


T = TypeVar("T")


def _timed(run: Callable[[], T]) -> T:
    started = time.perf_counter()
    value = run()
    assert time.perf_counter() - started < BOUND
    return value


@pytest.mark.parametrize(
    "body",
    [
        'a = "vllm>=0.10 "\n' + "a = a + a\n" * 64,
        'a = ["vllm>=0.10"]\n' + "a = a + a\n" * 64,
        'a = ["vllm>=0.10"]\n' + "a += a\n" * 64,
        'a = ["vllm>=0.10"]\n' + "a.extend(a)\n" * 64,
        'a = ["vllm>=0.10"]\nb = a\n' + "a += b\nb += a\n" * 32,
        'a = "x"\n' + 'a = f"{a}{a}"\n' * 64,
        'a = {"vllm": ["vllm>=0.10"]}\n' + "a = {**a, **a}\n" * 64 + 'a["vllm"] += a["vllm"]\n' * 64,
    ],
)
def test_setup_py_evaluation_is_bounded(tmp_path: Path, body: str) -> None:
    source = "from setuptools import setup\n" + body + "setup(install_requires=a, extras_require=a)\n"
    found = _timed(lambda: read_setup_requirements(source.encode()))
    assert found is not None
    assert all(len(item) <= MAX_SIZE for item in found.install_requires)
    assert len(found.install_requires) <= MAX_SIZE
    assert found.unread  # what could not be read is said


def test_setup_py_past_the_bounds_says_what_was_not_read(tmp_path: Path) -> None:
    source = 'from setuptools import setup\na = ["vllm>=0.10"]\n' + "a = a + a\n" * 64 + "setup(install_requires=a)\n"
    write_tree(tmp_path, {"setup.py": source, "a.py": ENGINE})
    result = _timed(lambda: check("--no-cache", ".", cwd=tmp_path))
    assert result.code == 0, result.stderr
    assert (
        "setup.py: values of more than 100,000 items or characters cannot be read without running it" in result.stderr
    )


def test_setup_py_within_the_bounds_is_read_whole() -> None:
    source = 'from setuptools import setup\na = ["vllm>=0.10"]\n' + "a = a + a\n" * 16 + "setup(install_requires=a)\n"
    found = read_setup_requirements(source.encode())
    assert found is not None
    assert len(found.install_requires) == 2**16
    assert found.unread == []


def test_a_chain_of_requirement_files_each_included_twice_is_read_once_each(tmp_path: Path) -> None:
    twice = "-r r{0:02d}.txt\n-r r{0:02d}.txt\n"
    files: dict[str, str | bytes] = {f"requirements/r{index:02d}.txt": twice.format(index + 1) for index in range(17)}
    files["requirements/r17.txt"] = "vllm>=0.20,<0.21\n"
    files["requirements.txt"] = "-r requirements/r00.txt\n-c requirements/r00.txt\n"
    files["a.py"] = ENGINE
    write_tree(tmp_path, files)
    assert _timed(lambda: _range(tmp_path)) == "0.20.0-0.20.2"
    result = _timed(lambda: check("--no-cache", ".", cwd=tmp_path))
    assert result.code == 0, result.stderr
    assert "Checked for vLLM 0.20.0\N{EN DASH}0.20.2" in result.stdout


def test_a_chain_of_dependency_groups_each_included_twice_is_bounded(tmp_path: Path) -> None:
    groups = "".join(
        f'g{index} = [{{include-group = "g{index + 1}"}}, {{include-group = "g{index + 1}"}}]\n' for index in range(40)
    )
    write_tree(
        tmp_path, {"pyproject.toml": f'[project]\nname = "x"\n[dependency-groups]\n{groups}g40 = ["vllm==0.20.1"]\n'}
    )
    assert _timed(lambda: _range(tmp_path)) == "0.20.1"


def test_includes_nested_too_deep_are_not_read_and_said(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {f"requirements/r{i:03d}.txt": f"-r r{i + 1:03d}.txt\n" for i in range(150)}
    files["requirements/r150.txt"] = "vllm==0.20.1\n"
    files["requirements.txt"] = "-r requirements/r000.txt\n"
    write_tree(tmp_path, files)
    declared = _timed(lambda: read_declared(tmp_path))
    assert any("included more than 100 files deep" in note for note in declared.unread)


@pytest.mark.parametrize(
    "lines",
    [
        ["vllm>=0.10\n"] * 65536,
        [f"vllm!=0.5.{index}\n" for index in range(65536)],
        [
            f'vllm>=0.{index % 10} ; python_version > "3.{index}"\n' if index % 2 else "vllm<0.30\n"
            for index in range(65536)
        ],
    ],
    ids=["same", "distinct", "marked"],
)
def test_64k_pins_are_read_in_bounded_time(tmp_path: Path, lines: list[str]) -> None:
    write_tree(tmp_path, {"requirements.txt": "".join(lines), "a.py": ENGINE})
    supported = _timed(lambda: read_supported_range(tmp_path))
    assert supported.releases
    result = _timed(lambda: check("--no-cache", ".", cwd=tmp_path))
    assert result.code == 0, result.stderr
    assert "internal error" not in result.stderr
