"""The multimodal setting: CL003 and CL004 run only for projects that send multimodal input to vLLM
(`multimodal = "auto"`), always (`true`) or never (`false`); the evidence is project-wide, shows as a
note, and the cache keeps it per file."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_runner import check, write_tree
from fixture_cases import FIXTURES, Case, analyze_case

from cachelint.cache import DATABASE, FileRecord
from cachelint.config import Settings
from cachelint.engine import analyze
from cachelint.multimodal import CONTENT_PART, WORDS, Evidence, find_evidence, nearest

TEXT_ONLY_REFIT = FIXTURES / "CL003" / "text_only_prefix_reset"
TEXT_ONLY_PAUSE = FIXTURES / "CL004" / "text_only_pause"
AGENT_LOOP = FIXTURES / "CL003" / "evidence_in_agent_loop"
ENGINE_CONFIG = FIXTURES / "CL004" / "evidence_in_engine_config"


# ---------------------------------------------------------------- what counts as evidence


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (b'x = 1\nprompt = {"prompt": p, "multi_modal_data": {"image": img}}\n', ("multi_modal_data", 2)),
        (b"from vllm.inputs import MultiModalDataDict\n", ("MultiModalDataDict", 1)),
        (b"\n\nLLM(model=m, limit_mm_per_prompt={'image': 2})\n", ("limit_mm_per_prompt", 3)),
        (b'kwargs["mm_processor_kwargs"] = {"fps": 2}\n', ("mm_processor_kwargs", 1)),
        (b'part = {"type": "image_url", "image_url": {"url": u}}\n', ('"type": "image_url"', 1)),
        (b"part = {'type' :'video_url', 'video_url': {'url': u}}\n", ('"type": "video_url"', 1)),
        (b'parts.append({\n    "type":\n        "input_audio", "input_audio": a})\n', ('"type": "input_audio"', 2)),
        # the first one in the file is named
        (b'a = "mm_processor_kwargs"\nb = "multi_modal_data"\n', ("mm_processor_kwargs", 1)),
    ],
)
def test_evidence_is_found_with_its_line(source: bytes, expected: tuple[str, int]) -> None:
    assert find_evidence(source) == expected


def _first_evidence(raw: bytes) -> tuple[str, int] | None:
    """The definition, one word at a time: the first of WORDS or of a content part in the bytes."""
    found = [(raw.find(word), word.decode()) for word in WORDS if word in raw]
    part = CONTENT_PART.search(raw)
    if part is not None:
        found.append((part.start(), f'"type": "{part.group(1).decode()}"'))
    if not found:
        return None
    at, word = min(found)
    return word, raw.count(b"\n", 0, at) + 1


def test_evidence_is_found_as_defined_in_every_fixture() -> None:
    sources = [path.read_bytes() for path in sorted(FIXTURES.rglob("*.py"))]
    assert any(_first_evidence(raw) for raw in sources)
    for raw in sources:
        assert find_evidence(raw) == _first_evidence(raw)


@pytest.mark.parametrize(
    "source",
    [
        b'batch = {"input_ids": ids, "pixel_values": processor(images=imgs)["pixel_values"]}\n',
        b"from qwen_vl_utils import process_vision_info\n",
        b'content = [{"type": "image"}, {"type": "text", "text": t}]\n',
        b'content = [{"type": "video", "video": path}]\n',
        b'print("image_url")  # a word alone is no content part\n',
        b"TokensPrompt(prompt_token_ids=ids)\n",
    ],
    ids=["pixel_values", "process_vision_info", "hf-image-part", "hf-video-part", "bare-word", "tokens"],
)
def test_what_a_text_only_project_holds_is_no_evidence(source: bytes) -> None:
    assert find_evidence(source) is None


def test_the_note_names_the_evidence_nearest_to_the_finding() -> None:
    found = (
        Evidence("agent/integrations/verl.py", 3, "multi_modal_data"),
        Evidence("skyrl/backends/renderer.py", 137, '"type": "image_url"'),
        Evidence("skyrl/backends/train/engines/base.py", 9, "mm_processor_kwargs"),
    )
    assert nearest(found, "skyrl/backends/train/engines/vllm/engine.py") is found[2]
    assert nearest(found, "skyrl/backends/train/client.py") is found[2]
    assert nearest(found, "skyrl/backends/server.py") is found[1]  # a tie: the first by path
    assert nearest(found, "other/mod.py") is found[0]
    assert nearest(found, "top.py") is found[0]


# ---------------------------------------------------------------- the setting


def codes_and_notes(case_path: Path, settings: Settings | None = None) -> list[tuple[str, tuple[str, ...]]]:
    analysis = analyze_case(Case(case_path.parent.name, case_path), settings)
    return [(finding.code, finding.notes) for finding in analysis.findings]


def test_evidence_in_another_file_is_named_in_the_note() -> None:
    [(code, notes)] = codes_and_notes(AGENT_LOOP)
    assert code == "CL003"
    assert notes[-1] == 'multimodal input: agent_rl/agent_loop.py:12 holds `"type": "image_url"`'
    [(code, notes)] = codes_and_notes(ENGINE_CONFIG)
    assert code == "CL004"
    assert notes[-1] == "multimodal input: vl_rl/engine_config.py:7 holds `mm_processor_kwargs`"


def test_text_only_projects_are_not_checked_by_default() -> None:
    assert codes_and_notes(TEXT_ONLY_REFIT) == []
    assert codes_and_notes(TEXT_ONLY_PAUSE) == []


def test_multimodal_true_checks_a_project_without_evidence() -> None:
    forced = Settings(multimodal=True)
    [(code, notes)] = codes_and_notes(TEXT_ONLY_REFIT, forced)
    assert code == "CL003"
    assert not any(note.startswith("multimodal input") for note in notes)
    assert [code for code, _ in codes_and_notes(TEXT_ONLY_PAUSE, forced)] == ["CL004", "CL004"]


def test_multimodal_false_silences_a_project_with_evidence() -> None:
    off = Settings(multimodal=False)
    assert codes_and_notes(AGENT_LOOP, off) == []
    assert codes_and_notes(ENGINE_CONFIG, off) == []
    assert codes_and_notes(FIXTURES / "demo", off) == [
        (code, notes) for code, notes in codes_and_notes(FIXTURES / "demo") if code not in ("CL003", "CL004")
    ]


def test_setting_from_the_configuration_file(tmp_path: Path) -> None:
    project = tmp_path / "token_rl"
    shutil.copytree(TEXT_ONLY_PAUSE, project)
    assert check("--no-cache", "--output-format", "concise", cwd=project).code == 0
    with (project / "pyproject.toml").open("a", encoding="utf-8") as file:
        file.write("\n[tool.cachelint]\nmultimodal = true\n")
    result = check("--no-cache", "--output-format", "concise", cwd=project)
    assert result.code == 1
    assert result.stdout.count(" CL004 ") == 2
    shown = json.loads(check("--show-settings", cwd=project).stdout)
    assert shown["multimodal"] is True


def test_default_is_auto() -> None:
    assert Settings().multimodal == "auto"


def test_only_the_target_is_checked_but_the_evidence_is_project_wide(tmp_path: Path) -> None:
    """As pre-commit runs it: only the server file is passed; the agent loop that shows the images is
    not a target, yet it is read."""
    project = tmp_path / "agent"
    shutil.copytree(AGENT_LOOP, project)
    result = check("--no-cache", "--output-format", "json", "agent_rl/server.py", cwd=project)
    [finding] = json.loads(result.stdout)
    assert finding["code"] == "CL003"
    assert finding["notes"][-1].startswith("multimodal input: agent_rl/agent_loop.py:12 holds")


# ---------------------------------------------------------------- the cache


def evidence_records(folder: Path) -> list[list[str | int] | None]:
    with sqlite3.connect(folder / DATABASE) as connection:
        values = [row[0] for row in connection.execute("SELECT value FROM entries WHERE key NOT LIKE 'run:%'")]
    connection.close()
    return [FileRecord.from_text(value).multimodal for value in values]


def run(project: Path, cache: Path, targets: list[str] | None = None) -> list[str]:
    analysis = analyze(
        [project / target for target in targets] if targets else [project],
        Settings(cache_dir=str(cache.relative_to(project))),
        project_root=project,
        use_cache=True,
    )
    assert analysis.warnings == []
    return [finding.code for finding in analysis.findings]


def test_the_evidence_is_kept_per_file_and_a_warm_run_reads_no_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "agent"
    shutil.copytree(AGENT_LOOP, project)
    cache = project / ".cache"
    assert run(project, cache) == ["CL003"]
    assert ["image_url" in str(record) for record in evidence_records(cache) if record].count(True) == 1
    with sqlite3.connect(cache / DATABASE) as connection:
        connection.execute("DELETE FROM entries WHERE key LIKE 'run:%'")
    connection.close()

    def no_search(raw: bytes) -> None:
        raise AssertionError("searched bytes whose evidence the cache holds")

    monkeypatch.setattr("cachelint.multimodal.find_evidence", no_search)
    assert run(project, cache) == ["CL003"]


IMAGE_PROMPTS = """\
def image_prompt(prompt_ids: list[int], image) -> dict:
    return {"prompt_token_ids": prompt_ids, "multi_modal_data": {"image": image}}
