"""The command line end to end: exit codes, colour, --quiet/--statistics, stdin, --add-noqa, suppressions,
the progress bar. Every test runs the real `python -m cachelint` in a subprocess on files on disk."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_runner import (
    CHECKED,
    CLEAN,
    DEMO,
    PYPROJECT,
    REPO,
    WORKER,
    cachelint,
    cachelint_on_terminal,
    check,
    check_on_terminal,
    environment,
    tiny_project,
    write_tree,
)

CL001_MESSAGE = (
    "`self.model_runner.reset_encoder_cache()` clears only the workers' encoder-output tensors; the scheduler "
    "keeps its record of the cached images, so the next request with the same image fails with 'Encoder cache miss'"
)
CL001_LINE = f"tiny_rl/worker.py:4:9: CL001 {CL001_MESSAGE}"
ESC = "\x1b["

needs_pty = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return tiny_project(tmp_path / "tiny")


# ---------------------------------------------------------------- exit codes


def test_findings_exit_1_with_the_finding(project: Path) -> None:
    result = check("--output-format", "concise", cwd=project)
    assert result.code == 1
    assert result.stdout == f"{CL001_LINE}\nFound 1 problem in 1 file.\n{CHECKED}"
    assert result.stderr == ""


def test_exit_handlers_run_and_the_output_is_whole_when_the_program_ends(project: Path) -> None:
    """The program ends without tearing the interpreter down, after what a normal exit does first."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('exit handler ran'))\n"
        "sys.argv = ['cachelint', 'check', '--no-cache', '--output-format', 'concise', '.']\n"
        "from cachelint.__main__ import program\n"
        "program()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=project, capture_output=True, text=True, env=environment(), check=False
    )
    assert run.returncode == 1
    assert run.stdout == f"{CL001_LINE}\nFound 1 problem in 1 file.\n{CHECKED}exit handler ran\n"


def test_clean_exit_0(project: Path) -> None:
    result = check("tiny_rl/clean.py", "--output-format", "concise", cwd=project)
    assert (result.code, result.stdout) == (0, "All checks passed!\n" + CHECKED)


def test_exit_zero_reports_but_exits_0(project: Path) -> None:
    result = check("--exit-zero", "--output-format", "concise", cwd=project)
    assert result.code == 0
    assert CL001_LINE in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "cachelint: error: missing.py: No such file or directory"),
        (
            ["--vllm", ">=banana"],
            "cachelint: error: --vllm must be a version specifier string such as \">=0.18\", got '>=banana'",
        ),
        (["--config", "c.toml", "--isolated"], "cachelint: error: --config and --isolated cannot be used together"),
    ],
)
def test_errors_exit_2_with_one_line(project: Path, args: list[str], message: str) -> None:
    result = check(*args, cwd=project)
    assert result.code == 2
    assert result.stderr_lines == [message]
    assert result.stdout == ""


def test_unknown_option_is_a_usage_error(project: Path) -> None:
    result = check("--output-format", "xml", cwd=project)
    assert result.code == 2
    assert result.stderr == (
        "cachelint: error: --output-format must be one of full, concise, json, json-lines, sarif, github, "
        "gitlab, junit, got 'xml'\n"
    )


# ---------------------------------------------------------------- --quiet, --statistics, --show-settings


def test_quiet_prints_findings_without_the_summary(project: Path) -> None:
    result = check("--quiet", "--output-format", "concise", cwd=project)
    assert (result.code, result.stdout) == (1, f"{CL001_LINE}\n")


def test_quiet_clean_prints_nothing(project: Path) -> None:
    result = check("--quiet", "tiny_rl/clean.py", cwd=project)
    assert (result.code, result.stdout) == (0, "")


def test_statistics(project: Path) -> None:
    write_tree(project, {"tiny_rl/second.py": WORKER.replace("WorkerExtension", "OtherExtension")})
    statistics = "2  CL001  worker-only-cache-reset\n"
    result = check("--statistics", "--no-color", cwd=project)
    assert (result.code, result.stdout) == (1, f"{statistics}\nFound 2 problems in 2 files.\n{CHECKED}")
    result = check("--statistics", "--quiet", "--output-format", "concise", cwd=project)
    assert (result.code, result.stdout) == (1, statistics)


