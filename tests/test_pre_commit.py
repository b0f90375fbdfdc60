"""The pre-commit hooks of this repository (.pre-commit-hooks.yaml), run by the real `pre-commit`.

The hook repository is a temporary git copy of the current working tree (tracked files plus new,
not-ignored ones) committed once, so the test checks the code as it is, not the last commit.
pre-commit installs it with pip from that path (its dependencies come from PyPI) into a temporary
PRE_COMMIT_HOME; no user or global configuration is read for writing or changed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import REPO, environment, write_tree

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

IDENTITY = ("-c", "user.name=cachelint tests", "-c", "user.email=tests@cachelint.invalid", "-c", "commit.gpgsign=false")

REFIT = """\
from vllm.v1.engine.async_llm import AsyncLLM

from agent_rl.cache import invalidate_kv_cache


async def refit(engine: AsyncLLM, ipc_handles: dict) -> None:
    await engine.wait_for_requests_to_drain()  # nothing in flight: the prefix reset takes effect (CL007)
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

FIXED = """\
async def invalidate_kv_cache(engine) -> None:
    await engine.reset_prefix_cache()
    await engine.reset_encoder_cache()
"""

FINDING = "agent_rl/cache.py:2:11: CL003 refit (weight_sync.py:6) -> invalidate_kv_cache (cache.py:1) resets the prefix"


def git(*args: str, cwd: Path) -> str:
    completed = subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=True, env=environment()
    )
    return completed.stdout


def working_tree_files() -> list[str]:
    """This checkout's files as `git status` sees them: tracked and untracked, minus the ignored."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): take everything
        return [
            path.relative_to(REPO).as_posix()
            for path in REPO.rglob("*")
            if path.is_file() and not {".git", "__pycache__", ".venv"} & set(path.relative_to(REPO).parts)
        ]
    return [name for name in listed.split("\0") if name and (REPO / name).is_file()]


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git repository holding the current working tree, and its commit."""
    copy = tmp_path_factory.mktemp("hook-repo") / "cachelint"
    for name in working_tree_files():
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    assert (copy / ".pre-commit-hooks.yaml").is_file()
    git("init", "-q", cwd=copy)
    git("add", "-A", cwd=copy)
    git("commit", "-q", "-m", "working tree", cwd=copy)
    return copy, git("rev-parse", "HEAD", cwd=copy).strip()


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared by the tests of this module so that the hook environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with a CL003 bug split across two files."""
    root = write_tree(
        tmp_path / "agent",
        {
            # Only CL003, so that the expected output does not move when other rules change.
            "pyproject.toml": (
                '[project]\nname = "agent-rl"\nversion = "0"\ndependencies = ["vllm>=0.18"]\n\n'
                '[tool.cachelint]\nselect = ["CL003"]\n'
            ),
            "agent_rl/__init__.py": "",
            "agent_rl/weight_sync.py": REFIT,
            "agent_rl/cache.py": PREFIX_ONLY,
        },
    )
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "agent", cwd=root)
    return root


def pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = environment(
        {
            "PRE_COMMIT_HOME": str(home),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "GIT_AUTHOR_NAME": "cachelint tests",
            "GIT_AUTHOR_EMAIL": "tests@cachelint.invalid",
            "GIT_COMMITTER_NAME": "cachelint tests",
            "GIT_COMMITTER_EMAIL": "tests@cachelint.invalid",
        }
    )
    env.pop("PRE_COMMIT", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args, "--color", "never"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def test_cachelint_hook_reports_the_bug(hook_repo: tuple[Path, str], pre_commit_home: Path, project: Path) -> None:
    repo, rev = hook_repo
    result = pre_commit(
        "try-repo", str(repo), "cachelint", "--ref", rev, "--all-files", cwd=project, home=pre_commit_home
    )
    assert result.returncode == 1, output(result)
    assert "cachelint" in result.stdout
    assert "Failed" in result.stdout
    assert FINDING in result.stdout
    assert "Found 1 problem in 1 file." in result.stdout


def test_cachelint_hook_indexes_the_whole_project(
    hook_repo: tuple[Path, str], pre_commit_home: Path, project: Path
) -> None:
    """Only cache.py is passed (as when only it is staged): the refit root in weight_sync.py still counts."""
    repo, rev = hook_repo
    args = ("try-repo", str(repo), "cachelint", "--ref", rev, "--files")
    result = pre_commit(*args, "agent_rl/cache.py", cwd=project, home=pre_commit_home)
    assert result.returncode == 1, output(result)
    assert FINDING in result.stdout
    # weight_sync.py alone has nothing to report: findings are only for the files passed.
    result = pre_commit(*args, "agent_rl/weight_sync.py", cwd=project, home=pre_commit_home)
    assert result.returncode == 0, output(result)
    assert "Passed" in result.stdout


def test_cachelint_fix_hook_repairs_the_bug(hook_repo: tuple[Path, str], pre_commit_home: Path, project: Path) -> None:
    repo, rev = hook_repo
    config = (
        "repos:\n"
        f"  - repo: {repo.as_posix()}\n"
        f"    rev: {rev}\n"
        "    hooks:\n"
        "      - id: cachelint-fix\n"
        "        args: [--unsafe-fixes]\n"
    )
    write_tree(project, {".pre-commit-config.yaml": config})
    git("add", ".pre-commit-config.yaml", cwd=project)
    git("commit", "-q", "-m", "pre-commit", cwd=project)

    first = pre_commit("run", "--all-files", cwd=project, home=pre_commit_home)
    assert first.returncode == 1, output(first)
    assert "cachelint (fix)" in first.stdout
    assert "files were modified by this hook" in first.stdout
    assert "Fixed 1 problem." in first.stdout
    assert (project / "agent_rl/cache.py").read_text(encoding="utf-8") == FIXED
    assert (project / "agent_rl/weight_sync.py").read_text(encoding="utf-8") == REFIT

    second = pre_commit("run", "--all-files", cwd=project, home=pre_commit_home)
    assert second.returncode == 0, output(second)
    assert "Passed" in second.stdout
    assert (project / "agent_rl/cache.py").read_text(encoding="utf-8") == FIXED

    # The report-only hook agrees that the bug is gone.
    check = pre_commit(
        "try-repo", str(repo), "cachelint", "--ref", rev, "--all-files", cwd=project, home=pre_commit_home
    )
    assert check.returncode == 0, output(check)


MONOREPO_SERVER = """\
from vllm.v1.engine.async_llm import AsyncLLM


