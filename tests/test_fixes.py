"""The fixer: indentation, validation, --diff, all-or-nothing cross-file fixes and file modes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachelint.changes import NewStatement, ReplaceExpression
from cachelint.config import Settings
from cachelint.finding import Applicability, Fix, Span
from cachelint.fixes import fix_to_fixed_point, write_changes
from cachelint.rules import cl004_mm_processor_cache_desync as cl004
from cachelint.rules.insertions import insert_after
from cachelint.summary import ResetEvent
from cachelint.writing import write_file

TAB_INDENTED = (
    "from vllm.v1.engine.async_llm import AsyncLLM\n"
    "\n"
    "class Server:\n"
    "\tdef __init__(self, engine: AsyncLLM):\n"
    "\t\tself.engine = engine\n"
    "\n"
    "\tasync def update_weights(self, weights):\n"
    "\t\tawait self.engine.collective_rpc('load', args=(weights,))\n"
    "\t\tawait self.engine.reset_prefix_cache()  # after the load\n"
    "\t\treturn True\n"
)
ONLY_CL003 = Settings(select=("CL003",))
PAUSE = (
    "from vllm.v1.engine.async_llm import AsyncLLM\n"
    "\n"
    "async def pause(engine: AsyncLLM):\n"
    "    await engine.pause_generation()\n"
)


# The project sends images to vLLM, so that the multimodal rules (CL003, CL004) apply to it.
IMAGE_PROMPTS = (
    "def image_prompt(prompt_ids: list[int], image) -> dict:\n"
    '    return {"prompt_token_ids": prompt_ids, "multi_modal_data": {"image": image}}\n'
)


def _project(tmp_path: Path, files: dict[str, str], vllm: str = ">=0.18,<0.22") -> Path:
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "p"\ndependencies = ["vllm{vllm}"]\n')
    for name, text in {"prompts.py": IMAGE_PROMPTS, **files}.items():
        (tmp_path / name).write_bytes(text.encode())
    return tmp_path


def test_inserted_resets_follow_tab_indentation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path, {"server.py": TAB_INDENTED}))
    outcome = fix_to_fixed_point([Path("server.py")], ONLY_CL003, unsafe=True)
    assert write_changes(outcome) == []
    text = (tmp_path / "server.py").read_text()
    assert (
        "\t\tawait self.engine.reset_prefix_cache()  # after the load\n"
        "\t\tawait self.engine.reset_encoder_cache()\n"
        "\t\treturn True\n"
    ) in text


def test_safe_only_run_leaves_unsafe_fixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path, {"server.py": TAB_INDENTED}))
    outcome = fix_to_fixed_point([Path("server.py")], ONLY_CL003, unsafe=False)
    assert outcome.fixed == 0 and outcome.changed == []
    assert [f.code for f in outcome.analysis.findings] == ["CL003"]


def test_a_fix_that_would_not_parse_is_not_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path, {"pause.py": PAUSE}))

    def broken_fix(file: object, event: object, context: object) -> Fix:
        parameter = ReplaceExpression("pause.py", Span(3, 17, 3, 23), "engine.x")  # def pause(engine.x: ...)
        return Fix("break it", Applicability.UNSAFE, changes=(parameter,))

    monkeypatch.setattr(cl004, "_fix", broken_fix)
    outcome = fix_to_fixed_point([Path("pause.py")], Settings(), unsafe=True)
    assert outcome.changed == []
    assert len(outcome.errors) == 1 and "would not parse" in outcome.errors[0]
    assert [f.code for f in outcome.analysis.findings] == ["CL004"]


def test_a_fix_whose_node_is_not_there_is_not_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path, {"pause.py": PAUSE}))

    def misplaced_fix(file: object, event: object, context: object) -> Fix:
        nowhere = ReplaceExpression("pause.py", Span(4, 6, 4, 12), "engine")  # not an expression's span
        return Fix("misplaced", Applicability.UNSAFE, changes=(nowhere,))

    monkeypatch.setattr(cl004, "_fix", misplaced_fix)
    outcome = fix_to_fixed_point([Path("pause.py")], Settings(), unsafe=True)
    assert outcome.changed == []
    assert outcome.errors == ["pause.py:4:11: CL004 fix not applied: it could not be made on this code"]


def test_diff_prints_and_writes_nothing(tmp_path: Path) -> None:
    _project(tmp_path, {"pause.py": PAUSE})
    result = subprocess.run(
        [sys.executable, "-m", "cachelint", "check", "--diff", "--unsafe-fixes", "--no-color", "pause.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    assert "+    await engine.reset_mm_cache()" in result.stdout
    assert (tmp_path / "pause.py").read_text() == PAUSE
    assert "Would fix 1 problem." in result.stderr


def test_cross_file_fix_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = (
        "class SyncWorkerExtension:\n"
        "    def refit(self, weights):\n"
        "        self.model_runner.model.load_weights(weights)\n"
        "        self.model_runner.reset_encoder_cache()\n"
    )
    driver = "from vllm import LLM\n\ndef push(llm: LLM, weights):\n    llm.collective_rpc('refit', args=(weights,))\n"
    monkeypatch.chdir(_project(tmp_path, {"worker.py": worker, "driver.py": driver}))
    Path("driver.py").chmod(0o444)
    outcome = fix_to_fixed_point([Path("worker.py")], Settings(), unsafe=True)
    assert {file.display for file in outcome.changed} == {"worker.py", "driver.py"}
    assert "llm.llm_engine.reset_encoder_cache()" in next(f.text for f in outcome.changed if f.display == "driver.py")
    errors = write_changes(outcome)
    if os.geteuid() != 0:
        assert errors and "driver.py" in errors[0]


def test_atomic_write_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "tool.py"
    path.write_text("x = 1\n")
    path.chmod(0o751)
    write_file(path, b"x = 2\n")
    assert path.read_text() == "x = 2\n"
    assert path.stat().st_mode & 0o777 == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["tool.py"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root may give a file to another user")
def test_fix_as_root_keeps_the_owner_group_and_mode(tmp_path: Path) -> None:
    _project(tmp_path, {"pause.py": PAUSE})
    path = tmp_path / "pause.py"
    os.chown(path, 12345, 23456)
    path.chmod(0o6751)  # set-id bits too, which a change of owner clears
    result = subprocess.run(
        [sys.executable, "-m", "cachelint", "check", "--fix", "--unsafe-fixes", "pause.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "reset_mm_cache" in path.read_text()
    written = path.stat()
    assert (written.st_uid, written.st_gid, written.st_mode & 0o7777) == (12345, 23456, 0o6751)


def test_a_fix_whose_result_does_not_compile_is_not_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ast.parse` takes a `break` outside a loop; CPython's compiler does not."""
    monkeypatch.chdir(_project(tmp_path, {"pause.py": PAUSE}))

    def compiles_not(file: object, event: ResetEvent, context: object) -> Fix:
        assert event.anchor is not None
        breaks = insert_after("pause.py", event.anchor, [NewStatement("break")])
        return Fix("break it", Applicability.UNSAFE, changes=(breaks,))

    monkeypatch.setattr(cl004, "_fix", compiles_not)
    outcome = fix_to_fixed_point([Path("pause.py")], Settings(), unsafe=True)
    assert outcome.changed == []
    assert outcome.errors == ["pause.py:4:11: CL004 fix not applied: the result would not parse or compile"]


def test_a_file_libcst_cannot_parse_gets_no_fix_and_says_why(tmp_path: Path) -> None:
    """CPython takes tabs and spaces mixed so that each block's indent is consistent in its own right;
    libcst does not. Such a file is reported as before, its fix not made, and left as it is."""
    mixed = (
        "from vllm.v1.engine.async_llm import AsyncLLM\n\n\nclass Server:\n"
        "   async def refit(self, engine: AsyncLLM) -> None:\n\t\t  engine.reset_prefix_cache()\n"
    )
    root = _project(tmp_path, {"server.py": mixed})
    result = subprocess.run(
        [sys.executable, "-m", "cachelint", "check", "--fix", "--output-format", "concise", "."],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "server.py:6:5: CL005" in result.stdout
    assert "cachelint: warning: server.py:6:5: CL005 fix not applied: libcst cannot parse server.py (" in result.stderr
    assert "Traceback" not in result.stderr
    assert (root / "server.py").read_text() == mixed