def test_statistics_as_json(project: Path) -> None:
    """ruff's objects for `--statistics --output-format json`: counts per rule, not the findings."""
    write_tree(
        project,
        {
            "tiny_rl/second.py": WORKER.replace("WorkerExtension", "OtherExtension"),
            "tiny_rl/gated.py": (DEMO / "demo_rl/rollout_server.py").read_text(encoding="utf-8"),
        },
    )
    result = check("--statistics", "--output-format", "json", "--select", "CL001,CL002", cwd=project)
    assert result.code == 1
    assert json.loads(result.stdout) == [
        {"code": "CL001", "name": "worker-only-cache-reset", "count": 2, "fixable": False, "fixable_count": 0},
        {"code": "CL002", "name": "version-gated-reset", "count": 1, "fixable": True, "fixable_count": 1},
    ]
    clean = check("--statistics", "--output-format", "json", "tiny_rl/clean.py", cwd=project)
    assert (clean.code, json.loads(clean.stdout)) == (0, [])


def test_unsafe_fixes_count_as_fixable_in_json_statistics(project: Path) -> None:
    result = check(
        "--statistics", "--output-format", "json", "--unsafe-fixes", str(DEMO), "--select", "CL003", cwd=project
    )
    assert json.loads(result.stdout) == [
        {"code": "CL003", "name": "refit-without-encoder-reset", "count": 1, "fixable": True, "fixable_count": 1}
    ]


