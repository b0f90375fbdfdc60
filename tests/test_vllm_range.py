"""The supported vLLM range, read statically from a project's own pins: every shape of pin real projects
write, how they combine, what is said about where the range came from, and the project root."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import write_tree
from packaging.version import Version

from cachelint.vllm_range import (
    EmptyRangeError,
    every_release,
    find_project_root,
    from_specifier,
    known_releases,
    newest_known_release,
    read_supported_range,
)

WHEEL = "https://example.invalid/wheels/vllm-0.25.1-cp38-abi3-manylinux1_x86_64.whl"
NEWEST = str(newest_known_release())

# name -> (files of the project, the range it supports, where that came from)
SHAPES: dict[str, tuple[dict[str, str], str, str]] = {
    "setup.py lists built in variables": (
        {
            "setup.py": (
                "from setuptools import setup\n"
                'VLLM_REQUIRES = ["vllm>=0.18.0"]\n'
                'extras_require = {"vllm": VLLM_REQUIRES, "dev": ["pytest"]}\n'
                'setup(name="x", install_requires=["torch"], extras_require=extras_require)\n'
            )
        },
        f"0.18.0-{NEWEST}",
        'setup.py, extra "vllm"',
    ),
    "setup.py extra set by item assignment": (
        {
            "setup.py": (
                "import setuptools\n"
                "extras = {}\n"
                'extras["vllm"] = ["vllm>=0.20,<0.22"]\n'
                "setuptools.setup(extras_require=extras)\n"
            )
        },
        "0.20.0-0.21.0",
        'setup.py, extra "vllm"',
    ),
    "setup.py concatenation and +=": (
        {
            "setup.py": (
                "from setuptools import setup\n"
                'BASE = ["torch", "numpy"]\n'
                'install_requires = BASE + ["vllm>=0.19"]\n'
                'install_requires += ["vllm<0.21"]\n'
                "setup(install_requires=install_requires)\n"
            )
        },
        "0.19.0-0.20.2",
        "setup.py, install_requires",
    ),
    "setup.py f-string from a module-level version": (
        {
            "setup.py": (
                "from setuptools import setup\n"
                'VLLM_VERSION = "0.24.0"\n'
                "kwargs = dict(install_requires=[f'vllm=={VLLM_VERSION}'])\n"
                "setup(**kwargs)\n"
            )
        },
        "0.24.0",
        "setup.py, install_requires",
    ),
    "setup.py whose extra is named vllm": (
        {"setup.py": 'from setuptools import setup\nsetup(extras_require={"vllm": ["vllm==0.27.1"]})\n'},
        "0.27.1",
        'setup.py, extra "vllm"',
    ),
    "direct wheel URL and a marker alternative": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndependencies = [\n'
                f"  \"vllm @ {WHEEL} ; platform_machine == 'x86_64'\",\n"
                "  \"vllm==0.25.1 ; platform_machine != 'x86_64'\",\n"
                '  "torch",\n]\n'
            )
        },
        "0.25.1",
        "pyproject.toml, dependencies",
    ),
    "marker alternatives are united": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndependencies = [\n'
                "  \"vllm==0.16.0 ; python_version < '3.12'\",\n"
                "  \"vllm==0.30.0 ; python_version >= '3.12'\",\n]\n"
            )
        },
        "0.16.0, 0.30.0",
        "pyproject.toml, dependencies",
    ),
    "sdist URL in a requirements file": (
        {"requirements.txt": "torch\nhttps://example.invalid/sdists/vllm-0.22.1.tar.gz#sha256=00\n"},
        "0.22.1",
        "requirements.txt",
    ),
    "alternative project file": (
        {
            "pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch"]\n',
            "pyproject.vllm.toml": '[project]\nname = "x"\ndependencies = ["vllm>=0.31"]\n',
        },
        f"0.31.0-{NEWEST}",
        "pyproject.vllm.toml, dependencies",
    ),
    "requirements file in a subfolder": (
        {
            "pyproject.toml": '[project]\nname = "x"\n',
            "docker/requirements-vllm.txt": "vllm==0.28.0\n",
            "docs/requirements.txt": "sphinx\n",
        },
        "0.28.0",
        "docker/requirements-vllm.txt",
    ),
    "requirements file in a subfolder that is a project of its own": (
        {
            "pyproject.toml": '[project]\nname = "x"\n',
            "sub/pyproject.toml": '[project]\nname = "sub"\n',
            "sub/requirements.txt": "vllm==0.9.0\n",
            "docker/requirements-gpu.txt": "vllm==0.28.0\n",
            "docker/requirements.in": "vllm==0.10.0\n",
        },
        "0.28.0",
        "docker/requirements-gpu.txt",
    ),
    "requirements folder": (
        {"requirements/gpu/vllm.txt": "vllm>=0.9,<0.10  # pinned\n", "requirements/README.txt": "vllm is in gpu/\n"},
        "0.9.0-0.9.2",
        "requirements/gpu/vllm.txt",
    ),
    "-r include and -c constraints": (
        {
            "requirements.txt": "-r requirements/base.txt\n-c constraints.txt\nnumpy\n",
            "requirements/base.txt": "vllm>=0.18 \\\n  --hash=sha256:00\n",
            "constraints.txt": "vllm<0.20\n",
        },
        "0.18.0-0.19.1",
        "requirements/base.txt, narrowed by constraints.txt",
    ),
    "dependency groups with include-group": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndependencies = ["torch"]\n'
                '[dependency-groups]\nengines = ["vllm==0.21.0"]\nrollout = [{include-group = "engines"}, "ray"]\n'
                'cycle = [{include-group = "cycle"}]\n'
            )
        },
        "0.21.0",
        'pyproject.toml, group "engines" and group "rollout"',
    ),
    "uv constraint narrows": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndependencies = ["vllm>=0.18"]\n'
                '[tool.uv]\nconstraint-dependencies = ["vllm<0.19"]\n'
            )
        },
        "0.18.0-0.18.1",
        "pyproject.toml, dependencies, narrowed by [tool.uv] constraint-dependencies",
    ),
    "uv override replaces": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndependencies = ["vllm==0.10.0"]\n'
                '[tool.uv]\noverride-dependencies = ["vllm==0.12.0"]\n'
            )
        },
        "0.12.0",
        "pyproject.toml, [tool.uv] override-dependencies",
    ),
    "extras apply on top of the dependencies": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndependencies = ["vllm[audio]>=0.17.0,<=0.18.1"]\n'
                '[project.optional-dependencies]\nnew = ["vllm==0.24.0"]\n'
            )
        },
        "0.17.0-0.18.1",
        "pyproject.toml, dependencies",
    ),
    "two extras are alternatives": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\n[project.optional-dependencies]\n'
                'old = ["vllm==0.8.5"]\nnew = ["vllm==0.33.0"]\n'
            )
        },
        "0.8.5, 0.33.0",
        'pyproject.toml, extra "old" and extra "new"',
    ),
    "setuptools dynamic dependencies file": (
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndynamic = ["dependencies"]\n'
                '[tool.setuptools.dynamic]\ndependencies = {file = ["deps/runtime.txt"]}\n'
            ),
            "deps/runtime.txt": "vllm==0.14.1\n",
        },
        "0.14.1",
        "deps/runtime.txt",
    ),
    "setup.cfg and a requirements file are alternatives": (
        {
            "setup.cfg": "[options]\ninstall_requires =\n    vllm<0.7 # 100%\n",
            "requirements-gpu.txt": "# engines\nvllm==0.30.0  # pinned\n",
        },
        "0.6.0-0.6.6.post1, 0.30.0",
        "setup.cfg, install_requires; requirements-gpu.txt",
    ),
}


@pytest.mark.parametrize(("files", "expected", "source"), SHAPES.values(), ids=SHAPES.keys())
def test_pin_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], expected: str, source: str
) -> None:
    root = write_tree(tmp_path / "project", files)
    monkeypatch.chdir(root)
    supported = read_supported_range(root)
    assert supported.label("-") == expected
    assert supported.source == source
    assert not supported.assumed
    assert supported.notes == ()


def test_a_package_module_named_setup_py_is_not_read_as_the_project(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"pyproject.toml": '[project]\nname = "x"\n', "pkg/__init__.py": ""})
    write_tree(root, {"pkg/setup.py": 'from setuptools import setup\nsetup(install_requires=["vllm==0.20.0"])\n'})
    assert find_project_root(root / "pkg" / "setup.py") == root.resolve()


def test_setup_py_is_read_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    write_tree(
        tmp_path,
        {
            "setup.py": f"open({str(marker)!r}, 'w').close()\n"
            "from setuptools import setup\n"
            "setup(name='x', install_requires=['vllm>=0.22'], extras_require={'dev': ['pytest']})\n"
        },
    )
    supported = read_supported_range(tmp_path)
    assert supported.oldest == Version("0.22.0")
    assert not marker.exists()


# ---------------------------------------------------------------- what cannot be read


@pytest.mark.parametrize(
    "setup_py",
    [
        "from setuptools import setup\nsetup(install_requires=open('requirements.in').read().splitlines())\n",
        "from setuptools import setup\nfrom pkg.deps import REQUIRES\nsetup(install_requires=REQUIRES)\n",
        "import os\nfrom setuptools import setup\nif os.environ.get('GPU'):\n    REQS = ['vllm==0.20.0']\n"
        "else:\n    REQS = []\nsetup(install_requires=REQS)\n",
    ],
    ids=["a call", "an imported name", "bound in a branch"],
)
def test_setup_py_that_cannot_be_read_falls_back_and_says_why(tmp_path: Path, setup_py: str) -> None:
    write_tree(tmp_path, {"setup.py": setup_py})
    supported = read_supported_range(tmp_path)
    assert supported.assumed
    assert supported.releases == known_releases()
    assert supported.notes == ("setup.py: `install_requires` cannot be read without running it",)
    [warning] = supported.warnings(tmp_path)
    assert warning.startswith("no vLLM pin found in ")
    assert "(setup.py: `install_requires` cannot be read without running it)" in warning
    assert warning.endswith(
        f"every known release ({known_releases()[0]}\N{EN DASH}{NEWEST}) is assumed; "
        'set the range with `[tool.cachelint] vllm = ">=..."` or `--vllm`'
    )


def test_setup_py_mutation_in_a_branch_still_counts(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "setup.py": "import sys\nfrom setuptools import setup\nextras = {'engines': []}\n"
            "if sys.platform == 'linux':\n    extras['engines'].append('vllm>=0.26,<0.27')\n"
            "setup(extras_require=extras)\n"
        },
    )
    assert read_supported_range(tmp_path).label("-") == "0.26.0"


@pytest.mark.parametrize(
    "line",
    ["vllm @ git+https://github.com/vllm-project/vllm@v0.25.1", "-e git+https://github.com/vllm-project/vllm#egg=vllm"],
)
def test_a_pin_whose_release_cannot_be_told_allows_every_release_and_says_so(tmp_path: Path, line: str) -> None:
    write_tree(tmp_path, {"requirements.txt": line + "\n"})
    supported = read_supported_range(tmp_path)
    assert supported.releases == known_releases()
    assert not supported.assumed
    assert supported.beyond_known
    note = f"cannot tell which vLLM release `{line.removeprefix('-e ')}` installs: every known release is assumed"
    assert any(note in warning for warning in supported.warnings(tmp_path))


def test_no_pin_means_every_release(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch", "vllm-ascend==0.9"]\n'})
    supported = read_supported_range(tmp_path)
    assert supported.assumed
    assert supported.releases == every_release().releases == known_releases()
    assert supported.oldest == Version("0.6.0")


@pytest.mark.parametrize(
    ("requirements", "floor"),
    [
        ("vllm>=0.18\n", True),
        ("vllm==0.24.0\n", True),
        ("vllm~=0.20.1\n", True),
        ("vllm<0.20\n", False),
        ("vllm!=0.19.0,<=0.22.0\n", False),
        ("vllm\n", False),
        ("vllm @ git+https://github.com/vllm-project/vllm@v0.25.1\n", False),
        # one way to install the project that names no oldest release leaves the floor unsaid
        ("vllm>=0.18; python_version >= '3.11'\nvllm<0.20; python_version < '3.11'\n", False),
    ],
)
def test_whether_the_pins_name_an_oldest_release(tmp_path: Path, requirements: str, floor: bool) -> None:
    write_tree(tmp_path, {"requirements.txt": requirements})
    assert read_supported_range(tmp_path).floor_declared is floor


def test_an_assumed_range_names_no_oldest_release_and_a_setting_may(tmp_path: Path) -> None:
    assert not read_supported_range(tmp_path).floor_declared
    assert from_specifier(">=0.18", "--vllm").floor_declared
    assert from_specifier("0.24.0", "--vllm").floor_declared
    assert not from_specifier("<0.20", "--vllm").floor_declared


def test_invalid_pyproject_is_ignored_for_the_range(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pyproject.toml": "[project\nname="})
    supported = read_supported_range(tmp_path)
    assert supported.assumed
    assert supported.notes == ("pyproject.toml: not valid TOML",)


def test_include_cycles_end(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "requirements.txt": "-r requirements-b.txt\nvllm>=0.20\n",
            "requirements-b.txt": "-r requirements.txt\nvllm<0.21\n",
        },
    )
    # Each file includes the other: the cycle stops, and the first file is read with the second's pins.
    supported = read_supported_range(tmp_path)
    assert not supported.assumed
    assert supported.label() == "0.20.0\N{EN DASH}0.20.2"


# ---------------------------------------------------------------- empty and open ranges


@pytest.mark.parametrize("spec", ["<0.5", ">=0.20,<0.10"])
def test_an_empty_setting_is_an_error(spec: str) -> None:
    with pytest.raises(EmptyRangeError, match=f"{spec!r} matches no vLLM release cachelint knows"):
        from_specifier(spec, "cli")


def test_pins_older_than_the_facts_give_the_oldest_known_release_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's old pin never stops a run (a sub-project of a monorepo may hold one): the oldest
    known release stands in for it, as the newest does for a pin newer than the facts."""
    write_tree(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["vllm<0.5"]\n'})
    monkeypatch.chdir(tmp_path)
    supported = read_supported_range(tmp_path)
    oldest = known_releases()[0]
    assert supported.releases == (oldest,) and not supported.assumed
    [warning] = supported.warnings(tmp_path)
    assert warning.startswith(
        "pyproject.toml, dependencies: the vLLM pins (`vllm<0.5`) match no release cachelint knows "
        f"(0.6.0\N{EN DASH}{NEWEST}): {oldest}, the oldest release it knows, stands in for them"
    )


def _after_newest(micro: int = 0, minor: int = 0) -> str:
    """A release newer than the newest the facts know (the next micro or minor one)."""
    newest = Version(NEWEST)
    if minor:
        return f"{newest.major}.{newest.minor + minor}.0"
    return f"{newest.major}.{newest.minor}.{newest.micro + micro}"


@pytest.mark.parametrize(
    "spec",
    [
        ">=99",
        f"=={_after_newest(minor=1)}",
        f"=={_after_newest(micro=5)}",
        f">{NEWEST}",
        f"=={_after_newest(minor=1)[:-2]}.*",
    ],
)
def test_a_setting_that_allows_only_newer_releases_is_checked_as_the_newest_known(spec: str) -> None:
    """A project on a vLLM released after this cachelint is checked, not refused: as the newest release
    the facts know, with a warning that says so."""
    supported = from_specifier(spec, f"--vllm {spec}")
    assert supported.releases == (Version(NEWEST),)
    assert supported.newer_only
    assert supported.warnings(Path()) == [
        f"the supported range (--vllm {spec}) holds only vLLM releases newer than {NEWEST}, the newest release "
        f"cachelint knows: they are checked as {NEWEST}, and findings particular to newer releases are not known"
    ]
    assert supported.summary() == f"vLLM {NEWEST} (standing in for the newer releases of --vllm {spec})"


def test_pins_that_allow_only_newer_releases_are_checked_as_the_newest_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin = f"vllm=={_after_newest(minor=1)}"
    write_tree(tmp_path, {"pyproject.toml": f'[project]\nname = "x"\ndependencies = ["{pin}"]\n'})
    monkeypatch.chdir(tmp_path)
    supported = read_supported_range(tmp_path)
    assert (supported.releases, supported.newer_only) == ((Version(NEWEST),), True)
    assert [pin.requirement for pin in supported.pins] == [pin]
    assert supported.summary() == f"vLLM {NEWEST} (standing in for the newer releases of pyproject.toml, dependencies)"


def test_a_range_that_holds_known_releases_is_not_a_stand_in() -> None:
    supported = from_specifier(f">={NEWEST}", "cli")
    assert (supported.releases, supported.beyond_known, supported.newer_only) == ((Version(NEWEST),), True, False)


@pytest.mark.parametrize(
    ("spec", "beyond"),
    [(">=0.18", True), (f"=={NEWEST}", False), (f"<={NEWEST}", False), (f"~={NEWEST}", True), ("<0.20", False)],
)
def test_reaching_past_the_newest_known_release(spec: str, beyond: bool) -> None:
    supported = from_specifier(spec, "--vllm")
    assert supported.beyond_known is beyond
    warnings = supported.warnings(Path())
    assert bool(warnings) is beyond
    if beyond:
        assert warnings == [
            f"the supported range (--vllm) reaches past vLLM {NEWEST}, the newest release cachelint knows: "
            "findings for newer releases are not known"
        ]


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
    assert supported.label() == "0.16.0\N{EN DASH}0.21.0"
    assert supported.share([Version("0.17.0")]) == "of the supported 0.16.0-0.21.0"
    assert supported.share(list(supported.releases)) == "every supported release"


# ---------------------------------------------------------------- the project root


def test_project_root_is_the_nearest_project_folder(tmp_path: Path) -> None:
    write_tree(tmp_path, {"proj/pyproject.toml": '[project]\nname = "x"\n', "proj/pkg/sub/mod.py": ""})
    assert find_project_root(tmp_path / "proj" / "pkg" / "sub" / "mod.py") == (tmp_path / "proj").resolve()


def test_a_requirements_file_in_a_package_does_not_make_it_a_project(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", {"setup.py": "", "pkg/recipe/requirements.txt": "vllm==0.9.0\n"})
    (root / "pkg/recipe/mod.py").write_text("")
    assert find_project_root(root / "pkg/recipe/mod.py") == root.resolve()


def test_the_search_stops_at_the_git_repository(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pyproject.toml": '[project]\nname = "outer"\n', "repo/pkg/mod.py": ""})
    (tmp_path / "repo" / ".git").mkdir()
    assert find_project_root(tmp_path / "repo" / "pkg" / "mod.py") == (tmp_path / "repo").resolve()


def test_without_project_files_the_nearest_requirements_file(tmp_path: Path) -> None:
    write_tree(tmp_path / "loose", {"requirements.txt": "vllm\n", "scripts/run.py": ""})
    found = find_project_root(tmp_path / "loose" / "scripts" / "run.py")
    if any(is_repository(folder) for folder in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary folder lies in a project")
    assert found == (tmp_path / "loose").resolve()


def test_in_a_loose_folder_a_subfolder_s_requirements_file_makes_a_project_of_its_own(tmp_path: Path) -> None:
    """A loose folder (no project file, repository or requirements file at or above it) does not take
    the pins of a subfolder holding a requirements file: that subfolder is a project of its own."""
    loose = write_tree(tmp_path / "loose", {"script.py": "", "old_run/requirements.txt": "vllm==0.9.0\n"})
    if any(is_repository(folder) for folder in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary folder lies in a project")
    assert find_project_root(loose / "script.py") == loose.resolve()
    assert find_project_root(loose / "old_run" / "run.py") == (loose / "old_run").resolve()
    assert read_supported_range(loose).assumed
    assert read_supported_range(loose / "old_run").label("-") == "0.9.0"
    # In a project folder the subfolder's file is the project's own.
    (loose / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert [pin.file for pin in read_supported_range(loose).pins] == [loose / "old_run" / "requirements.txt"]


def is_repository(folder: Path) -> bool:
    return any((folder / name).exists() for name in (".git", "pyproject.toml", "setup.cfg")) or (
        (folder / "setup.py").is_file() and not (folder / "__init__.py").is_file()
    )


def test_paths_are_shown_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "mono" / "a", {"requirements.txt": "vllm==0.20.0\n"})
    monkeypatch.chdir(tmp_path / "mono")
    assert read_supported_range(root).source == "a/requirements.txt"
    monkeypatch.chdir(root)
    assert read_supported_range(root).source == "requirements.txt"
    assert read_supported_range(tmp_path / "mono" / "a").pins[0].file.is_absolute()
