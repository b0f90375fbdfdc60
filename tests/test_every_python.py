"""The command line's smoke checks on every Python that `.ci/run` installed cachelint for.

`.ci/run` passes the interpreters of its virtual environments in CACHELINT_CI_PYTHONS (separated by
os.pathsep); without it, the checks run on this interpreter only. Each interpreter must give the
same answers as this one, byte for byte: what Python version runs cachelint must not change what it
finds, prints or fixes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from cli_runner import DEMO, Result, environment, write_tree

from cachelint import __version__

PYTHONS = [python for python in os.environ.get("CACHELINT_CI_PYTHONS", "").split(os.pathsep) if python] or [
    sys.executable
]
SUPPORTED = [(3, 10), (3, 11), (3, 12), (3, 13)]

DEMO_FINDINGS = [
    ("demo_rl/rollout_server.py", 40, "CL003"),
    ("demo_rl/rollout_server.py", 43, "CL004"),
    ("demo_rl/rollout_server.py", 49, "CL004"),
    ("demo_rl/rollout_server.py", 51, "CL002"),
    ("demo_rl/worker_extension.py", 20, "CL001"),
]


def version_of(python: str) -> str:
    completed = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.strip()


@pytest.fixture(params=PYTHONS, ids=[f"python{version_of(python)}" for python in PYTHONS])
def python(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run(python: str, *args: str | Path, cwd: Path, stdin: str = "") -> Result:
    completed = subprocess.run(
        [python, "-m", "cachelint", *map(str, args)],
        cwd=cwd,
        input=stdin.encode(),
        capture_output=True,
        env=environment(),
        timeout=300,
        check=False,
    )
    return Result(completed.returncode, completed.stdout.decode(), completed.stderr.decode())


def demo_copy(root: Path) -> Path:
    return Path(shutil.copytree(DEMO, root / "demo", ignore=shutil.ignore_patterns("__pycache__", ".cachelint_cache")))


@cache
def here(*args: str) -> tuple[int, str]:
    """What this interpreter's cachelint gives for `cachelint check ARGS` on a copy of the demo."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        result = run(sys.executable, "check", "--isolated", "--no-cache", *args, cwd=demo_copy(Path(folder)))
    return result.code, result.stdout


def test_a_supported_python_with_this_release(python: str, tmp_path: Path) -> None:
    major, minor = map(int, version_of(python).split("."))
    assert (major, minor) in SUPPORTED
    result = run(python, "--version", cwd=tmp_path)
    assert (result.code, result.stdout) == (0, f"cachelint, version {__version__}\n")


@pytest.mark.parametrize("output_format", ["concise", "full", "json", "json-lines", "github"])
def test_the_demo_gives_the_same_report(python: str, tmp_path: Path, output_format: str) -> None:
    result = run(python, "check", "--isolated", "--no-cache", "--output-format", output_format, cwd=demo_copy(tmp_path))
    assert result.stderr == ""
    assert (result.code, result.stdout) == here("--output-format", output_format)
    if output_format == "json":
        found = [(item["filename"], item["location"]["row"], item["code"]) for item in json.loads(result.stdout)]
        assert found == DEMO_FINDINGS


def test_the_sarif_log_is_the_same(python: str, tmp_path: Path) -> None:
    result = run(python, "check", "--isolated", "--no-cache", "--output-format", "sarif", cwd=demo_copy(tmp_path))
    code, expected = here("--output-format", "sarif")
    log, expected_log = json.loads(result.stdout), json.loads(expected)
    for document in (log, expected_log):  # the copies of the demo are in different folders
        document["runs"][0]["originalUriBaseIds"] = {}
    assert (result.code, log) == (code, expected_log)


def test_fixes_write_the_same_files(python: str, tmp_path: Path) -> None:
    demo = demo_copy(tmp_path)
    result = run(python, "check", "--isolated", "--no-cache", "--fix", "--unsafe-fixes", cwd=demo)
    assert result.stderr == ""
    expected = demo_copy(tmp_path / "here")
    here_fixed = run(sys.executable, "check", "--isolated", "--no-cache", "--fix", "--unsafe-fixes", cwd=expected)
    assert result.code == here_fixed.code
    for path in sorted(expected.rglob("*.py")):
        assert (demo / path.relative_to(expected)).read_bytes() == path.read_bytes(), path.name


def test_deep_code_is_analysed(python: str, tmp_path: Path) -> None:
    """Version-sensitive: Python 3.10 accepts deeper code than its own compiler, and than 3.11+."""
    worker = "class W:\n    def f(self):\n        self.model_runner.reset_encoder_cache()\n"
    write_tree(
        tmp_path,
        {
            "pyproject.toml": "[project]\nname = 'deep'\n",
            "deep_unary.py": worker + "y = " + "-" * 1000 + "x\n",
            "deep_calls.py": worker + "y = f" + "()" * 1000 + "\n",
            "long_chain.py": "y = " + " + ".join(["a"] * 100_000) + "\n",
        },
    )
    result = run(python, "check", "--no-cache", "--output-format", "json", ".", "long_chain.py", cwd=tmp_path)
    found = sorted((item["filename"], item["code"]) for item in json.loads(result.stdout))
    assert found == [("deep_calls.py", "CL001"), ("deep_unary.py", "CL001"), ("long_chain.py", "invalid-syntax")]


def test_source_on_stdin_and_a_bad_selector(python: str, tmp_path: Path) -> None:
    source = (DEMO / "demo_rl/worker_extension.py").read_text(encoding="utf-8")
    result = run(
        python,
        "check",
        "--isolated",
        "--stdin-filename",
        "w.py",
        "--output-format",
        "concise",
        cwd=tmp_path,
        stdin=source,
    )
    assert result.code == 1
    assert result.stdout.startswith("w.py:20:9: CL001 ")
    bad = run(python, "check", "--select", "CL999", cwd=tmp_path)
    assert (bad.code, bad.stderr) == (
        2,
        "cachelint: error: --select holds an unknown rule selector `CL999`; did you mean `CL009`?\n",
    )


def test_rule_page(python: str, tmp_path: Path) -> None:
    result = run(python, "rule", "CL003", cwd=tmp_path)
    assert (result.code, result.stdout) == (0, (DEMO.parent.parent / "rules/CL003.md").read_text(encoding="utf-8"))