@pytest.mark.parametrize("output_format", ["json-lines", "sarif", "github"])
def test_statistics_with_a_format_that_cannot_show_them_is_an_error(project: Path, output_format: str) -> None:
    result = check("--statistics", "--output-format", output_format, cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr_lines == [
        f"cachelint: error: --statistics cannot be used with the {output_format} format (only with full, concise "
        "or json)"
    ]


def test_show_settings_merges_file_and_flags(project: Path) -> None:
    write_tree(project, {"cachelint.toml": 'ignore = ["CL002"]\noutput-format = "json"\n'})
    result = check("--show-settings", "--select", "cl001,CL003", cwd=project)
    assert result.code == 0
    shown = json.loads(result.stdout)
    assert shown["config-path"] == str(project / "cachelint.toml")
    assert shown["select"] == ["CL001", "CL003"]
    assert shown["ignore"] == ["CL002"]
    assert shown["output-format"] == "json"


# ---------------------------------------------------------------- json fields


def test_a_noqa_comment_on_noqa_row_suppresses_the_finding(tmp_path: Path) -> None:
    """ruff's `noqa_row`: where a tool adds `# noqa: CODE`, even when the finding's own line cannot take a
    comment (it ends inside a string)."""
    worker = WORKER.replace(
        "self.model_runner.reset_encoder_cache()",
        'self.model_runner.reset_encoder_cache(); note = """\n        refit done\n        """',
    )
    project = tiny_project(tmp_path / "tiny", worker=worker)
    [finding] = json.loads(check("--output-format", "json", cwd=project).stdout)
    assert (finding["location"]["row"], finding["noqa_row"], finding["severity"]) == (4, 6, "error")
    lines = worker.splitlines(keepends=True)
    lines[5] = lines[5].rstrip("\n") + f"  # noqa: {finding['code']}\n"
    write_tree(project, {"tiny_rl/worker.py": "".join(lines)})
    assert check("--output-format", "json", cwd=project).stdout == "[]\n"


# ---------------------------------------------------------------- colour


def test_no_colour_when_piped(project: Path) -> None:
    result = check(cwd=project)
    assert result.code == 1
    assert CL001_LINE in result.stdout
    assert ESC not in result.stdout


@pytest.mark.parametrize(
    ("env", "args", "coloured"),
    [
        ({"FORCE_COLOR": "1"}, [], True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, [], False),
        ({"FORCE_COLOR": "1", "NO_COLOR": ""}, [], True),  # no-color.org: an empty NO_COLOR does not count
        ({"FORCE_COLOR": "1"}, ["--no-color"], False),
        ({"FORCE_COLOR": "1"}, ["--output-format", "json"], False),
    ],
)
def test_colour_switches(project: Path, env: dict[str, str], args: list[str], coloured: bool) -> None:
    result = check(*args, cwd=project, env=env)
    assert result.code == 1
    assert (ESC in result.stdout) is coloured


@needs_pty
@pytest.mark.parametrize(
    ("env", "args", "coloured"),
    [
        ({}, [], True),
        ({}, ["--output-format", "concise"], True),
        ({"NO_COLOR": "1"}, [], False),
        ({}, ["--no-color"], False),
        ({}, ["--output-format", "json-lines"], False),
    ],
)
def test_colour_on_a_terminal(project: Path, env: dict[str, str], args: list[str], coloured: bool) -> None:
    code, stdout, _ = check_on_terminal(*args, cwd=project, terminal="stdout", env=env)
    assert code == 1
    assert b"CL001" in stdout
    assert (ESC.encode() in stdout) is coloured


# ---------------------------------------------------------------- libcst only for fixes


def imports_libcst(*args: str, cwd: Path, cache: bool = False) -> bool:
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cachelint", "check", *([] if cache else ["--no-cache"]), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    return any(line.split("|")[-1].strip() == "libcst" for line in run.stderr.splitlines())


def test_libcst_is_imported_only_when_a_fix_is_made_or_shown(tmp_path: Path) -> None:
    demo = shutil.copytree(DEMO, tmp_path / "demo")
    assert not imports_libcst(cwd=demo)  # the findings have fixes, but none is shown or applied
    assert not imports_libcst("--fix", "--select", "CL001,CL003", cwd=demo)  # no safe fix among them
    assert imports_libcst("--show-fixes", cwd=demo)
    assert imports_libcst("--output-format", "json", cwd=demo)


@pytest.mark.parametrize("output_format", ["json", "sarif"])
def test_the_cache_keeps_the_edits_of_fixes(tmp_path: Path, output_format: str) -> None:
    """A run that shows the fixes' edits makes them with libcst once; the next one reads them from the
    cache, and prints the same."""
    demo = shutil.copytree(DEMO, tmp_path / "demo")
    first = check("--output-format", output_format, cwd=demo)
    assert imports_libcst("--output-format", output_format, cwd=demo)
    assert not imports_libcst("--output-format", output_format, cwd=demo, cache=True)
    assert check("--output-format", output_format, cwd=demo) == first
    assert '"edits"' in first.stdout or '"fixes"' in first.stdout


# ---------------------------------------------------------------- stdin


def test_stdin_filename_lints_stdin_not_the_file(project: Path) -> None:
    # On disk the file is clean; the source on stdin has the bug.
    write_tree(project, {"tiny_rl/worker.py": CLEAN})
    result = check("--stdin-filename", "tiny_rl/worker.py", "--output-format", "concise", cwd=project, stdin=WORKER)
    assert (result.code, result.stdout) == (1, f"{CL001_LINE}\nFound 1 problem in 1 file.\n{CHECKED}")
    # ... and the other way round.
    result = check("--stdin-filename", "tiny_rl/clean.py", "--output-format", "concise", cwd=project, stdin=CLEAN)
    assert (result.code, result.stdout) == (0, "All checks passed!\n" + CHECKED)


def test_dash_reads_stdin(project: Path) -> None:
    result = check("-", "--output-format", "concise", cwd=project, stdin=WORKER)
    assert result.code == 1
    assert result.stdout.startswith(f"-:4:9: CL001 {CL001_MESSAGE}\n")


def test_stdin_syntax_error(project: Path) -> None:
    result = check("-", "--output-format", "concise", cwd=project, stdin="x = (\n")
    assert result.code == 1
    assert result.stdout.startswith("-:1:5: SyntaxError: '(' was never closed\n")


REFIT = """\
from vllm.v1.engine.async_llm import AsyncLLM

from agent_rl.cache import invalidate_kv_cache


async def refit(engine: AsyncLLM, ipc_handles: dict) -> None:
    await engine.collective_rpc("update_weights_from_ipc_handles", args=(ipc_handles,))
    await invalidate_kv_cache(engine)


async def generate(engine: AsyncLLM, prompt_ids: list[int], image, params, request_id: str) -> list:
    prompt = {"prompt_token_ids": prompt_ids, "multi_modal_data": {"image": image}}
    return [output async for output in engine.generate(prompt, params, request_id)]
"""

PREFIX_ONLY = """\
async def invalidate_kv_cache(engine) -> None:
    await engine.reset_prefix_cache()
"""


def agent_project(root: Path) -> Path:
    """CL003 across two files: the refit root in weight_sync.py, the prefix-only reset in cache.py."""
    return write_tree(
        root,
        {
            "pyproject.toml": '[project]\nname = "agent-rl"\nversion = "0"\ndependencies = ["vllm>=0.18"]\n',
            "agent_rl/__init__.py": "",
            "agent_rl/weight_sync.py": REFIT,
            "agent_rl/cache.py": PREFIX_ONLY,
        },
    )


def test_stdin_is_checked_within_its_project(tmp_path: Path) -> None:
    project = agent_project(tmp_path / "agent")
    (project / "agent_rl/cache.py").write_text("", encoding="utf-8")
    args = ("--stdin-filename", "agent_rl/cache.py", "--output-format", "concise", "--quiet")
    result = check(*args, cwd=project, stdin=PREFIX_ONLY)
    assert result.code == 1
    assert result.stdout.startswith("agent_rl/cache.py:2:11: CL003 refit (weight_sync.py:6) -> invalid")
    # The same source outside any project that calls it: nothing to report.
    elsewhere = write_tree(tmp_path / "elsewhere", {"pyproject.toml": '[project]\nname = "x"\n'})
    result = check(*args, cwd=elsewhere, stdin=PREFIX_ONLY)
    assert (result.code, result.stdout) == (0, "")


def test_stdin_filename_need_not_exist(project: Path) -> None:
    result = check("--stdin-filename", "tiny_rl/new/worker.py", "--output-format", "concise", cwd=project, stdin=WORKER)
    assert result.code == 1
    assert result.stdout.startswith("tiny_rl/new/worker.py:4:9: CL001 ")


def test_stdin_filename_uses_the_config_nearest_to_it(project: Path) -> None:
    write_tree(project, {"tiny_rl/cachelint.toml": 'ignore = ["CL001"]\n'})
    result = check("--stdin-filename", "tiny_rl/worker.py", cwd=project, stdin=WORKER)
    assert (result.code, result.stdout) == (0, "All checks passed!\n" + CHECKED)


def test_stdin_filename_force_exclude(project: Path) -> None:
    write_tree(project, {"cachelint.toml": 'extend-exclude = ["tiny_rl/generated_*.py"]\n'})
    args = ("--stdin-filename", "tiny_rl/generated_worker.py", "--output-format", "concise")
    assert check(*args, cwd=project, stdin=WORKER).code == 1
    result = check(*args, "--force-exclude", cwd=project, stdin=WORKER)
    assert (result.code, result.stdout) == (0, "All checks passed!\n" + CHECKED)


def test_stdin_ignores_other_paths_with_a_warning(project: Path) -> None:
    result = check("--stdin-filename", "x.py", "tiny_rl", "--quiet", cwd=project, stdin=CLEAN)
    assert (result.code, result.stdout) == (0, "")
    assert result.stderr_lines == ["cachelint: warning: ignoring tiny_rl: the source is read from stdin"]


def test_stdin_filename_must_not_be_a_folder(project: Path) -> None:
    result = check("--stdin-filename", "tiny_rl", cwd=project, stdin=WORKER)
    assert result.code == 2
    assert result.stderr_lines == ["cachelint: error: --stdin-filename tiny_rl: is a folder, expected a file name"]


def test_stdin_cannot_get_noqa_directives(project: Path) -> None:
    result = check("-", "--add-noqa", cwd=project, stdin=WORKER)
    assert result.code == 2
    assert result.stderr_lines == ["cachelint: error: --add-noqa cannot be used with source read from stdin"]


UNAWAITED = (REPO / "fixtures" / "CL005" / "unawaited_reset_in_async_server.py").read_text()
PREFIX_IN_TRY = (REPO / "fixtures" / "CL003" / "prefix_reset_in_one_line_try.py").read_text()


def test_fix_on_stdin_prints_the_fixed_source(project: Path) -> None:
    expected = (REPO / "fixtures" / "CL005" / "unawaited_reset_in_async_server.py.fixed").read_text()
    result = check("--fix", "--stdin-filename", "tiny_rl/server.py", "-", cwd=project, stdin=UNAWAITED)
    assert result.code == 0, result.stderr
    assert result.stdout == expected
    assert "Fixed 1 problem." in result.stderr
    assert not (project / "tiny_rl" / "server.py").exists()  # nothing is written


def test_fix_on_stdin_reports_what_is_left_on_stderr(project: Path) -> None:
    safe = check("--fix", "-", "--output-format", "concise", cwd=project, stdin=PREFIX_IN_TRY)
    assert safe.code == 1
    assert safe.stdout == PREFIX_IN_TRY  # its fix is unsafe
    assert "-:13:20: CL003 update_weights" in safe.stderr
    unsafe = check("--fix", "--unsafe-fixes", "-", "--output-format", "json", cwd=project, stdin=PREFIX_IN_TRY)
    assert unsafe.code == 0
    assert json.loads(unsafe.stderr) == []
    write_tree(project, {"tiny_rl/server.py": PREFIX_IN_TRY})  # the same fix as on a file
    assert check("--fix", "--unsafe-fixes", "tiny_rl/server.py", cwd=project).code == 0
    assert unsafe.stdout == (project / "tiny_rl" / "server.py").read_text() != PREFIX_IN_TRY


def test_fix_on_stdin_leaves_a_fix_over_two_files_alone(project: Path) -> None:
    driver = "from vllm import LLM\n\ndef push(llm: LLM, weights):\n    llm.collective_rpc('refit', args=(weights,))\n"
    worker = (
        "class SyncWorkerExtension:\n"
        "    def refit(self, weights):\n"
        "        self.model_runner.model.load_weights(weights)\n"
        "        self.model_runner.reset_encoder_cache()\n"
    )
    write_tree(project, {"tiny_rl/driver.py": driver})
    args = ("--fix", "--unsafe-fixes", "--stdin-filename", "tiny_rl/refit_worker.py", "--output-format", "concise")
    result = check(*args, cwd=project, stdin=worker)
    assert (result.code, result.stdout) == (1, worker)
    assert "tiny_rl/refit_worker.py:4:9: CL001" in result.stderr
    assert (project / "tiny_rl" / "driver.py").read_text() == driver


def test_diff_and_fix_only_on_stdin(project: Path) -> None:
    diff = check("--diff", "--unsafe-fixes", "--stdin-filename", "server.py", cwd=project, stdin=PREFIX_IN_TRY)
    assert diff.code == 1
    assert diff.stdout.startswith("--- a/server.py\n+++ b/server.py\n")
    assert "+            await self.engine.reset_encoder_cache()" in diff.stdout
    assert diff.stderr_lines == ["Would fix 1 problem."]
    only = check("--fix-only", "-", cwd=project, stdin=WORKER)
    assert (only.code, only.stdout, only.stderr) == (0, WORKER, "")


# ---------------------------------------------------------------- suppressions


SUPPRESSED = {
    "line noqa": WORKER.replace("reset_encoder_cache()", "reset_encoder_cache()  # noqa: CL001"),
    "blanket noqa": WORKER.replace("reset_encoder_cache()", "reset_encoder_cache()  # noqa"),
    "line ignore": WORKER.replace("reset_encoder_cache()", "reset_encoder_cache()  # cachelint: ignore[CL001]"),
    "statement": WORKER.replace(
        "        self.model_runner.reset_encoder_cache()\n",
        "        done = (\n            self.model_runner.reset_encoder_cache()\n        )  # noqa: CL001\n",
    ),
    "file": "# cachelint: file-ignore[CL001]\n" + WORKER,
}


@pytest.mark.parametrize("source", SUPPRESSED.values(), ids=SUPPRESSED.keys())
def test_suppressed(tmp_path: Path, source: str) -> None:
    project = tiny_project(tmp_path / "tiny", worker=source)
    result = check("--output-format", "concise", cwd=project)
    assert (result.code, result.stdout) == (0, "All checks passed!\n" + CHECKED)


def test_suppression_on_another_line_does_not_count(tmp_path: Path) -> None:
    source = WORKER.replace("load_weights(weights)", "load_weights(weights)  # noqa: CL001")
    project = tiny_project(tmp_path / "tiny", worker=source)
    result = check("--output-format", "concise", "--quiet", cwd=project)
    assert result.code == 1
    assert result.stdout == (
        f"tiny_rl/worker.py:3:56: CL100 [*] Unused `noqa` directive (unused: CL001)\n{CL001_LINE}\n"
    )


def test_unused_suppressions_are_cl100(tmp_path: Path) -> None:
    worker = WORKER.replace("reset_encoder_cache()", "reset_encoder_cache()  # cachelint: ignore[CL001, CL003]")
    clean = "# cachelint: file-ignore[CL004]\n" + CLEAN.replace("a + b", "a + b  # noqa: CL002")
    project = tiny_project(tmp_path / "tiny", worker=worker)
    write_tree(project, {"tiny_rl/clean.py": clean})
    result = check("--output-format", "concise", "--quiet", cwd=project)
    assert result.code == 1
    assert result.stdout.splitlines() == [
        "tiny_rl/clean.py:1:1: CL100 [*] Unused `cachelint: file-ignore` directive (unused: CL004)",
        "tiny_rl/clean.py:3:19: CL100 [*] Unused `noqa` directive (unused: CL002)",
        "tiny_rl/worker.py:4:50: CL100 [*] Unused `cachelint: ignore` directive (unused: CL003)",
    ]
    # CL100's fix removes exactly the unused parts.
    assert check("--fix", "--quiet", cwd=project).code == 0
    assert (project / "tiny_rl/clean.py").read_text(encoding="utf-8") == CLEAN
    assert "# cachelint: ignore[CL001]\n" in (project / "tiny_rl/worker.py").read_text(encoding="utf-8")


def test_ignoring_cl100_keeps_unused_suppressions_quiet(tmp_path: Path) -> None:
    project = tiny_project(tmp_path / "tiny")
    write_tree(project, {"tiny_rl/clean.py": CLEAN.replace("a + b", "a + b  # noqa: CL002")})
    result = check("tiny_rl/clean.py", "--ignore", "CL100", cwd=project)
    assert result.code == 0


# ---------------------------------------------------------------- --add-noqa


def test_add_noqa_then_clean(project: Path) -> None:
    result = check("--add-noqa", cwd=project)
    assert result.code == 0
    assert result.stdout == ""
    assert result.stderr == "Added 1 noqa directive.\n"
    expected = WORKER.replace("reset_encoder_cache()\n", "reset_encoder_cache()  # noqa: CL001\n")
    assert (project / "tiny_rl/worker.py").read_text(encoding="utf-8") == expected
    assert (project / "tiny_rl/clean.py").read_text(encoding="utf-8") == CLEAN
    result = check(cwd=project)
    assert (result.code, result.stdout) == (0, "All checks passed!\n" + CHECKED)
    result = check("--add-noqa", cwd=project)
    assert (result.code, result.stderr) == (0, "Added 0 noqa directives.\n")


def test_add_noqa_extends_an_existing_noqa(tmp_path: Path) -> None:
    worker = WORKER.replace("reset_encoder_cache()", "reset_encoder_cache()  # noqa: E501")
    project = tiny_project(tmp_path / "tiny", worker=worker)
    assert check("--add-noqa", cwd=project).stderr == "Added 1 noqa directive.\n"
    text = (project / "tiny_rl/worker.py").read_text(encoding="utf-8")
    assert "self.model_runner.reset_encoder_cache()  # noqa: CL001, E501\n" in text
    assert check(cwd=project).code == 0


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("crlf", lambda text: text.replace("\n", "\r\n").encode()),
        ("bom", lambda text: b"\xef\xbb\xbf" + text.encode()),
        ("latin-1", lambda text: ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + text).encode("latin-1")),
    ],
)
def test_add_noqa_keeps_the_file_format(tmp_path: Path, name: str, encode: object) -> None:
    assert callable(encode)
    original: bytes = encode(WORKER)
    project = tiny_project(tmp_path / "tiny", worker=original)
    worker = project / "tiny_rl/worker.py"
    worker.chmod(0o640)
    result = check("--add-noqa", cwd=project)
    assert (result.code, result.stderr) == (0, "Added 1 noqa directive.\n")
    expected = encode(WORKER.replace("reset_encoder_cache()\n", "reset_encoder_cache()  # noqa: CL001\n"))
    assert worker.read_bytes() == expected
    assert worker.stat().st_mode & 0o777 == 0o640
    assert [path.name for path in worker.parent.iterdir() if path.name.startswith(".")] == []  # no temp file left
    assert check(cwd=project).code == 0