"""


def run_entries(cache: Path) -> int:
    """How many runs' findings (JSON lists) are stored; the record of the project's files, stored under
    the same kind of key, is not one."""
    with sqlite3.connect(cache / DATABASE) as connection:
        values = [value for (value,) in connection.execute("SELECT value FROM entries WHERE key LIKE 'run:%'")]
    connection.close()
    return sum(1 for value in values if value.startswith("["))


WEIGHT_SYNC_SERVER = """\
from vllm.v1.engine.async_llm import AsyncLLM


class WeightSync:
    def __init__(self, engine: AsyncLLM):
        self.engine = engine

    async def update_weights(self, meta: dict) -> None:
        await self.engine.collective_rpc("update_weights_from_ipc", kwargs=meta)
        await self.engine.reset_prefix_cache(reset_running_requests=True)
"""


def test_a_file_that_gains_or_loses_evidence_changes_the_findings(tmp_path: Path) -> None:
    """The evidence file is not a target (a pre-commit run on the server only): the run key, which
    covers every project file's bytes, changes with it, so stored findings are not reused. The server
    sends no generation request itself (nor does its folder), so the project-wide evidence decides."""
    project = tmp_path / "token_rl"
    shutil.copytree(TEXT_ONLY_REFIT, project)
    write_tree(project, {"token_rl/server.py": WEIGHT_SYNC_SERVER})
    cache = project / ".cache"
    target = ["token_rl/server.py"]
    assert run(project, cache, target) == []
    write_tree(project, {"token_rl/prompts.py": IMAGE_PROMPTS})
    assert run(project, cache, target) == ["CL003"]
    assert run(project, cache, target) == ["CL003"]  # warm: the stored findings of the same run
    write_tree(project, {"token_rl/prompts.py": IMAGE_PROMPTS.replace("multi_modal_data", "prompt_images")})
    assert run(project, cache, target) == []
    assert run_entries(cache) == 3


@pytest.mark.parametrize("stored", ['{"image": 1}', '["multi_modal_data"]', '["multi_modal_data", "7"]', '"yes"'])
def test_a_malformed_evidence_entry_is_ignored(tmp_path: Path, stored: str) -> None:
    project = tmp_path / "agent"
    shutil.copytree(AGENT_LOOP, project)
    cache = project / ".cache"
    assert run(project, cache) == ["CL003"]
    with sqlite3.connect(cache / DATABASE) as connection:
        connection.execute("DELETE FROM entries WHERE key LIKE 'run:%'")
        connection.execute(f"UPDATE entries SET value = '[true, \"ok\", null, {stored}]'")
    connection.close()
    analysis = analyze([project], Settings(cache_dir=".cache"), project_root=project, use_cache=True)
    assert [finding.code for finding in analysis.findings] == ["CL003"]
    assert len(analysis.warnings) == 1 and "corrupt" in analysis.warnings[0]


def test_the_evidence_is_looked_for_only_when_a_multimodal_rule_has_something_to_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searched: list[bytes] = []
    monkeypatch.setattr("cachelint.multimodal.find_evidence", lambda raw: searched.append(raw))
    found = codes_and_notes(FIXTURES / "CL003" / "full_reset_after_refit.py")
    assert [code for code, _ in found if code in ("CL003", "CL004")] == []
    assert searched == []
    assert codes_and_notes(TEXT_ONLY_REFIT) == []
    assert len(searched) == 3  # every file of the project, once
