"""Several projects in one run (a monorepo): each file is checked with its own project's root,
configuration and supported vLLM range, whatever the order of the paths; and every output says which
range was used and where it came from."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from cli_runner import ASSUMED, CHECKED, NO_PIN_WARNING, WORKER, check, tiny_project, write_tree

from cachelint.vllm_range import known_releases, newest_known_release

# Pausing with clear_cache=True desyncs the processor cache on vLLM 0.17-0.21 (CL004): a real bug in a
# project that supports 0.18-0.19, none in one that supports 0.22 and later.
SERVER = """\
from vllm.v1.engine.async_llm import AsyncLLM


class Server:
    def __init__(self, engine: AsyncLLM) -> None:
        self.engine = engine

    async def pause(self) -> None:
        await self.engine.pause_generation(clear_cache=True)
"""
# Both projects send images to vLLM, so the multimodal rules apply to them.
IMAGE_PROMPTS = """\
def image_prompt(prompt_ids, image):
    return {"prompt_token_ids": prompt_ids, "multi_modal_data": {"image": image}}
"""
PAUSE_FIXED = SERVER + "        await self.engine.reset_mm_cache()\n"

A_RANGE = "Checked for vLLM 0.18.0\N{EN DASH}0.19.1 (a/pyproject.toml, dependencies)."
B_RANGE = f"Checked for vLLM 0.22.0\N{EN DASH}{newest_known_release()} (b/pyproject.toml, dependencies)."
B_OPEN = (
    "cachelint: warning: the supported range (b/pyproject.toml, dependencies) reaches past vLLM "
    f"{newest_known_release()}, the newest release cachelint knows: findings for newer releases are not known"
)
A_FINDINGS = ["a/pa/server.py:9:15: CL004", "a/pa/worker.py:4:9: CL001"]


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    """`a` supports vLLM 0.18-0.19 and runs every rule; `b` supports 0.22+ and ignores CL001. Both hold the
    same two files."""
    root = write_tree(
        tmp_path / "mono",
        {
            "a/pyproject.toml": '[project]\nname = "a"\nversion = "0"\ndependencies = ["vllm>=0.18,<0.20"]\n',
            "a/pa/__init__.py": "",
            "a/pa/server.py": SERVER,
            "a/pa/prompts.py": IMAGE_PROMPTS,
            "a/pa/worker.py": WORKER,
            "b/pyproject.toml": (
                '[project]\nname = "b"\nversion = "0"\ndependencies = ["vllm>=0.22"]\n'
                '[tool.cachelint]\nignore = ["CL001"]\n'
            ),
            "b/pb/__init__.py": "",
            "b/pb/server.py": SERVER,
            "b/pb/prompts.py": IMAGE_PROMPTS,
            "b/pb/worker.py": WORKER,
        },
    )
    (root / ".git").mkdir()
    return root


def codes(stdout: str) -> list[str]:
    """`path:line:col: CODE` of each finding of a concise report."""
    return [line.split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in stdout.splitlines() if ": CL" in line]


ORDERS = {
    "b first": ["b/pb/server.py", "b/pb/worker.py", "a/pa/server.py", "a/pa/worker.py"],
    "a first": ["a/pa/worker.py", "a/pa/server.py", "b/pb/worker.py", "b/pb/server.py"],
    "walked parent": ["."],
    "project folders": ["b", "a"],
}


@pytest.mark.parametrize("paths", ORDERS.values(), ids=ORDERS.keys())
def test_each_file_is_checked_with_its_own_project(monorepo: Path, paths: list[str]) -> None:
    result = check("--output-format", "concise", "--no-cache", *paths, cwd=monorepo)
    assert result.code == 1
    assert codes(result.stdout) == A_FINDINGS
    # One report: one count, then each project's range, in the order of their folders.
    assert result.stdout.splitlines()[-4:] == [
        "Found 2 problems in 2 files.",
        "(1 hidden fix can be enabled with the --unsafe-fixes option.)",
        A_RANGE,
        B_RANGE,
    ]
    assert result.stderr_lines == [B_OPEN]


def test_projects_analysed_side_by_side_find_what_one_after_another_finds(
    monorepo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A monorepo walked whole is analysed a project per process when there are cores to spare; the
    report is the same, and each process fills its project's cache. Warm, the caches answer in this
    process, without reading the files (their sizes, times and inodes are those recorded)."""
    from cachelint import engine
    from cachelint.cli import settings_finder

    monkeypatch.chdir(monorepo)
    monkeypatch.setattr(engine, "_now_ns", lambda: time.time_ns() + 60 * 10**9)  # files written well before
    finder = settings_finder(None, False, {})
    one_after_another = engine.analyze([Path()], finder(Path()), settings_for=finder, workers=1)
    report = engine.ProjectRun.report

    def noting_the_process(run: engine.ProjectRun, findings: list[engine.Finding]) -> engine.Analysis:
        analysis = report(run, findings)
        analysis.warnings.append(f"process {os.getpid()}")
        return analysis

    monkeypatch.setattr(engine.ProjectRun, "report", noting_the_process)
    for run in ("cold", "warm"):
        with engine.recording() as stats:
            side_by_side = engine.analyze([Path()], finder(Path()), settings_for=finder, workers=2, use_cache=True)
        assert side_by_side.findings == one_after_another.findings
        assert side_by_side.projects == one_after_another.projects
        assert side_by_side.sources.keys() == one_after_another.sources.keys()
        # cold, a process per project; warm, the caches answer here
        assert (f"process {os.getpid()}" in side_by_side.warnings) == (run == "warm")
        assert (stats.projects, stats.stored) == (2, 2 if run == "warm" else 0)
        assert stats.read == (0 if run == "warm" else 8)