def test_add_noqa_on_the_demo_project(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo)
    result = check("--add-noqa", "--isolated", cwd=demo)
    assert (result.code, result.stderr) == (0, "Added 5 noqa directives.\n")
    server = (demo / "demo_rl/rollout_server.py").read_text(encoding="utf-8")
    assert "        await self.engine.sleep(level=1)  # noqa: CL004\n" in server
    result = check("--isolated", cwd=demo)
    demo_range = "Checked for vLLM 0.16.0\N{EN DASH}0.21.0 (pyproject.toml, dependencies).\n"
    assert (result.code, result.stdout) == (0, "All checks passed!\n" + demo_range)


def test_add_noqa_skips_lines_that_end_inside_a_string(tmp_path: Path) -> None:
    worker = WORKER.replace(
        "        self.model_runner.reset_encoder_cache()\n",
        '        self.model_runner.reset_encoder_cache(); note = """\n        """\n',
    )
    project = tiny_project(tmp_path / "tiny", worker=worker)
    result = check("--add-noqa", cwd=project)
    assert result.code == 0
    assert result.stderr_lines == [
        "cachelint: warning: tiny_rl/worker.py: 1 finding left as they are: the line ends inside a string or "
        "continues with a backslash",
        "Added 0 noqa directives.",
    ]
    assert (project / "tiny_rl/worker.py").read_text(encoding="utf-8") == worker