async def pause(engine: AsyncLLM) -> None:
    await engine.pause_generation(clear_cache=True)
"""
# Both projects send images to vLLM, so the multimodal rules apply to them.
IMAGE_PROMPTS = """\
def image_prompt(prompt_ids, image):
    return {"prompt_token_ids": prompt_ids, "multi_modal_data": {"image": image}}
"""
MONOREPO_FINDING = "a/pa/server.py:5:11: CL004 `pause_generation(...)` clears the engine's multimodal processor cache"


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    """Two projects in one git repository: `a` supports vLLM 0.18-0.19 (CL004 applies), `b` 0.22+ (it does not)."""
    root = write_tree(
        tmp_path / "mono",
        {
            "a/pyproject.toml": '[project]\nname = "a"\nversion = "0"\ndependencies = ["vllm>=0.18,<0.20"]\n',
            "a/pa/server.py": MONOREPO_SERVER,
            "a/pa/prompts.py": IMAGE_PROMPTS,
            "b/pyproject.toml": '[project]\nname = "b"\nversion = "0"\ndependencies = ["vllm>=0.22,<=0.33.0"]\n',
            "b/pb/server.py": MONOREPO_SERVER,
            "b/pb/prompts.py": IMAGE_PROMPTS,
        },
    )
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "monorepo", cwd=root)
    return root


@pytest.mark.parametrize(
    "selection",
    [["--all-files"], ["--files", "b/pb/server.py", "a/pa/server.py"], ["--files", "a/pa/server.py", "b/pb/server.py"]],
    ids=["all files", "b first", "a first"],
)
def test_cachelint_hook_checks_each_project_of_a_monorepo_with_its_range(
    hook_repo: tuple[Path, str], pre_commit_home: Path, monorepo: Path, selection: list[str]
) -> None:
    repo, rev = hook_repo
    result = pre_commit(
        "try-repo", str(repo), "cachelint", "--ref", rev, *selection, cwd=monorepo, home=pre_commit_home
    )
    assert result.returncode == 1, output(result)
    assert MONOREPO_FINDING in result.stdout
    assert "b/pb/server.py" not in result.stdout
    assert "Found 1 problem in 1 file." in result.stdout
    assert "Checked for vLLM 0.18.0\N{EN DASH}0.19.1 (a/pyproject.toml, dependencies)." in result.stdout
    assert "Checked for vLLM 0.22.0\N{EN DASH}0.33.0 (b/pyproject.toml, dependencies)." in result.stdout


def test_the_documented_snippet_runs_at_the_release_tag(
    hook_repo: tuple[Path, str], pre_commit_home: Path, project: Path
) -> None:
    """The docs' `.pre-commit-config.yaml` (docs/ci.md) as written, its `repo:` pointed at this tree tagged
    `v<version>` (the tag made at release, docs/RELEASING.md): its `rev:` resolves and the hook runs."""
    from cachelint import __version__

    repo, _ = hook_repo
    git("tag", "-f", f"v{__version__}", cwd=repo)
    readme = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    snippet = readme.split("# .pre-commit-config.yaml\n", 1)[1].split("```", 1)[0]
    [placeholder] = re.findall(r"- repo: (\S+)", snippet)
    config = snippet.replace(placeholder, repo.as_posix(), 1)
    assert f"rev: v{__version__}\n" in config
    write_tree(project, {".pre-commit-config.yaml": config})
    result = pre_commit("run", "--all-files", cwd=project, home=pre_commit_home)
    assert result.returncode == 1, output(result)
    assert FINDING in result.stdout

    tried = pre_commit(
        "try-repo", str(repo), "cachelint", "--ref", f"v{__version__}", "--all-files", cwd=project, home=pre_commit_home
    )
    assert tried.returncode == 1, output(tried)
    assert FINDING in tried.stdout
