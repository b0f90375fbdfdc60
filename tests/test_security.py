"""cachelint reads the code it checks and never runs it; it reports and writes only inside the project.

- Nothing analysed is imported or executed (setup.py, the checked modules, a package shadowing vllm):
  each would leave a marker file if it ran.
- Config and dependency pins (pyproject.toml, setup.py) are read statically.
- Paths in the output are inside the analysed root, also for files reached through symbolic links.
- A symbolic link to a file outside the project is never written through by --fix or --add-noqa,
  whether found by walking or named on the command line (it is reported and skipped; a named link
  does not make its target's folder the project); a link to a file inside it is written once.
- A file with several hard links is never written (writing it would split the links, or change
  the file under its other names, wherever they are).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_runner import NO_PIN_WARNING, PYPROJECT, Result, check, write_tree

from cachelint.vllm_range import read_supported_range

BUGGY = """\
import vllm


class Server:
    def __init__(self, engine):
        self.engine = engine

    async def update_weights(self, meta):
        await self.engine.collective_rpc("reset_encoder_cache")
"""
FIXED = BUGGY.replace('self.engine.collective_rpc("reset_encoder_cache")', "self.engine.reset_encoder_cache()")


def _leaves_marker(markers: Path, name: str) -> str:
    return f"open({str(markers / name)!r}, 'w').write('ran')\n"


def _no_traceback(result: Result) -> Result:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


def test_analysed_code_is_never_imported_or_executed(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    root = tmp_path / "project"
    write_tree(
        root,
        {
            "setup.py": "import setuptools\n"
            + _leaves_marker(markers, "setup.py")
            + 'setuptools.setup(name="evil", install_requires=["vllm>=0.18,<0.20"])\n',
            "pyproject.toml": '[tool.cachelint]\nextend-refit-functions = ["push_weights"]\n',
            "conftest.py": _leaves_marker(markers, "conftest.py"),
            "vllm/__init__.py": _leaves_marker(markers, "vllm"),  # shadows vllm for anyone importing it
            "pkg/__init__.py": _leaves_marker(markers, "pkg-init"),
            "pkg/server.py": _leaves_marker(markers, "server") + BUGGY,
        },
    )
    runs = [
        ("--output-format", "json", "."),
        ("--show-settings", "."),
        ("--statistics", "."),
        ("--diff", "--unsafe-fixes", "."),
        ("--fix", "--unsafe-fixes", "."),
        ("--add-noqa", "."),
    ]
    for args in runs:
        result = _no_traceback(check(*args, cwd=root))
        assert result.code in (0, 1), (args, result.stderr)
    assert sorted(path.name for path in markers.iterdir()) == []
    # The runs did see and fix the code they did not run.
    assert (root / "pkg/server.py").read_text().endswith(FIXED)
    # ... and read the pins of the setup.py they did not run.
    supported = read_supported_range(root)
    assert supported.source.endswith("project/setup.py, install_requires")
    assert all(str(version).startswith(("0.18", "0.19")) for version in supported.releases)
    assert sorted(path.name for path in markers.iterdir()) == []


def test_output_paths_stay_inside_the_analysed_root(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"real.py": BUGGY})
    root = write_tree(tmp_path / "project", {"pyproject.toml": '[project]\nname = "p"\n', "pkg/server.py": BUGGY})
    (root / "pkg/linked.py").symlink_to(outside / "real.py")
    for output_format in ("json", "sarif"):
        result = _no_traceback(check("--output-format", output_format, "--unsafe-fixes", ".", cwd=root))
        assert result.code == 1
        data = json.loads(result.stdout)
        if output_format == "json":
            paths = [finding["filename"] for finding in data]
            paths += [edit["filename"] for finding in data for edit in (finding["fix"] or {}).get("edits", [])]
        else:
            paths = [
                location["physicalLocation"]["artifactLocation"]["uri"]
                for run in data["runs"]
                for result_ in run["results"]
                for location in result_["locations"]
            ]
        assert sorted(set(paths)) == ["pkg/linked.py", "pkg/server.py"], paths
        assert str(outside) not in result.stdout


def test_fix_never_writes_through_a_link_to_outside_the_project(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"real.py": BUGGY})
    root = write_tree(tmp_path / "project", {"pyproject.toml": '[project]\nname = "p"\n', "pkg/server.py": BUGGY})
    (root / "pkg/linked.py").symlink_to(outside / "real.py")
    (root / "pkg/alias.py").symlink_to("server.py")  # inside the project: written, once

    result = _no_traceback(check("--fix", "--unsafe-fixes", ".", cwd=root))
    assert (outside / "real.py").read_text() == BUGGY
    assert (root / "pkg/linked.py").is_symlink()
    assert (root / "pkg/server.py").read_text() == FIXED
    assert (root / "pkg/alias.py").is_symlink()
    real = (outside / "real.py").resolve()
    assert result.stderr.splitlines() == [
        NO_PIN_WARNING,
        f"cachelint: warning: pkg/linked.py: not fixed: it is a symbolic link to {real}, outside the project",
    ]
    assert result.code == 1
    assert "pkg/linked.py:9:15: CL001" in result.stdout  # still reported: it was not fixed
    assert "pkg/server.py" not in result.stdout


def shared_file_project(tmp_path: Path) -> tuple[Path, Path]:
    """A project holding `gate.py`, a symbolic link to a file of a folder beside it (which has
    project markers and settings of its own), and `server.py`; both files have the CL001 bug."""
    shared = write_tree(
        tmp_path / "shared",
        {"gate.py": BUGGY, "pyproject.toml": '[project]\nname = "shared"\n[tool.cachelint]\nignore = ["CL001"]\n'},
    )
    root = write_tree(tmp_path / "project", {"pyproject.toml": '[project]\nname = "p"\n', "server.py": BUGGY})
    (root / "gate.py").symlink_to(Path("..") / "shared" / "gate.py")
    return root, shared


def files_under(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize(
    "named", [["gate.py"], ["gate.py", "server.py"], ["."]], ids=["link", "link-and-file", "walked"]
)
@pytest.mark.parametrize(
    "flags",
    [("--fix", "--unsafe-fixes"), ("--diff", "--unsafe-fixes"), ("--add-noqa",)],
    ids=["fix", "diff", "add-noqa"],
)
def test_no_write_path_writes_through_a_link_to_outside_the_project(
    tmp_path: Path, flags: tuple[str, ...], named: list[str]
) -> None:
    root, shared = shared_file_project(tmp_path)
    before = files_under(shared)
    result = _no_traceback(check(*flags, *named, cwd=root))
    assert files_under(shared) == before, "the shared folder was written"
    real = (shared / "gate.py").resolve()
    refusal = f"gate.py: {{}}: it is a symbolic link to {real}, outside the project"
    if flags[0] == "--add-noqa":
        assert result.code == 2
        assert f"cachelint: error: {refusal.format('not written')}" in result.stderr_lines
        assert "# noqa: CL001" in (root / "server.py").read_text() or named == ["gate.py"]
    elif flags[0] == "--diff":
        assert f"cachelint: warning: {refusal.format('not fixed')}" in result.stderr_lines
        assert "gate.py" not in result.stdout  # no diff for it
        assert result.code == (0 if named == ["gate.py"] else 1)  # a diff for server.py
    else:
        assert f"cachelint: warning: {refusal.format('not fixed')}" in result.stderr_lines
        assert result.code == 1
        assert "gate.py:9:15: CL001" in result.stdout  # still reported: it was not fixed
    # The project is the one the link is in: its cache, not one in the link target's folder.
    assert (root / ".cachelint_cache").is_dir()
    assert (root / "gate.py").is_symlink()


def test_a_named_link_is_checked_with_the_settings_of_the_project_it_is_in(tmp_path: Path) -> None:
    root, _ = shared_file_project(tmp_path)
    result = _no_traceback(check("--output-format", "concise", "gate.py", cwd=root))
    assert result.code == 1  # the shared folder's `ignore = ["CL001"]` does not apply
    assert result.stdout.startswith("gate.py:9:15: CL001")


@pytest.mark.parametrize("flags", [("--fix", "--unsafe-fixes"), ("--add-noqa",)], ids=["fix", "add-noqa"])
def test_a_file_with_several_hard_links_is_not_written(tmp_path: Path, flags: tuple[str, ...]) -> None:
    outside = write_tree(tmp_path / "elsewhere", {"copy.py": BUGGY})
    root = write_tree(tmp_path / "project", {"pyproject.toml": PYPROJECT, "server.py": BUGGY})
    os.link(outside / "copy.py", root / "linked.py")
    result = _no_traceback(check(*flags, ".", cwd=root))
    assert (outside / "copy.py").read_text() == BUGGY
    assert (root / "linked.py").read_text() == BUGGY
    assert (outside / "copy.py").samefile(root / "linked.py")
    refusal = "linked.py: {}: it has 2 hard links, and cachelint writes no file that has more than one name"
    if flags[0] == "--add-noqa":
        assert f"cachelint: error: {refusal.format('not written')}" in result.stderr_lines
        assert "# noqa: CL001" in (root / "server.py").read_text()
    else:
        assert result.stderr_lines == [f"cachelint: warning: {refusal.format('not fixed')}"]
        assert (root / "server.py").read_text() == FIXED
        assert "linked.py:9:15: CL001" in result.stdout
