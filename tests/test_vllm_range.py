"""The supported vLLM range, read statically from a project's own pins."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from cachelint.vllm_range import every_release, find_project_root, from_specifier, read_supported_range


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_no_pin_means_every_release(tmp_path: Path) -> None:
    _write(tmp_path, "pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch"]\n')
    supported = read_supported_range(tmp_path)
    assert supported.releases == every_release().releases
    assert supported.oldest == Version("0.6.0") and supported.newest == Version("0.33.0")


def test_pyproject_dependencies_and_extras_are_united(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "pyproject.toml",
        '[project]\nname = "x"\ndependencies = ["vllm[audio]>=0.17.0,<=0.18.1"]\n'
        '[project.optional-dependencies]\nnew = ["vllm==0.24.0"]\n',
    )
    supported = read_supported_range(tmp_path)
    assert [str(v) for v in supported.releases] == ["0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.24.0"]
    assert "pyproject.toml" in supported.source


def test_setup_py_is_read_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    _write(
        tmp_path,
        "setup.py",
        f"open({str(marker)!r}, 'w').close()\n"
        "from setuptools import setup\n"
        "setup(name='x', install_requires=['vllm>=0.22'], extras_require={'dev': ['pytest']})\n",
    )
    supported = read_supported_range(tmp_path)
    assert supported.oldest == Version("0.22.0")
    assert not marker.exists()


def test_setup_cfg_and_requirements_files(tmp_path: Path) -> None:
    _write(tmp_path, "setup.cfg", "[options]\ninstall_requires =\n    vllm<0.10\n")
    _write(tmp_path, "requirements-gpu.txt", "# engines\nvllm==0.30.0  # pinned\n-r base.txt\n")
    supported = read_supported_range(tmp_path)
    assert Version("0.9.2") in supported.releases and Version("0.30.0") in supported.releases
    assert Version("0.12.0") not in supported.releases


def test_override_specifier_and_bare_version() -> None:
    assert from_specifier(">=0.32", "cli").oldest == Version("0.32.0")
    assert from_specifier("0.24.0", "cli").releases == (Version("0.24.0"),)
    with pytest.raises(ValueError, match="invalid vLLM version specifier"):
        from_specifier(">=banana", "cli")


def test_range_questions() -> None:
    supported = from_specifier(">=0.16,<0.22", "cli")
    assert supported.intersects(Version("0.17.0"), Version("0.22.0"))
    assert supported.includes_before(Version("0.17.0"))
    assert supported.all_from(Version("0.16.0"))
    assert not from_specifier(">=0.22", "cli").intersects(Version("0.17.0"), Version("0.22.0"))


def test_project_root_is_the_nearest_folder_with_a_marker(tmp_path: Path) -> None:
    _write(tmp_path, "proj/pyproject.toml", '[project]\nname = "x"\n')
    _write(tmp_path, "proj/pkg/sub/mod.py", "")
    assert find_project_root(tmp_path / "proj" / "pkg" / "sub" / "mod.py") == (tmp_path / "proj").resolve()


def test_invalid_pyproject_is_ignored_for_the_range(tmp_path: Path) -> None:
    _write(tmp_path, "pyproject.toml", "[project\nname=")
    assert read_supported_range(tmp_path).releases == every_release().releases