def test_the_fixer_works_per_project(monorepo: Path) -> None:
    result = check("--fix", "--unsafe-fixes", "--no-cache", "b", "a", cwd=monorepo)
    assert (monorepo / "a/pa/server.py").read_text(encoding="utf-8") == PAUSE_FIXED
    assert (monorepo / "b/pb/server.py").read_text(encoding="utf-8") == SERVER  # 0.22+: nothing to fix
    assert (monorepo / "b/pb/worker.py").read_text(encoding="utf-8") == WORKER  # b ignores CL001
    assert result.code == 1  # a's CL001 has no fix: still reported
    assert codes(result.stdout) == ["a/pa/worker.py:4:9: CL001"]
    assert "Fixed 1 problem." in result.stdout


def test_add_noqa_works_per_project(monorepo: Path) -> None:
    result = check("--add-noqa", "b/pb/server.py", "a/pa/server.py", cwd=monorepo)
    assert (result.code, result.stderr_lines) == (0, [B_OPEN, "Added 1 noqa directive."])
    assert "pause_generation(clear_cache=True)  # noqa: CL004\n" in (monorepo / "a/pa/server.py").read_text()
    assert (monorepo / "b/pb/server.py").read_text(encoding="utf-8") == SERVER


def test_json_and_sarif_carry_each_finding_s_range(monorepo: Path) -> None:
    findings = json.loads(check("--output-format", "json", ".", cwd=monorepo).stdout)
    assert {finding["filename"]: finding["vllm_range"] for finding in findings} == {
        "a/pa/server.py": {
            "range": "0.18.0\N{EN DASH}0.19.1",
            "source": "a/pyproject.toml, dependencies",
            "newer": "excluded",
        },
        "a/pa/worker.py": {
            "range": "0.18.0\N{EN DASH}0.19.1",
            "source": "a/pyproject.toml, dependencies",
            "newer": "excluded",
        },
    }
    sarif = json.loads(check("--output-format", "sarif", ".", cwd=monorepo).stdout)
    projects = sarif["runs"][0]["properties"]["supportedVllm"]
    assert [(p["projectRoot"]["uri"], p["range"], p["source"], p["newer"]) for p in projects] == [
        ("a", "0.18.0\N{EN DASH}0.19.1", "a/pyproject.toml, dependencies", "excluded"),
        ("b", f"0.22.0\N{EN DASH}{newest_known_release()}", "b/pyproject.toml, dependencies", "unchecked"),
    ]
    assert projects[0]["pins"] == [
        {
            "file": {"uri": "a/pyproject.toml", "uriBaseId": "%SRCROOT%"},
            "requirement": "vllm>=0.18,<0.20",
            "where": "dependencies",
        }
    ]


def test_show_settings_names_the_range_its_file_and_requirement(monorepo: Path) -> None:
    result = check("--show-settings", "a/pa/server.py", cwd=monorepo)
    assert result.code == 0
    shown = json.loads(result.stdout)["supported-vllm"]
    assert shown["project-root"] == "a"
    assert shown["range"] == "0.18.0\N{EN DASH}0.19.1"
    assert shown["source"] == "a/pyproject.toml, dependencies"
    assert shown["pins"] == [{"file": "a/pyproject.toml", "requirement": "vllm>=0.18,<0.20", "where": "dependencies"}]
    assert result.stderr == ""
    # b's own settings and range
    result = check("--show-settings", "b", cwd=monorepo)
    shown = json.loads(result.stdout)
    assert shown["ignore"] == ["CL001"]
    assert shown["config-path"] == str(monorepo / "b/pyproject.toml")
    assert shown["supported-vllm"]["range"] == f"0.22.0\N{EN DASH}{newest_known_release()}"
    assert result.stderr_lines == [B_OPEN]