def test_add_noqa_leaves_files_with_syntax_errors(project: Path) -> None:
    broken = "def broken(:\n    self.model_runner.reset_encoder_cache()\n"
    write_tree(project, {"tiny_rl/broken.py": broken})
    result = check("--add-noqa", cwd=project)
    assert result.code == 0
    assert result.stderr_lines == [
        "cachelint: warning: tiny_rl/broken.py: not changed: invalid-syntax: invalid syntax",
        "Added 1 noqa directive.",
    ]
    assert (project / "tiny_rl/broken.py").read_text(encoding="utf-8") == broken
    result = check("--output-format", "concise", "--quiet", cwd=project)
    assert (result.code, result.stdout) == (1, "tiny_rl/broken.py:1:12: SyntaxError: invalid syntax\n")


def test_add_noqa_cannot_be_combined_with_fix(project: Path) -> None:
    result = check("--add-noqa", "--fix", cwd=project)
    assert (result.code, result.stderr_lines) == (2, ["cachelint: error: --add-noqa cannot be used with --fix"])
    assert (project / "tiny_rl/worker.py").read_text(encoding="utf-8") == WORKER


# ---------------------------------------------------------------- progress bar


def many_files(root: Path, count: int) -> Path:
    files: dict[str, str | bytes] = {"pyproject.toml": PYPROJECT}
    files.update({f"pkg/module_{index:03}.py": f"VALUE = {index}\n" for index in range(count)})
    return write_tree(root, files)


