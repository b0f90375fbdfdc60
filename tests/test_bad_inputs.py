"""Bad inputs: odd, broken and hostile files, paths, configs and failing writes, through the real CLI.

Every case must end with a clear message, the documented exit code (0 clean, 1 findings, 2 error)
and never a traceback. Faults the file system cannot be made to produce here (a full disk, a write
racing the fixer) are injected into a real `cachelint` process by `run_patched`.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Result, check, environment, write_tree
from fixture_cases import FIXTURES

from cachelint.config import Settings
from cachelint.engine import analyze
from cachelint.facts import load_facts

PYPROJECT = '[project]\nname = "bad-inputs"\ndependencies = ["vllm>=0.18,<=0.33.0"]\n'

# One CL001 finding on line 10 (column 15), fixed with --unsafe-fixes into FIXED_CALL.
BUGGY = """\
import vllm


class Server:
    def __init__(self, engine):
        self.engine = engine

    async def update_weights(self, meta):
        await self.engine.collective_rpc("update_weights_from_ipc", kwargs=meta)
        await self.engine.collective_rpc("reset_encoder_cache")
        await self.engine.reset_prefix_cache(reset_running_requests=True)
"""
BUG_CALL = 'await self.engine.collective_rpc("reset_encoder_cache")'
FIXED_CALL = "await self.engine.reset_encoder_cache()"
FIXED = BUGGY.replace(BUG_CALL, FIXED_CALL)


def project(root: Path, files: dict[str, str | bytes]) -> Path:
    return write_tree(root, {"pyproject.toml": PYPROJECT, **files})


def json_check(*args: str | Path, cwd: Path) -> tuple[Result, list[dict[str, object]]]:
    result = check("--output-format", "json", *args, cwd=cwd)
    assert_no_traceback(result)
    return result, json.loads(result.stdout) if result.stdout.strip() else []


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert "Traceback" not in result.stdout, result.stdout


def codes_by_file(findings: list[dict[str, object]]) -> dict[str, list[str]]:
    by_file: dict[str, list[str]] = {}
    for finding in findings:
        by_file.setdefault(str(finding["filename"]), []).append(str(finding["code"]))
    return by_file


def run_patched(patch: str, *args: str, cwd: Path) -> Result:
    """The real command line in a subprocess, after `patch` (Python source) has run in it."""
    program = textwrap.dedent(patch) + "\nfrom cachelint.cli import main\nmain(prog_name='cachelint')\n"
    completed = subprocess.run(
        [sys.executable, "-c", program, "check", *args],
        cwd=cwd,
        capture_output=True,
        env=environment(),
        timeout=300,
        check=False,
    )
    result = Result(completed.returncode, completed.stdout.decode(), completed.stderr.decode())
    assert_no_traceback(result)
    return result


# -- files that are odd but fine ----------------------------------------------------------------


def test_empty_file_and_comments_only_are_clean(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/empty.py": "", "pkg/comments.py": "# just\n# comments, no code\n#"})
    result = check("pkg", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 0
    assert "All checks passed!" in result.stdout
    assert result.stderr == ""


def test_bom_file_is_analysed_and_its_fix_keeps_the_bom(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    project(tmp_path, {"pkg/server.py": bom + BUGGY.encode()})
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    assert [(f["code"], f["location"]) for f in findings] == [("CL001", {"row": 10, "column": 15})]

    fixed = check("--fix", "--unsafe-fixes", "pkg", cwd=tmp_path)
    assert_no_traceback(fixed)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    assert (tmp_path / "pkg/server.py").read_bytes() == bom + FIXED.encode()


def test_crlf_file_is_analysed_and_its_fix_keeps_crlf(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/server.py": BUGGY.replace("\n", "\r\n").encode()})
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    assert [(f["code"], f["location"]) for f in findings] == [("CL001", {"row": 10, "column": 15})]

    fixed = check("--fix", "--unsafe-fixes", "pkg", cwd=tmp_path)
    assert_no_traceback(fixed)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    assert (tmp_path / "pkg/server.py").read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_mixed_line_endings_keep_every_untouched_line_as_it_was(tmp_path: Path) -> None:
    endings = ["\n", "\r\n", "\r"]  # "\r" alone too: CPython counts it as a line break
    mixed = "".join(line + endings[number % 3] for number, line in enumerate(BUGGY.splitlines()))
    row = len(re.findall(r"\r\n|\r|\n", mixed[: mixed.index(BUG_CALL)])) + 1
    assert row == [node.lineno for node in ast.walk(ast.parse(mixed)) if isinstance(node, ast.Await)][-2]
    project(tmp_path, {"pkg/server.py": mixed.encode()})
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    assert [(f["code"], f["location"]) for f in findings] == [("CL001", {"row": row, "column": 15})]

    fixed = check("--fix", "--unsafe-fixes", "pkg", cwd=tmp_path)
    assert_no_traceback(fixed)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    assert (tmp_path / "pkg/server.py").read_bytes() == mixed.replace(BUG_CALL, FIXED_CALL).encode()


def test_latin1_file_is_analysed_and_its_fix_keeps_latin1(tmp_path: Path) -> None:
    header = '# -*- coding: latin-1 -*-\n"""Caf\xe9 serveur: r\xe9initialise les caches."""\n'
    source = header + BUGGY
    project(tmp_path, {"pkg/server.py": source.encode("latin-1")})
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    assert [(f["code"], f["location"]) for f in findings] == [("CL001", {"row": 12, "column": 15})]

    fixed = check("--fix", "--unsafe-fixes", "pkg", cwd=tmp_path)
    assert_no_traceback(fixed)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    written = (tmp_path / "pkg/server.py").read_bytes()
    assert written == (header + FIXED).encode("latin-1")
    assert b"\xe9" in written  # still latin-1, not re-encoded as UTF-8


# -- files that cannot be read, decoded or parsed -----------------------------------------------


def test_undecodable_bytes_and_nul_byte_are_invalid_syntax_and_the_run_goes_on(tmp_path: Path) -> None:
    project(
        tmp_path,
        {
            "pkg/undecodable.py": b"import os\n\nx = 1\ny = '\xff\xfe'\n",
            "pkg/cookie_lies.py": b"# coding: ascii\nname = 'caf\xc3\xa9'\n",
            "pkg/nul.py": b"x = 1\ny = 2\0\n",
            "pkg/server.py": BUGGY,
        },
    )
    named = ("pkg/undecodable.py", "pkg/cookie_lies.py", "pkg/nul.py")  # no trigger word: parsed when named
    result, findings = json_check("pkg", *named, cwd=tmp_path)
    assert result.code == 1
    by_path = {str(f["filename"]): f for f in findings}
    assert set(by_path) == {"pkg/undecodable.py", "pkg/cookie_lies.py", "pkg/nul.py", "pkg/server.py"}
    assert by_path["pkg/server.py"]["code"] == "CL001"
    undecodable = by_path["pkg/undecodable.py"]
    assert undecodable["code"] == "invalid-syntax"
    assert undecodable["location"] == {"row": 4, "column": 6}
    assert "utf-8" in str(undecodable["message"])
    assert by_path["pkg/cookie_lies.py"]["code"] == "invalid-syntax"
    assert "ascii" in str(by_path["pkg/cookie_lies.py"]["message"])
    nul = by_path["pkg/nul.py"]
    assert nul["code"] == "invalid-syntax"
    assert "null bytes" in str(nul["message"])
    assert nul["location"] == {"row": 2, "column": 6}


def test_syntax_error_report_names_the_position(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/broken.py": "def f(:\n    pass\n"})
    result = check("pkg/broken.py", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 1
    assert "pkg/broken.py:1:" in result.stdout
    assert "SyntaxError" in result.stdout


def test_walked_files_are_parsed_only_when_they_can_matter(tmp_path: Path) -> None:
    """Walking a folder, a file with no trigger word cannot have a finding and is not parsed, so its
    syntax error goes unreported; one that holds a trigger word, or is named, gets the diagnostic."""
    project(
        tmp_path,
        {
            "pkg/unrelated.py": "def f(:\n    pass\n",
            "pkg/refit.py": "async def update_weights(engine):\n    await engine.reset_prefix_cache(\n",
        },
    )
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    assert codes_by_file(findings) == {"pkg/refit.py": ["invalid-syntax"]}
    result, findings = json_check("pkg", "pkg/unrelated.py", cwd=tmp_path)
    assert codes_by_file(findings) == {"pkg/refit.py": ["invalid-syntax"], "pkg/unrelated.py": ["invalid-syntax"]}


def test_error_in_a_huge_line_shows_a_window_of_it(tmp_path: Path) -> None:
    """Minified or generated code: one line of a megabyte is not printed whole."""
    project(tmp_path, {"pkg/minified.py": "x = [" + ", ".join(["1"] * 300_000) + ", ]]\n"})
    result = check("--no-color", "pkg/minified.py", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 1
    assert len(result.stdout) < 2000
    frame = result.stdout.splitlines()
    source_row = next(line for line in frame if line.startswith("1 |"))
    caret_row = frame[frame.index(source_row) + 1]
    assert source_row.startswith("1 | \u2026") and source_row.endswith("1, ]]")
    assert caret_row.index("^") == len(source_row) - 1  # under the unmatched bracket


def test_escape_sequences_in_the_code_do_not_reach_the_terminal(tmp_path: Path) -> None:
    """A string in the checked code must not retitle, clear or recolour the terminal showing the report."""
    hostile = '        s = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\x9b"; ' + BUG_CALL.removeprefix("await ")
    project(tmp_path, {"pkg/server.py": BUGGY.replace("        " + BUG_CALL, hostile)})
    for output_format in ("full", "concise", "github"):
        result = check("--output-format", output_format, "--show-fixes", "--no-color", "pkg", cwd=tmp_path)
        assert_no_traceback(result)
        assert result.code == 1
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", result.stdout), repr(result.stdout)
    frame = check("--no-color", "pkg", cwd=tmp_path).stdout.splitlines()
    source_row = next(line for line in frame if line.startswith("10 |"))
    assert source_row == '10 |         s = "\u241b]0;pwned\u2407\u241b[2J\u241b[31m\ufffd"; ' + BUG_CALL.removeprefix(
        "await "
    )
    caret_row = frame[frame.index(source_row) + 1]
    assert caret_row.index("^") == source_row.index("self.engine")


def test_diff_of_a_line_holding_other_line_separators(tmp_path: Path) -> None:
    """Form feed, U+0085 and U+2028 inside a string do not end a line of Python: the diff must not
    split the line there either."""
    odd = '        s = "a\u2028b\x85c\x0cd"; '
    project(tmp_path, {"pkg/server.py": BUGGY.replace("        " + BUG_CALL, odd + BUG_CALL)})
    result = check("--diff", "--unsafe-fixes", "pkg", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 1
    changed = [
        line for line in result.stdout.split("\n") if line.startswith(("-", "+")) and line[:3] not in ("---", "+++")
    ]
    shown = '        s = "a\ufffdb\ufffdc\u240cd"; '  # as pictures, like every other output shows them
    assert changed == ["-" + shown + BUG_CALL, "+" + shown + FIXED_CALL]


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what may drive a terminal (tab and line feed may not)


def test_escape_sequences_in_names_and_code_reach_neither_the_diff_nor_stderr(tmp_path: Path) -> None:
    """File names and lines in --diff, and every message on stderr, show control characters as pictures
    (an OSC sequence would retitle the terminal even when stderr is a file someone later prints)."""
    title = "\x1b]0;pwned\x07"
    hostile = f'        s = "{title}\x1b[2J"; ' + BUG_CALL
    root = project(tmp_path / "project", {f"pkg/{title}server.py": BUGGY.replace("        " + BUG_CALL, hostile)})
    write_tree(tmp_path / "outside", {"real.py": BUGGY})
    (root / f"pkg/{title}link.py").symlink_to(tmp_path / "outside" / "real.py")
    diff = check("--diff", "--unsafe-fixes", "pkg", cwd=root)
    assert_no_traceback(diff)
    assert diff.code == 1
    assert "+++ b/pkg/\u241b]0;pwned\u2407server.py\n" in diff.stdout
    assert '+        s = "\u241b]0;pwned\u2407\u241b[2J"; ' + FIXED_CALL + "\n" in diff.stdout
    assert "pkg/\u241b]0;pwned\u2407link.py: not fixed: it is a symbolic link to " in diff.stderr
    missing = check(f"pkg/{title}missing.py", cwd=root)
    assert missing.stderr_lines == ["cachelint: error: pkg/\u241b]0;pwned\u2407missing.py: No such file or directory"]
    fixed = check("--fix", "--unsafe-fixes", "pkg", cwd=root)
    for result in (diff, missing, fixed):
        assert not CONTROL.search(result.stdout + result.stderr), repr(result.stdout + result.stderr)


@pytest.mark.parametrize("output_format", ["full", "concise", "json", "json-lines", "sarif", "github"])
def test_a_link_to_itself_is_an_unreadable_file_named_or_walked(tmp_path: Path, output_format: str) -> None:
    project(tmp_path, {"pkg/server.py": BUGGY})
    (tmp_path / "pkg/loop.py").symlink_to("loop.py")
    for paths in (["pkg"], ["pkg/loop.py", "pkg/server.py"], ["pkg/loop.py"], ["--force-exclude", "pkg/loop.py"]):
        result = check("--output-format", output_format, *paths, cwd=tmp_path)
        assert_no_traceback(result)
        assert (result.code, result.stderr) == (1, ""), (paths, result.stderr)
        assert "pkg/loop.py" in result.stdout
        assert "Too many levels of symbolic links" in result.stdout
        if output_format in ("json", "sarif"):
            json.loads(result.stdout)  # complete


def test_an_unreadable_or_too_deep_config_file_is_one_line_naming_the_file(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pkg/server.py": BUGGY})
    config = tmp_path / "pyproject.toml"
    for content, problem in (
        (b'[tool.cachelint]\nselect = ["CL\xff"]\n', "invalid TOML: not UTF-8 (byte 31: invalid start byte)"),
        (b"[tool.cachelint]\nselect = " + b"[" * 2000 + b"]" * 2000 + b"\n", "invalid TOML: "),
    ):
        config.write_bytes(content)
        result = check("pkg", cwd=tmp_path)
        assert_no_traceback(result)
        assert result.code == 2
        [line] = result.stderr_lines
        assert line.startswith(f"cachelint: error: {config}: {problem}"), line
        assert "internal error" not in line


def test_ten_megabyte_generated_file_finishes(tmp_path: Path) -> None:
    rows: list[str] = []
    size = 0
    while size < 10_000_000:  # a generated table, as protobuf or data modules hold, then a bug
        rows.append(f"ROW_{len(rows)} = ({len(rows)}, 'value {len(rows)}', {len(rows)}.5, None, True)\n")
        size += len(rows[-1])
    source = "".join(rows) + "\n\n" + BUGGY
    assert len(source.encode()) >= 10_000_000
    project(tmp_path, {"pkg/generated.py": source})
    bug_line = source.splitlines().index('        await self.engine.collective_rpc("reset_encoder_cache")') + 1
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    assert [(f["code"], f["location"]) for f in findings] == [("CL001", {"row": bug_line, "column": 15})]


def test_deep_nesting_is_a_per_file_diagnostic_or_analysed(tmp_path: Path) -> None:
    """CPython refuses 1,000 nested brackets (a diagnostic); 1,000-deep expressions it accepts are
    analysed like any file (the bug in them is found); a chain too long for CPython's own recursion
    limit is a diagnostic. The other files of the run are checked as usual."""
    deep_calls = "f" + "()" * 1000  # a call of a call ...: 1,000 levels deep, no nested brackets
    deep_unary = "-" * 1000 + "x"
    deep_attribute = "x" + ".a" * 1000
    project(
        tmp_path,
        {
            "pkg/brackets.py": "x = " + "[" * 1000 + "]" * 1000 + "\n",
            "pkg/parens.py": "x = " + "(" * 1000 + "1" + ")" * 1000 + "\n",
            "pkg/deep_unary.py": BUGGY + f"\n\ny = {deep_unary}\n",
            "pkg/deep_attribute.py": BUGGY + f"\n\ny = {deep_attribute}\n",
            "pkg/deep_calls.py": BUGGY + f"\n\ny = {deep_calls}\n",
            "pkg/long_chain.py": "import vllm\ny = " + " + ".join(["a"] * 100_000) + "\n",
            "pkg/server.py": BUGGY,
        },
    )
    named = ("pkg/brackets.py", "pkg/parens.py", "pkg/long_chain.py")  # no trigger word: parsed when named
    result, findings = json_check("pkg", *named, cwd=tmp_path)
    assert result.code == 1
    by_file = codes_by_file(findings)
    assert by_file == {
        "pkg/brackets.py": ["invalid-syntax"],
        "pkg/parens.py": ["invalid-syntax"],
        "pkg/deep_unary.py": ["CL001"],
        "pkg/deep_attribute.py": ["CL001"],
        "pkg/deep_calls.py": ["CL001"],
        "pkg/long_chain.py": ["invalid-syntax"],
        "pkg/server.py": ["CL001"],
    }
    messages = {str(f["filename"]): str(f["message"]) for f in findings}
    assert "too many nested parentheses" in messages["pkg/brackets.py"]
    assert "too deeply nested" in messages["pkg/long_chain.py"]


# -- paths that are not plain files --------------------------------------------------------------


def test_folder_named_like_a_python_file_is_walked_not_read(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/x.py/inner.py": BUGGY, "pkg/ok.py": "x = 1\n"})
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    assert codes_by_file(findings) == {"pkg/x.py/inner.py": ["CL001"]}
    named, findings = json_check("pkg/x.py", cwd=tmp_path)
    assert named.code == 1
    assert codes_by_file(findings) == {"pkg/x.py/inner.py": ["CL001"]}


@pytest.mark.parametrize("output_format", ["full", "concise", "json", "json-lines", "sarif", "github"])
def test_file_name_that_is_not_utf8(tmp_path: Path, output_format: str) -> None:
    project(tmp_path, {"pkg/server.py": BUGGY})
    try:
        (tmp_path / os.fsdecode(b"pkg/caf\xe9.py")).write_text(BUGGY)
    except (OSError, UnicodeError):
        pytest.skip("this file system takes only UTF-8 file names")
    result = check("--output-format", output_format, "pkg", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 1, result.stderr
    shown = "pkg/caf%E9.py" if output_format == "sarif" else "pkg/caf\\udce9.py"
    assert shown in result.stdout
    if output_format == "json":
        assert sorted(f["filename"] for f in json.loads(result.stdout)) == [
            os.fsdecode(b"pkg/caf\xe9.py"),
            "pkg/server.py",
        ]


def test_fix_in_a_file_whose_name_is_not_utf8(tmp_path: Path) -> None:
    project(tmp_path, {})
    try:
        (tmp_path / os.fsdecode(b"caf\xe9.py")).write_text(BUGGY)
    except (OSError, UnicodeError):
        pytest.skip("this file system takes only UTF-8 file names")
    result = check("--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 0, result.stderr
    assert (tmp_path / os.fsdecode(b"caf\xe9.py")).read_text() == FIXED


def test_symlink_loops_do_not_hang_and_are_reported(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/server.py": BUGGY})
    (tmp_path / "pkg/loop_a.py").symlink_to("loop_b.py")
    (tmp_path / "pkg/loop_b.py").symlink_to("loop_a.py")
    (tmp_path / "pkg/sub").mkdir()
    (tmp_path / "pkg/sub/up").symlink_to("..", target_is_directory=True)  # a folder loop: never followed
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    by_path = {str(f["filename"]): f for f in findings}
    assert set(by_path) == {"pkg/server.py", "pkg/loop_a.py", "pkg/loop_b.py"}
    for name in ("pkg/loop_a.py", "pkg/loop_b.py"):
        assert by_path[name]["code"] == "io-error"
        assert "symbolic links" in str(by_path[name]["message"])


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="running as root: root reads mode-000 files, so the permission error cannot happen "
    "(test_unreadable_file_is_reported_engine_level covers it by injecting the OSError)",
)
def test_unreadable_file_is_reported(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/secret.py": BUGGY, "pkg/server.py": BUGGY})
    (tmp_path / "pkg/secret.py").chmod(0)
    try:
        result, findings = json_check("pkg", cwd=tmp_path)
    finally:
        (tmp_path / "pkg/secret.py").chmod(0o644)
    assert result.code == 1
    assert codes_by_file(findings) == {"pkg/secret.py": ["io-error"], "pkg/server.py": ["CL001"]}
    assert "Permission denied" in str(findings[0]["message"])


def test_unreadable_file_is_reported_engine_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project(tmp_path, {"pkg/secret.py": BUGGY, "pkg/server.py": BUGGY})
    monkeypatch.chdir(tmp_path)
    secret = (tmp_path / "pkg/secret.py").resolve()
    real_open = io.open

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        """`open`, refused for the secret file as the system refuses a file without read permission."""
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == secret:
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", guarded_open)
    monkeypatch.setattr("io.open", guarded_open)
    analysis = analyze([Path("pkg")], Settings(), workers=1)
    found = {(f.path, f.code, f.message) for f in analysis.findings}
    assert ("pkg/secret.py", "io-error", "cannot read file: Permission denied") in found
    assert {(path, code) for path, code, _ in found} == {("pkg/secret.py", "io-error"), ("pkg/server.py", "CL001")}


def test_missing_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/server.py": BUGGY})
    result = check("pkg", "does_not_exist.py", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 2
    assert result.stderr_lines == ["cachelint: error: does_not_exist.py: No such file or directory"]
    assert result.stdout == ""


def test_file_deleted_between_discovery_and_reading(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/gone.py": BUGGY, "pkg/server.py": BUGGY})
    patch = """
        from pathlib import Path
        import cachelint.engine as engine

        real_discover = engine.discover

        def discover(*args, **kwargs):
            found = real_discover(*args, **kwargs)
            Path("pkg/gone.py").unlink()
            return found

        engine.discover = discover
    """
    result = run_patched(patch, "--output-format", "json", "pkg", cwd=tmp_path)
    assert result.code == 1
    findings = json.loads(result.stdout)
    assert codes_by_file(findings) == {"pkg/gone.py": ["io-error"], "pkg/server.py": ["CL001"]}
    assert "No such file or directory" in str(findings[0]["message"])


# -- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('select = "CL001"', "`select` must be a list of rule codes or prefixes, got 'CL001'"),
        ("multimodal = 1", '`multimodal` must be "auto", true or false, got 1'),
        ('selekt = ["CL001"]', "unknown key `selekt` in [tool.cachelint]; did you mean `select`?"),
        ('exclude = ["!"]', "`exclude` must hold gitignore-style patterns, got '!'"),
        ('extend-exclude = ["docs", "\\\\"]', "`extend-exclude` must hold gitignore-style patterns, got '\\\\'"),
        ('per-file-ignores = {"!" = ["CL001"]}', "`per-file-ignores` must hold gitignore-style patterns, got '!'"),
        (
            'cache-dir = "a\\u0000b"',
            "`cache-dir` must be a folder path below the project root, relative to it, got 'a\\x00b'",
        ),
        ('vllm = "<0.5"', "`vllm` = '<0.5' matches no vLLM release cachelint knows (0.6.0\N{EN DASH}{newest})"),
        (
            'vllm = ">=0.20,<0.10"',
            "`vllm` = '>=0.20,<0.10' matches no vLLM release cachelint knows (0.6.0\N{EN DASH}{newest})",
        ),
    ],
    ids=[
        "wrong-type",
        "wrong-type-bool",
        "unknown-key",
        "bang",
        "backslash",
        "per-file-bang",
        "nul",
        "past",
        "empty",
    ],
)
def test_bad_config_is_one_line_naming_file_key_and_expectation(tmp_path: Path, table: str, expected: str) -> None:
    write_tree(tmp_path, {"pyproject.toml": f"{PYPROJECT}\n[tool.cachelint]\n{table}\n", "pkg/server.py": BUGGY})
    result = check("pkg", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 2
    expected = expected.replace("{newest}", str(load_facts().releases[-1]))
    assert result.stderr_lines == [f"cachelint: error: {tmp_path.resolve() / 'pyproject.toml'}: {expected}"]


@pytest.mark.parametrize("specifier", ["<0.5", ">=0.20,<0.10"])
def test_a_vllm_flag_no_release_meets_is_an_error(tmp_path: Path, specifier: str) -> None:
    project(tmp_path, {"pkg/server.py": BUGGY})
    result = check("--vllm", specifier, "pkg", cwd=tmp_path)
    assert (result.code, result.stdout) == (2, "")
    newest = load_facts().releases[-1]
    assert result.stderr_lines == [
        f"cachelint: error: --vllm = {specifier!r} matches no vLLM release cachelint knows (0.6.0\N{EN DASH}{newest})"
    ]


# -- writing fixes -------------------------------------------------------------------------------

# Fails the final step of writing one file (pkg/a.py) as a full disk would, whether the rename goes
# through os.replace or Path.replace (which on Python 3.10 calls the os.replace pathlib found at import).
FAIL_REPLACE = """
    import errno, os, pathlib
    real_replace = os.replace
    real_path_replace = pathlib.Path.replace

    def fail_for_a(target):
        if str(target).endswith("a.py"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    def replace(source, target, *args, **kwargs):
        fail_for_a(target)
        return real_replace(source, target, *args, **kwargs)

    def path_replace(self, target):
        fail_for_a(target)
        return real_path_replace(self, target)

    os.replace = replace
    pathlib.Path.replace = path_replace
"""
# Fails while the temporary copy of one file (pkg/a.py) is being flushed to disk.
FAIL_FSYNC = """
    import errno, os
    real_fsync = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1].startswith(".a.py."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    os.fsync = fsync
"""


@pytest.mark.parametrize("patch", [FAIL_REPLACE, FAIL_FSYNC], ids=["replace", "flush"])
def test_disk_full_while_writing_a_fix_keeps_the_original_and_goes_on(tmp_path: Path, patch: str) -> None:
    if patch is FAIL_FSYNC and not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to tell which file is being flushed")
    project(tmp_path, {"pkg/a.py": BUGGY, "pkg/b.py": BUGGY})
    original = (tmp_path / "pkg/a.py").read_bytes()
    result = run_patched(patch, "--fix", "--unsafe-fixes", "pkg", cwd=tmp_path)
    assert (tmp_path / "pkg/a.py").read_bytes() == original
    assert (tmp_path / "pkg/b.py").read_text() == FIXED
    assert "cachelint: error: pkg/a.py: not written: No space left on device" in result.stderr_lines
    assert result.code == 2  # a fix was not written; a.py still has its finding, reported
    assert "pkg/a.py:10:15: CL001" in result.stdout
    assert "pkg/b.py" not in result.stdout
    assert sorted(path.name for path in (tmp_path / "pkg").iterdir()) == ["a.py", "b.py"]  # no temporary left


def test_file_modified_between_read_and_write_is_not_written(tmp_path: Path) -> None:
    project(tmp_path, {"pkg/a.py": BUGGY, "pkg/b.py": BUGGY})
    edited = BUGGY + "# edited by someone else meanwhile\n"
    patch = f"""
        from pathlib import Path
        import cachelint.fixes as fixes

        real = fixes.fix_to_fixed_point

        def fix_to_fixed_point(*args, **kwargs):
            outcome = real(*args, **kwargs)
            Path("pkg/a.py").write_text({edited!r})
            return outcome

        fixes.fix_to_fixed_point = fix_to_fixed_point
    """
    result = run_patched(patch, "--fix", "--unsafe-fixes", "pkg", cwd=tmp_path)
    assert (tmp_path / "pkg/a.py").read_text() == edited
    assert (tmp_path / "pkg/b.py").read_text() == FIXED
    assert "cachelint: error: pkg/a.py: not written: it changed on disk since it was read" in result.stderr_lines
    assert result.code == 2  # a fix was not written


@pytest.mark.parametrize("change", ["edit", "delete", "edit-then-next-round"])
def test_file_changed_while_analysed_for_a_fix_is_not_fixed(tmp_path: Path, change: str) -> None:
    """The fixer edits the bytes the analysis read; a file that changed or vanished after the analysis
    read it is left alone and reported, unless a later round of the fixer (after another file's fix)
    reads it again and fixes it as it now is, keeping the edit."""
    b = BUGGY if change == "edit-then-next-round" else "x = 1\n"
    project(tmp_path, {"pkg/a.py": BUGGY, "pkg/b.py": b})
    edited = BUGGY + "# edited by someone else meanwhile\n"
    action = f"Path('pkg/a.py').write_text({edited!r})" if change != "delete" else "Path('pkg/a.py').unlink()"
    patch = f"""
        from pathlib import Path
        import cachelint.fixes as fixes

        real = fixes.analyze
        calls = []

        def analyze(*args, **kwargs):
            analysis = real(*args, **kwargs)
            if not calls:
                {action}
            calls.append(1)
            return analysis

        fixes.analyze = analyze
    """
    result = run_patched(patch, "--fix", "--unsafe-fixes", "pkg", cwd=tmp_path)
    if change == "edit-then-next-round":
        assert (tmp_path / "pkg/b.py").read_text() == FIXED
        assert (tmp_path / "pkg/a.py").read_text() == FIXED + "# edited by someone else meanwhile\n"
        assert result.code == 0, result.stderr
        assert "not fixed" not in result.stderr
        return
    if change == "edit":
        assert (tmp_path / "pkg/a.py").read_text() == edited
        problem = "it changed on disk while it was analysed"
    else:
        assert not (tmp_path / "pkg/a.py").exists()
        problem = "cannot read it again (No such file or directory)"
    assert f"cachelint: warning: pkg/a.py: not fixed: {problem}" in result.stderr_lines
    assert result.code == 1


def test_classic_mac_line_breaks_are_kept_by_fixes_that_add_lines(tmp_path: Path) -> None:
    fixture = FIXTURES / "CL003" / "update_weights_prefix_only.py"
    original = fixture.read_bytes().replace(b"\n", b"\r")
    write_tree(tmp_path, {"server.py": original})
    result = check("--isolated", "--fix", "--unsafe-fixes", "server.py", cwd=tmp_path)
    assert_no_traceback(result)
    assert result.code == 0, result.stdout + result.stderr
    written = (tmp_path / "server.py").read_bytes()
    assert b"\n" not in written
    assert written == fixture.with_name(fixture.name + ".fixed").read_bytes().replace(b"\n", b"\r")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_named_pipe_and_link_to_a_device_are_not_read(tmp_path: Path) -> None:
    """Reading either would never end (a pipe waits for a writer, /dev/zero has no end)."""
    project(tmp_path, {"pkg/server.py": BUGGY, "requirements.txt": ""})
    os.mkfifo(tmp_path / "pkg/pipe.py")
    (tmp_path / "pkg/zero.py").symlink_to("/dev/zero")
    (tmp_path / "requirements.txt").unlink()
    os.mkfifo(tmp_path / "requirements.txt")  # the vLLM pins are looked for there too
    os.mkfifo(tmp_path / "pkg/.gitignore")
    result, findings = json_check("pkg", cwd=tmp_path)
    assert result.code == 1
    by_path = {str(f["filename"]): f for f in findings}
    assert set(by_path) == {"pkg/server.py", "pkg/pipe.py", "pkg/zero.py"}
    assert by_path["pkg/pipe.py"]["code"] == "io-error"
    assert by_path["pkg/pipe.py"]["message"] == "cannot read file: not a regular file but a named pipe"
    assert by_path["pkg/zero.py"]["message"] == "cannot read file: not a regular file but a character device"


def test_git_ignored_folder_named_explicitly_is_checked(tmp_path: Path) -> None:
    """As with a pyenv or venv folder git-ignored by an enclosing repository: naming the folder checks
    it (as ruff and ripgrep do), while walking the repository still skips it."""
    project(tmp_path, {".gitignore": "versions/\n", "versions/lib/server.py": BUGGY, "build/server.py": BUGGY})
    (tmp_path / ".git").mkdir()
    walked, findings = json_check(".", cwd=tmp_path)
    assert walked.code == 0, findings
    named, findings = json_check("versions/lib", cwd=tmp_path)
    assert named.code == 1
    assert codes_by_file(findings) == {"versions/lib/server.py": ["CL001"]}
    excluded_by_default, findings = json_check("build", cwd=tmp_path)
    assert excluded_by_default.code == 1
    assert codes_by_file(findings) == {"build/server.py": ["CL001"]}