def test_show_settings_for_a_range_set_by_configuration_or_flag(tmp_path: Path) -> None:
    project = tiny_project(tmp_path / "tiny")
    write_tree(project, {"cachelint.toml": 'vllm = ">=0.20,<0.21"\n'})
    shown = json.loads(check("--show-settings", cwd=project).stdout)["supported-vllm"]
    assert (shown["range"], shown["source"], shown["pins"]) == (
        "0.20.0\N{EN DASH}0.20.2",
        'cachelint.toml, vllm = ">=0.20,<0.21"',
        [],
    )
    (project / "cachelint.toml").unlink()
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + '[tool.cachelint]\nvllm = "==0.19.1"\n')
    shown = json.loads(check("--show-settings", cwd=project).stdout)["supported-vllm"]
    assert (shown["range"], shown["source"]) == ("0.19.1", 'pyproject.toml, [tool.cachelint] vllm = "==0.19.1"')
    shown = json.loads(check("--show-settings", "--vllm", "0.24.0", cwd=project).stdout)["supported-vllm"]
    assert (shown["range"], shown["source"]) == ("0.24.0", '--vllm "0.24.0"')
    result = check("--output-format", "concise", "--vllm", "0.24.0", cwd=project)
    assert result.stdout.endswith('Checked for vLLM 0.24.0 (--vllm "0.24.0").\n')


def test_a_project_without_a_pin_warns_once(tmp_path: Path) -> None:
    project = tiny_project(tmp_path / "tiny", pyproject='[project]\nname = "tiny"\n')
    write_tree(project, {"tiny_rl/second.py": WORKER.replace("WorkerExtension", "OtherExtension")})
    result = check("--output-format", "concise", cwd=project)
    assert result.code == 1
    assert result.stdout.endswith(ASSUMED)
    assert result.stderr_lines == [NO_PIN_WARNING]
    # A run no rule can flag does not depend on the range: no warning.
    result = check("tiny_rl/clean.py", cwd=project)
    assert (result.code, result.stderr) == (0, "")
    # A pin, a setting or the flag silences it.
    assert check("--vllm", "<=0.33.0", cwd=project).stderr == ""


def test_the_summary_names_the_range_of_a_pinned_project(tmp_path: Path) -> None:
    project = tiny_project(tmp_path / "tiny")
    result = check("--output-format", "concise", "tiny_rl/clean.py", cwd=project)
    assert (result.code, result.stdout, result.stderr) == (0, "All checks passed!\n" + CHECKED, "")


@pytest.mark.parametrize(
    ("where", "content", "message"),
    [
        (
            "cachelint.toml",
            'vllm = "<0.5"\n',
            "{root}/cachelint.toml: `vllm` = '<0.5' matches no vLLM release cachelint knows ({known})",
        ),
        (
            "cachelint.toml",
            'vllm = ">=0.20,<0.10"\n',
            "{root}/cachelint.toml: `vllm` = '>=0.20,<0.10' matches no vLLM release cachelint knows ({known})",
        ),
    ],
    ids=["setting before the facts", "contradictory setting"],
)
def test_an_empty_range_is_an_error(tmp_path: Path, where: str, content: str, message: str) -> None:
    root = write_tree(tmp_path / "p", {where: content, "a.py": "import vllm\nvllm.LLM().reset_prefix_cache()\n"})
    known = f"0.6.0\N{EN DASH}{newest_known_release()}"
    for args in ([], ["--show-settings"], ["--fix"]):
        result = check(*args, cwd=root)
        assert (result.code, result.stdout) == (2, "")
        assert result.stderr_lines == ["cachelint: error: " + message.format(root=root, known=known)]