@needs_pty
def test_progress_bar_on_a_terminal_for_many_files(tmp_path: Path) -> None:
    project = many_files(tmp_path / "many", 60)
    code, stdout, stderr = check_on_terminal("--no-color", cwd=project, terminal="stderr")
    assert (code, stdout) == (0, f"All checks passed!\n{CHECKED}".encode())
    assert b"Analysing" in stderr
    assert b"60/60 files" in stderr
    assert stderr.endswith(b"\x1b[2K")  # transient: the bar erases itself


@needs_pty
@pytest.mark.parametrize(
    ("count", "args"),
    [
        (50, []),  # not "many"
        (60, ["--output-format", "json"]),
        (60, ["--output-format", "sarif"]),
        (60, ["--quiet"]),
    ],
)
def test_no_progress_bar(tmp_path: Path, count: int, args: list[str]) -> None:
    project = many_files(tmp_path / "many", count)
    code, _, stderr = check_on_terminal(*args, cwd=project, terminal="stderr")
    assert code == 0
    assert stderr == b""


def test_no_progress_bar_when_piped(tmp_path: Path) -> None:
    project = many_files(tmp_path / "many", 60)
    result = check(cwd=project)
    assert (result.code, result.stdout, result.stderr) == (0, "All checks passed!\n" + CHECKED, "")


