"""Running the real command line in a subprocess, as a user, pre-commit or CI runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cachelint.vllm_range import known_releases

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo"

# Variables of the calling shell that would change what the command prints.
_SCRUBBED = ("NO_COLOR", "FORCE_COLOR", "CACHELINT_DEBUG", "COLUMNS", "TERM")


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _SCRUBBED}
    env["PYTHONUTF8"] = "1"
    env.update(extra or {})
    return env


def cachelint(
    *args: str | Path, cwd: Path, stdin: bytes | str | None = None, env: dict[str, str] | None = None
) -> Result:
    """`python -m cachelint ARGS` in `cwd`; stdin is empty unless given."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    completed = subprocess.run(
        [sys.executable, "-m", "cachelint", *map(str, args)],
        cwd=cwd,
        input=data if data is not None else b"",
        capture_output=True,
        env=environment(env),
        timeout=300,
        check=False,
    )
    return Result(completed.returncode, completed.stdout.decode(), completed.stderr.decode())


def check(*args: str | Path, cwd: Path, stdin: bytes | str | None = None, env: dict[str, str] | None = None) -> Result:
    return cachelint("check", *args, cwd=cwd, stdin=stdin, env=env)


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write `files` (relative path -> text or bytes) under `root`; returns `root`."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


PYPROJECT = """\
[project]
name = "tiny-rl"
version = "0.1.0"
dependencies = ["vllm>=0.18,<=0.33.0"]
"""
# The summary's line on the supported range of `tiny_project` checked from its root.
CHECKED = "Checked for vLLM 0.18.0\N{EN DASH}0.33.0 (pyproject.toml, dependencies).\n"
# ... and of a project checked from its root that pins no vLLM.
ASSUMED = (
    f"Checked for vLLM {known_releases()[0]}\N{EN DASH}{known_releases()[-1]} "
    "(no vLLM pin found: every known release).\n"
)
# What a run prints on stderr for such a project when the range matters.
NO_PIN_WARNING = (
    f"cachelint: warning: no vLLM pin found: every known release ({known_releases()[0]}\N{EN DASH}"
    f'{known_releases()[-1]}) is assumed; set the range with `[tool.cachelint] vllm = ">=..."` or `--vllm`'
)

# One CL001 finding on line 4 of tiny_rl/worker.py.
WORKER = """\
class WorkerExtension:
    def update_weights_from_ipc(self, weights):
        self.model_runner.model.load_weights(weights)
        self.model_runner.reset_encoder_cache()
"""

CLEAN = """\
def add(a, b):
    return a + b
"""


def tiny_project(root: Path, worker: str | bytes = WORKER, pyproject: str = PYPROJECT) -> Path:
    """A project with one worker-extension file (CL001 on line 4 as given) and one clean file."""
    return write_tree(
        root,
        {
            "pyproject.toml": pyproject,
            "tiny_rl/__init__.py": "",
            "tiny_rl/worker.py": worker,
            "tiny_rl/clean.py": CLEAN,
        },
    )


def check_on_terminal(
    *args: str | Path, cwd: Path, terminal: str, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """`cachelint check ARGS` with `terminal` ("stdout" or "stderr") attached to a pseudo-terminal and the
    other stream to a file; returns the exit code, stdout bytes and stderr bytes."""
    return cachelint_on_terminal("check", *args, cwd=cwd, terminal=terminal, env=env)


def cachelint_on_terminal(
    *args: str | Path, cwd: Path, terminal: str, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """`cachelint ARGS` as `check_on_terminal` runs `cachelint check ARGS`."""
    import pty
    import tempfile

    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as other:
        streams = {"stdout": other, "stderr": other, terminal: slave}
        process = subprocess.Popen(
            [sys.executable, "-m", "cachelint", *map(str, args)],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=streams["stdout"],
            stderr=streams["stderr"],
            env=environment({"TERM": "xterm-256color", **(env or {})}),
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        code = process.wait(timeout=300)
        other.seek(0)
        captured = other.read()
    on_terminal = b"".join(chunks)
    if terminal == "stdout":
        return code, on_terminal, captured
    return code, captured, on_terminal