def test_an_old_pin_in_one_sub_project_does_not_stop_the_run(tmp_path: Path) -> None:
    """A monorepo whose evaluation sub-project pins a vLLM older than the facts: that project gets a
    warning and the oldest known release in its place, the trainer beside it is checked as pinned, and
    the run's exit code comes from the findings; `--vllm` that matches nothing still exits 2."""
    root = write_tree(
        tmp_path / "mono",
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            "eval/pyproject.toml": '[project]\nname = "ev"\ndependencies = ["vllm==0.5.5"]\n',
            "eval/ev/__init__.py": "",
            "eval/ev/run_eval.py": "import vllm\n\ndef reset(llm: vllm.LLM):\n    llm.reset_prefix_cache()\n",
            "trainer/pyproject.toml": '[project]\nname = "t"\ndependencies = ["vllm>=0.18"]\n',
            "trainer/t/__init__.py": "",
            "trainer/t/clean.py": "import vllm\n",
        },
    )
    result = check("--output-format", "concise", ".", cwd=root)
    assert result.code == 0, result.stderr
    oldest = known_releases()[0]
    assert (
        "cachelint: warning: eval/pyproject.toml, dependencies: the vLLM pins (`vllm==0.5.5`) match no release "
        f"cachelint knows ({oldest}\N{EN DASH}{newest_known_release()}): {oldest}, the oldest release it knows, "
        "stands in for them"
    ) in result.stderr
    assert f"Checked for vLLM {oldest} (eval/pyproject.toml, dependencies)" in result.stdout
    assert "Checked for vLLM 0.18.0" in result.stdout
    assert check("--vllm", "<0.5", ".", cwd=root).code == 2


def test_a_project_on_a_vllm_newer_than_the_facts_is_checked_as_the_newest_known(tmp_path: Path) -> None:
    """The day vLLM ships a release, a project that moves to it is still checked (as the newest
    release cachelint knows, with a warning), by its pins, a setting or the flag; not refused."""
    newest = newest_known_release()
    newer = f"{newest.major}.{newest.minor + 1}.0"
    project = tiny_project(tmp_path / "tiny", pyproject=f'[project]\nname = "tiny"\ndependencies = ["vllm=={newer}"]\n')
    warning = (
        "cachelint: warning: the supported range ({source}) holds only vLLM releases newer than {newest}, the "
        "newest release cachelint knows: they are checked as {newest}, and findings particular to newer "
        "releases are not known"
    )
    for args, source in (
        ([], "pyproject.toml, dependencies"),
        (["--vllm", f">={newer}"], f'--vllm ">={newer}"'),
    ):
        result = check("--output-format", "concise", *args, cwd=project)
        assert result.code == 1
        assert "tiny_rl/worker.py:4:" in result.stdout
        assert result.stdout.endswith(f"Checked for vLLM {newest} (standing in for the newer releases of {source}).\n")
        assert result.stderr_lines == [warning.format(source=source, newest=newest)]
    shown = json.loads(check("--show-settings", cwd=project).stdout)["supported-vllm"]
    assert (shown["range"], shown["source"], shown["newer"]) == (
        str(newest),
        "pyproject.toml, dependencies",
        "standing-in",
    )
    findings = json.loads(check("--output-format", "json", cwd=project).stdout)
    assert findings[0]["vllm_range"]["newer"] == "standing-in"


def test_an_empty_range_from_the_flag_is_an_error(tmp_path: Path) -> None:
    project = tiny_project(tmp_path / "tiny")
    result = check("--vllm", "<0.5", cwd=project)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr_lines == [
        f"cachelint: error: --vllm = '<0.5' matches no vLLM release cachelint knows (0.6.0\N{EN DASH}"
        f"{newest_known_release()})"
    ]


def test_a_file_in_no_project_is_checked_with_its_folder_s_own_files_and_packages(tmp_path: Path) -> None:
    """A file that no project holds (no project file, repository or requirements file at or above it):
    its folder is the project, with the packages below it, not another program's files there (a cache,
    a run's folder with its own requirements)."""
    home = write_tree(
        tmp_path / "home",
        {
            "script.py": WORKER,
            "helpers.py": "",
            "pkg/__init__.py": "",
            "pkg/mod.py": "",
            ".cache/seed/worker.py": WORKER,
            "old_run/requirements.txt": "vllm==0.9.0\n",
            "old_run/run.py": WORKER,
        },
    )
    if any((folder / ".git").exists() or (folder / "pyproject.toml").exists() for folder in home.parents):
        pytest.skip("the temporary folder lies in a project")
    result = check("-v", "--output-format", "concise", "script.py", cwd=home)
    assert codes(result.stdout) == ["script.py:4:9: CL001"]
    assert next(line for line in result.stderr_lines if line.startswith("cachelint: read ")).startswith(
        "cachelint: read 4 files "  # script.py, helpers.py and pkg's two
    )
    assert result.stdout.endswith(ASSUMED)
    # Walked whole, the folder holds everything below it; the run's folder is a project of its own.
    result = check("--output-format", "concise", ".", cwd=home)
    assert codes(result.stdout) == [
        ".cache/seed/worker.py:4:9: CL001",
        "old_run/run.py:4:9: CL001",
        "script.py:4:9: CL001",
    ]
    assert result.stdout.endswith(ASSUMED + "Checked for vLLM 0.9.0 (old_run/requirements.txt).\n")