# ---------------------------------------------------------------- a reader that stops early


def many_findings(root: Path, count: int) -> Path:
    """A project whose one file holds `count` CL001 findings: far more output than a pipe holds."""
    methods = "".join(
        f"    def update_weights_{index}(self, weights):\n        self.model_runner.reset_encoder_cache()\n"
        for index in range(count)
    )
    return write_tree(root, {"pyproject.toml": PYPROJECT, "pkg/worker.py": f"class W:\n{methods}"})


FORMATS = ["github", "json-lines", "full", "concise", "json", "sarif"]
# Python's stdout unbuffered (PYTHONUNBUFFERED, `python -u`) or buffered, as a pipe makes it.
BUFFERING = {"unbuffered": {"PYTHONUNBUFFERED": "1"}, "buffered": {"PYTHONUNBUFFERED": ""}}


@pytest.mark.parametrize("buffering", BUFFERING)
@pytest.mark.parametrize("output_format", FORMATS)
def test_a_reader_that_stops_early_stops_cachelint_quietly(tmp_path: Path, output_format: str, buffering: str) -> None:
    """`cachelint check | head -c100`: a real pipe whose reader closes it after 100 bytes, while the
    report (far larger than a pipe holds) is being written. No message, no traceback; the status a
    shell gives a Unix tool that a closed pipe stopped (128 + SIGPIPE), with --exit-zero too."""
    project = many_findings(tmp_path / "many", 2000)
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "cachelint", "check", "--no-cache", "--exit-zero", "--output-format", output_format],
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment(BUFFERING[buffering]),
        )
        assert process.stdout is not None
        first = process.stdout.read(100)
        process.stdout.close()
        code = process.wait(timeout=300)
        stderr.seek(0)
        errors = stderr.read()
    assert len(first) == 100
    assert (code, errors) == (141, b"")


@pytest.mark.parametrize("buffering", BUFFERING)
@pytest.mark.parametrize("output_format", FORMATS)
def test_a_full_stdout_is_an_error_not_an_internal_one(tmp_path: Path, output_format: str, buffering: str) -> None:
    """`cachelint check > /dev/full`: every write fails with ENOSPC; one line says so, exit 2."""
    project = tiny_project(tmp_path)
    with Path("/dev/full").open("wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "cachelint", "check", "--no-cache", "--output-format", output_format],
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            env=environment(BUFFERING[buffering]),
            timeout=300,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "cachelint: error: cannot write to standard output: No space left on device"
    ]


