"""An inference engine's own source inside the tree (a vendored vLLM, a fork of it, SGLang) is the
library, not the project: nothing inside it is reported, and the findings elsewhere are those of the
same tree without it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_runner import REPO, check, write_tree
from packaging.version import Version

from cachelint.vendored import inside_engine_source, vendored_vllm_version
from cachelint.vllm_range import known_releases

FIXTURE = REPO / "fixtures" / "CL003" / "vendored_vllm"
# The vendored copy's worker resets only the workers' encoder cache: CL001 when it is checked as code.
VENDORED_WORKER = "vllm/v1/worker/gpu_worker.py"


def findings(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if ": CL" in line]


def located(stdout: str) -> list[str]:
    """`path:line:col: CODE` of each finding."""
    return [" ".join(line.split(" ")[:2]) for line in findings(stdout)]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "tree", ignore=shutil.ignore_patterns("*.fixed")))


@pytest.fixture
def without_copy(tree: Path, tmp_path: Path) -> Path:
    """The same tree without the vendored vLLM."""
    other = Path(shutil.copytree(tree, tmp_path / "alone"))
    shutil.rmtree(other / "vllm")
    return other


def test_nothing_inside_a_vendored_vllm_and_the_same_findings_elsewhere(tree: Path, without_copy: Path) -> None:
    vendored = check("--no-cache", "--output-format", "concise", cwd=tree)
    alone = check("--no-cache", "--output-format", "concise", cwd=without_copy)
    assert (
        findings(vendored.stdout)
        == findings(alone.stdout)
        == [
            "trainer/rollout.py:15:15: CL003 update_weights (rollout.py:12) resets the prefix cache but not the "
            "encoder cache: vision-encoder outputs computed with the old weights are reused for repeated images on "
            "0.22.0-0.29.0 (every supported release)"
        ]
    )
    assert (vendored.code, vendored.stdout) == (alone.code, alone.stdout)


def test_a_vendored_file_named_on_the_command_line_is_checked_unless_excludes_are_forced(tree: Path) -> None:
    named = check("--no-cache", "--output-format", "concise", VENDORED_WORKER, cwd=tree)
    assert located(named.stdout) == [f"{VENDORED_WORKER}:4:9: CL001"]
    for paths in ([VENDORED_WORKER], ["vllm"], ["vllm/v1"]):
        forced = check("--no-cache", "--output-format", "concise", "--force-exclude", *paths, cwd=tree)
        assert (forced.code, findings(forced.stdout)) == (0, [])


def test_the_vendored_release_is_the_supported_range(tree: Path, without_copy: Path) -> None:
    (tree / "vllm" / "_version.py").write_text("__version__ = version = '0.18.0'\n", encoding="utf-8")
    vendored = check("--no-cache", "--output-format", "concise", cwd=tree)
    pinned = check("--no-cache", "--output-format", "concise", "--vllm", "0.18.0", cwd=without_copy)
    assert findings(vendored.stdout) == findings(pinned.stdout)
    assert "Checked for vLLM 0.18.0 (vllm/_version.py, the vendored vLLM).\n" in vendored.stdout
    settings = check("--show-settings", cwd=tree)
    assert '"source": "vllm/_version.py, the vendored vLLM"' in settings.stdout
    flag = check("--no-cache", "--output-format", "concise", "--vllm", ">=0.22", cwd=tree)
    assert "Checked for vLLM 0.22.0" in flag.stdout and '(--vllm ">=0.22")' in flag.stdout


def test_a_vendored_release_older_than_cachelint_knows_leaves_the_range_to_the_pins(tree: Path) -> None:
    (tree / "vllm" / "_version.py").write_text("__version__ = '0.5.4'\n", encoding="utf-8")
    result = check("--no-cache", "--output-format", "concise", cwd=tree)
    assert "Checked for vLLM 0.22.0\N{EN DASH}0.29.0 (pyproject.toml, dependencies).\n" in result.stdout
    assert (
        "cachelint: warning: vllm/_version.py: the vendored vLLM says 0.5.4, a release cachelint does not know: "
        "the pins decide"
    ) in result.stderr_lines


def test_a_vendored_release_newer_than_cachelint_knows_is_checked_as_the_newest_known(
    tree: Path, without_copy: Path
) -> None:
    newest = known_releases()[-1]
    newer = f"{newest.major}.{newest.minor + 1}.0.dev12+g0123abc"
    (tree / "vllm" / "_version.py").write_text(f"__version__ = '{newer}'\n", encoding="utf-8")
    result = check("--no-cache", "--output-format", "concise", cwd=tree)
    pinned = check("--no-cache", "--output-format", "concise", "--vllm", f"=={newest}", cwd=without_copy)
    assert findings(result.stdout) == findings(pinned.stdout) != []
    source = f"vllm/_version.py, the vendored vLLM {newer}"
    assert f"Checked for vLLM {newest} (standing in for the newer releases of {source}).\n" in result.stdout
    assert (
        f"cachelint: warning: the supported range ({source}) holds only vLLM releases newer than {newest}, the "
        f"newest release cachelint knows: they are checked as {newest}, and findings particular to newer releases "
        "are not known"
    ) in result.stderr_lines


def test_a_folder_named_vllm_that_is_not_vllm_is_project_code(tree: Path) -> None:
    patch = (tree / VENDORED_WORKER).read_text(encoding="utf-8")
    write_tree(tree, {"trainer/third_party/vllm/__init__.py": "", "trainer/third_party/vllm/patch.py": patch})
    result = check("--no-cache", "--output-format", "concise", cwd=tree)
    assert "trainer/third_party/vllm/patch.py:4:9: CL001" in result.stdout


def test_a_vllm_fork_checkout_and_a_vendored_sglang_are_left_out(tree: Path) -> None:
    worker = (tree / VENDORED_WORKER).read_text(encoding="utf-8")
    fork = tree / "third_party" / "vllm-fork"
    shutil.copytree(tree / "vllm", fork / "vllm")
    write_tree(
        fork,
        {
            "pyproject.toml": '[project]\nname = "vllm"\nversion = "0.0.0"\n',
            "examples/rlhf_worker.py": worker,
        },
    )
    write_tree(
        tree,
        {
            "sglang/__init__.py": "",
            "sglang/srt/__init__.py": "",
            "sglang/srt/worker.py": worker,
            "tools/pyproject.toml": '[project]\nname = "tools"\nversion = "0"\n',
            "tools/worker.py": worker,
        },
    )
    result = check("--no-cache", "--output-format", "concise", cwd=tree)
    assert located(result.stdout) == ["tools/worker.py:4:9: CL001", "trainer/rollout.py:15:15: CL003"]


def test_engine_source_is_recognised_by_its_shape(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "a/vllm/__init__.py": "",
            "a/vllm/engine/__init__.py": "",
            "a/vllm/v1/__init__.py": "",
            "b/vllm/__init__.py": "",  # verl's third_party/vllm: glue code of the project's own
            "b/vllm/engine.py": "",
            "c/sglang/__init__.py": "",
            "c/sglang/srt/__init__.py": "",
            "d/pyproject.toml": '[project]\nname = "vllm"\n',
            "d/vllm/__init__.py": "",
            "d/vllm/engine/__init__.py": "",
            "d/vllm/version.py": "",
            "d/examples/run.py": "",
        },
    )
    assert inside_engine_source(root / "a/vllm/v1/__init__.py")
    assert inside_engine_source(root / "a/vllm")
    assert not inside_engine_source(root / "b/vllm/engine.py")
    assert inside_engine_source(root / "c/sglang/srt/__init__.py")
    assert inside_engine_source(root / "d/examples/run.py")
    assert not inside_engine_source(root / "a")


# vllm/version.py in a checkout never built: no _version.py to import.
SOURCE_CHECKOUT_VERSION = "try:\n    from ._version import __version__\nexcept ImportError:\n    __version__ = 'dev'\n"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"_version.py": "__version__ = version = '0.11.1'\n__version_tuple__ = (0, 11, 1)\n"}, "0.11.1"),
        ({"_version.py": "version: str\n__version__: str = '0.10.2+cu128'\n"}, "0.10.2+cu128"),
        ({"version.py": SOURCE_CHECKOUT_VERSION}, ""),
        ({"version.py": 'def f():\n    __version__ = "0.9.0"\n', "__init__.py": '__version__ = "0.6.3"\n'}, "0.6.3"),
    ],
)
def test_the_vendored_release_is_read_from_its_files(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    write_tree(tmp_path / "vllm", {"__init__.py": "", "engine/__init__.py": "", "v1/__init__.py": "", **files})
    found = vendored_vllm_version(tmp_path)
    assert (str(found[0]) if found else "") == (str(Version(expected)) if expected else "")