# ---------------------------------------------------------------- --help, rule, rules

REPO = Path(__file__).resolve().parent.parent


def test_help_lists_every_command_with_its_whole_summary(tmp_path: Path) -> None:
    from cachelint.cli import main

    result = cachelint("--help", cwd=tmp_path)
    assert result.code == 0
    listed = dict(
        line.strip().split(None, 1) for line in result.stdout.split("Commands:\n", 1)[1].splitlines() if line.strip()
    )
    summaries = {name: (command.help or "").split("\n\n", 1)[0] for name, command in main.commands.items()}
    assert listed == summaries
    assert all(summary.endswith(".") and "\n" not in summary for summary in summaries.values())


@pytest.mark.parametrize("asked", ["CL002", "cl002", "version-gated-reset"])
def test_rule_page_is_plain_markdown_when_not_on_a_terminal(tmp_path: Path, asked: str) -> None:
    """As `ruff rule`: `cachelint rule CL002 > CL002.md` writes the page as written, backticks and all."""
    result = cachelint("rule", asked, cwd=tmp_path)
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == (REPO / "rules" / "CL002.md").read_text(encoding="utf-8")


@needs_pty
def test_rule_page_is_rendered_on_a_terminal(tmp_path: Path) -> None:
    code, stdout, _ = cachelint_on_terminal("rule", "CL002", cwd=tmp_path, terminal="stdout")
    assert code == 0
    assert b"CL002 version-gated-reset" in stdout
    assert b"## What it does" not in stdout  # rendered: headings lose their markers


def test_unknown_rule_is_an_error(tmp_path: Path) -> None:
    result = cachelint("rule", "CL999", cwd=tmp_path)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr_lines == ["cachelint: error: unknown rule 'CL999' (see `cachelint rules`)"]


# ---------------------------------------------------------------- --output-file


@pytest.mark.parametrize("output_format", ["full", "concise", "json", "json-lines", "sarif", "github"])
def test_output_file_gets_the_report_and_stdout_nothing(project: Path, output_format: str) -> None:
    on_stdout = check("--output-format", output_format, cwd=project)
    result = check("--output-format", output_format, "-o", "reports/cachelint.out", cwd=project)
    assert (result.code, result.stdout, result.stderr) == (1, "", "")
    assert (project / "reports/cachelint.out").read_text(encoding="utf-8") == on_stdout.stdout
    assert on_stdout.code == 1


def test_output_file_exit_code_and_no_colour(project: Path) -> None:
    clean = check("--output-file", "out.txt", "tiny_rl/clean.py", cwd=project, env={"FORCE_COLOR": "1"})
    assert (clean.code, clean.stdout) == (0, "")
    assert (project / "out.txt").read_text(encoding="utf-8") == "All checks passed!\n" + CHECKED
    found = check("-o", "out.txt", "--exit-zero", cwd=project, env={"FORCE_COLOR": "1"})
    assert (found.code, found.stdout) == (0, "")
    report = (project / "out.txt").read_text(encoding="utf-8")
    assert "tiny_rl/worker.py:4:9: CL001" in report
    assert ESC not in report


def test_output_file_gets_the_diff(tmp_path: Path) -> None:
    demo = shutil.copytree(DEMO, tmp_path / "demo")
    on_stdout = check("--diff", cwd=demo)
    result = check("--diff", "-o", "fix.diff", cwd=demo)
    assert (result.code, result.stdout, on_stdout.code) == (1, "", 1)
    assert (demo / "fix.diff").read_text(encoding="utf-8") == on_stdout.stdout
    assert "demo_rl/rollout_server.py" in on_stdout.stdout


@pytest.mark.parametrize(
    ("target", "reason"),
    [("tiny_rl/clean.py/report.txt", "Not a directory"), ("tiny_rl", "is a directory")],
)
def test_output_file_that_cannot_be_written_is_an_error(project: Path, target: str, reason: str) -> None:
    result = check("-o", target, cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert reason in result.stderr
    assert len(result.stderr_lines) == 1 or "Usage:" in result.stderr  # click's own usage error for a folder
    assert "Traceback" not in result.stderr
    assert (project / "tiny_rl/clean.py").read_text(encoding="utf-8") == CLEAN


def test_output_file_is_left_alone_on_an_error(project: Path) -> None:
    (project / "out.txt").write_text("earlier report\n", encoding="utf-8")
    result = check("-o", "out.txt", "--select", "CL999", cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert (project / "out.txt").read_text(encoding="utf-8") == "earlier report\n"
