"""The shipped facts tables agree with the committed scans of the released wheels (no network).

The scans are made by scripts/vllm_facts.py from every release on the package index; a hand edit of a
table that contradicts the released code fails here.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.version import Version

from cachelint.facts import Scope, load_facts, load_sglang_facts, newest_known_release

ROOT = Path(__file__).resolve().parent.parent


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_facts", ROOT / "scripts" / "vllm_facts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["vllm_facts"] = module
    spec.loader.exec_module(module)
    return module


facts_script = _load_script()
VLLM = facts_script.VLLM
SGLANG = facts_script.SGLANG


@pytest.fixture(scope="module")
def vllm_scans() -> dict[Version, dict[str, Any]]:
    scans: dict[Version, dict[str, Any]] = facts_script.load_scans(VLLM)
    return scans


@pytest.fixture(scope="module")
def sglang_scans() -> dict[Version, dict[str, Any]]:
    scans: dict[Version, dict[str, Any]] = facts_script.load_scans(SGLANG)
    return scans


def _problems(dist: Any, scans: dict[Version, dict[str, Any]], tables: tuple[Any, Any, Any] | None = None) -> list[str]:
    records, arguments, releases = tables or facts_script.load_table(dist)
    return list(facts_script.disagreements(dist, scans, records, arguments, releases))


def test_vllm_scans_cover_the_table_releases(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    assert [str(r) for r in vllm_scans] == json.loads((ROOT / "cachelint/data/vllm_releases.json").read_text())[
        "releases"
    ]
    assert min(vllm_scans) == Version("0.6.0")


def test_vllm_table_agrees_with_the_released_code(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    problems = _problems(VLLM, vllm_scans)
    assert problems == [], "\n".join(problems)


def test_a_method_missing_from_one_release_is_named(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    scans = copy.deepcopy(vllm_scans)
    del scans[Version("0.20.0")]["classes"]["vllm/v1/engine/async_llm.py:AsyncLLM"]["methods"]["reset_mm_cache"]
    problems = _problems(VLLM, scans)
    assert problems == ["AsyncLLM.reset_mm_cache: 0.20.0 lacks it, though earlier and later releases have it"]


def test_a_method_missing_from_its_first_release_is_named(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    scans = copy.deepcopy(vllm_scans)
    del scans[Version("0.16.0")]["classes"]["vllm/v1/engine/core.py:EngineCore"]["methods"]["reset_encoder_cache"]
    problems = _problems(VLLM, scans)
    assert "EngineCore.reset_encoder_cache: first_release: the table says '0.16.0', the released code '0.17.0'" in (
        problems
    )


def test_a_signature_change_is_reported(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    scans = copy.deepcopy(vllm_scans)
    newest = max(scans)
    methods = scans[newest]["classes"]["vllm/v1/engine/async_llm.py:AsyncLLM"]["methods"]
    methods["pause_generation"] = "async (self, mode)"
    problems = _problems(VLLM, scans)
    assert len(problems) == 1
    assert problems[0].startswith("AsyncLLM.pause_generation: signature_history: the table says")
    assert problems[0].endswith(f"'0.32.0: async (self, mode, clear_cache)', '{newest}: async (self, mode)']")


def test_a_hand_edit_that_contradicts_the_released_code_fails(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    records, arguments, releases = copy.deepcopy(facts_script.load_table(VLLM))
    gate = next(r for r in records if r["class"] == "AsyncLLM" and r["method"] == "reset_encoder_cache")
    gate["first_release"] = "0.17.0"
    arguments["arguments"][0]["removed_in"] = "0.14.0"
    problems = _problems(VLLM, vllm_scans, (records, arguments, releases))
    assert problems == [
        "AsyncLLM.reset_encoder_cache: first_release: the table says '0.17.0', the released code '0.16.0'",
        "argument disable_mm_preprocessor_cache: removed_in: the table says '0.14.0', the released code '0.13.0'",
    ]


def test_update_rewrites_generated_fields_and_keeps_hand_written_ones(
    vllm_scans: dict[Version, dict[str, Any]],
) -> None:
    records, arguments, releases = copy.deepcopy(facts_script.load_table(VLLM))
    record = next(r for r in records if r["class"] == "LLM" and r["method"] == "reset_prefix_cache")
    original = copy.deepcopy(record)
    record.update(first_release="0.8.0", signature_history=["0.8.0: (self)"], is_async=True)
    record.update(clears=["edited by hand"], scope="partial", notes="kept")
    arguments["arguments"][1]["since"] = None
    arguments["arguments"][1]["notes"] = "kept too"
    new_records, new_arguments, new_releases, added = facts_script.updated_table(
        VLLM, vllm_scans, records, arguments, releases
    )
    updated = next(r for r in new_records if r["class"] == "LLM" and r["method"] == "reset_prefix_cache")
    assert updated == {**original, "clears": ["edited by hand"], "scope": "partial", "notes": "kept"}
    assert new_arguments["arguments"][1] == {**arguments["arguments"][1], "since": "0.10.1"}
    assert new_releases == releases
    assert added == []


def test_a_new_release_with_a_new_reset_adds_a_record_to_review(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    scans = copy.deepcopy(vllm_scans)
    known, following = _newest_and_next(scans)
    newest = copy.deepcopy(scans[known])
    newest["release"] = str(following)
    async_llm = newest["classes"]["vllm/v1/engine/async_llm.py:AsyncLLM"]["methods"]
    async_llm["reset_all_caches"] = "async (self, reset_running_requests)"
    del async_llm["release_kv_cache_memory"]
    newest["arguments"].remove("mm_processor_cache_gb")
    scans[following] = newest
    records, arguments, releases, added = facts_script.updated_table(VLLM, scans, *facts_script.load_table(VLLM))
    assert [(r["class"], r["method"], r["first_release"], r["scope"]) for r in added] == [
        ("AsyncLLM", "reset_all_caches", str(following), None)
    ]
    assert releases["releases"][-1] == str(following)
    assert f"(0.6.0 to {following})" in releases["description"]
    release_kv = next(r for r in records if r["method"] == "release_kv_cache_memory")
    assert release_kv["last_release"] == str(known)
    assert arguments["arguments"][1]["removed_in"] == str(following)
    assert facts_script.removed_arguments(scans, known) == [f"argument mm_processor_cache_gb: removed in {following}"]
    problems = _problems(VLLM, scans, (records, arguments, releases))
    assert problems == ["AsyncLLM.reset_all_caches: needs its hand-written fields (scope, clears, notes)"]


def test_a_class_that_moved_is_pointed_out(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    scans = copy.deepcopy(vllm_scans)
    known, following = _newest_and_next(scans)
    newest = copy.deepcopy(scans[known])
    newest["release"] = str(following)
    newest["classes"]["vllm/v1/engine/async.py:AsyncLLM"] = newest["classes"].pop(
        "vllm/v1/engine/async_llm.py:AsyncLLM"
    )
    scans[following] = newest
    problems = _problems(VLLM, scans)
    assert (
        f"AsyncLLM.sleep: {following} defines it in vllm/v1/engine/async.py: moved there? "
        "(add the old path to `moved` in vllm_facts.py)"
    ) in problems


def _newest_and_next(scans: dict[Version, dict[str, Any]]) -> tuple[Version, Version]:
    """The newest scanned release, and the minor release after it (not scanned: made up by a test)."""
    newest = max(scans)
    return newest, Version(f"{newest.major}.{newest.minor + 1}.0")


def _agreement_line(dist: str) -> str:
    releases = json.loads((ROOT / f"cachelint/data/{dist}_releases.json").read_text())["releases"]
    records = json.loads((ROOT / f"cachelint/data/{dist}_cache_api.json").read_text())
    arguments_file = "vllm_engine_args.json" if dist == "vllm" else "sglang_server_args.json"
    arguments = json.loads((ROOT / "cachelint/data" / arguments_file).read_text())["arguments"]
    return (
        f"{dist}: {len(releases)} scanned releases ({releases[0]} to {releases[-1]}), {len(records)} records, "
        f"{len(arguments)} arguments: the table agrees with the released code\n"
    )


@pytest.mark.parametrize("dist", ["vllm", "sglang"])
def test_check_prints_the_agreement(dist: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert facts_script.main(["--check", "--dist", dist]) == 0
    assert capsys.readouterr().out == _agreement_line(dist)


def test_check_fails_on_a_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    scans = tmp_path / "vllm"
    scans.mkdir()
    for path in (facts_script.SCANS / "vllm").glob("*.json"):
        scan = json.loads(path.read_text())
        scan["classes"].get("vllm/v1/engine/core.py:EngineCoreProc", {}).get("methods", {}).pop("pause_generation", 0)
        (scans / path.name).write_text(json.dumps(scan))
    monkeypatch.setattr(facts_script, "SCANS", tmp_path)
    assert facts_script.main(["--check"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "EngineCoreProc.pause_generation: first_release: the table says '0.33.0', the released code None"
    assert out[-1].endswith(" disagreement(s)")


def test_newest_known_release_comes_from_the_table() -> None:
    releases = json.loads((ROOT / "cachelint/data/vllm_releases.json").read_text())["releases"]
    assert newest_known_release() == Version(releases[-1]) == load_facts().releases[-1]


def test_sglang_table_agrees_with_the_released_code(sglang_scans: dict[Version, dict[str, Any]]) -> None:
    assert [str(r) for r in sglang_scans] == json.loads((ROOT / "cachelint/data/sglang_releases.json").read_text())[
        "releases"
    ]
    assert min(sglang_scans) == Version("0.4.6")
    problems = _problems(SGLANG, sglang_scans)
    assert problems == [], "\n".join(problems)


def test_sglang_disagreements_name_the_method_route_and_variable(sglang_scans: dict[Version, dict[str, Any]]) -> None:
    scans = copy.deepcopy(sglang_scans)
    del scans[Version("0.5.12")]["classes"]["sglang/srt/managers/scheduler.py:Scheduler"]["methods"]["flush_cache"]
    del scans[Version("0.5.21")]["routes"]["POST /begin_weight_update"]
    for release in (Version("0.4.6.post5"), Version("0.4.7")):
        scans[release]["environment"]["SGLANG_VLM_CACHE_SIZE_MB"] = []
    assert _problems(SGLANG, scans) == [
        "Scheduler.flush_cache: 0.5.12 lacks it, though earlier and later releases have it",
        "POST /begin_weight_update: first_release: the table says '0.5.21', the released code '0.5.22'",
        "POST /begin_weight_update: signature_history: the table says ['0.5.21: async (obj, request)'], "
        "the released code ['0.5.22: async (obj, request)']",
        "environment variable SGLANG_VLM_CACHE_SIZE_MB: since: the table says '0.4.6.post5', "
        "the released code '0.4.7.post1'",
    ]


def test_sglang_facts_load() -> None:
    facts = load_sglang_facts()
    assert facts.releases[0] == Version("0.4.6") and facts.releases[-1] >= Version("0.5.23")
    flush = facts.get("flush_cache", "Scheduler")
    assert flush is not None and flush.scope is Scope.PARTIAL and not flush.is_async
    assert not flush.takes_param("empty_cache", Version("0.5.10"))
    assert flush.takes_param("empty_cache", Version("0.5.11"))
    begin = facts.get("begin_weight_update", "Engine")
    assert begin is not None and not begin.exists_in(Version("0.5.20")) and begin.exists_in(Version("0.5.21"))
    embedding = facts.get("clear", "MultiModalCache / MultiModalStaticCache (embedding cache)")
    assert embedding is not None and "Nothing calls it" in embedding.notes
    assert facts.environment["SGLANG_VLM_CACHE_SIZE_MB"].since == Version("0.4.6.post5")
    rl_target = facts.engine_argument("rl_on_policy_target")
    assert rl_target is not None and not rl_target.exists_in(Version("0.5.4"))
    assert load_facts().get("flush_cache", "Scheduler") is None


WHEEL_MODULES = {
    "vllm/__init__.py": "",
    "vllm/v1/worker/worker_base.py": """
class WorkerBase:
    def reset_mm_cache(self) -> None: ...
    def load_model(self) -> None: ...
""",
    "vllm/v1/worker/gpu_worker.py": """
from vllm.v1.worker.worker_base import WorkerBase as Base

class Worker(Base):
    if True:
        def sleep(self, level: int = 1) -> None: ...
    def reload_weights(self, *args, **kwargs) -> None: ...
""",
    "vllm/v1/engine/async_llm.py": """
from ...engine import protocol

class AsyncLLM(protocol.EngineClient):
    async def pause_generation(self, *, mode="abort", clear_cache=True): ...
""",
    "vllm/engine/protocol.py": """
class EngineClient:
    async def reset_prefix_cache(self, reset_running_requests=False, /, reset_connector=False): ...
""",
    "vllm/engine/arg_utils.py": """
from dataclasses import dataclass

@dataclass
class EngineArgs:
    model: str = "m"
    mm_processor_cache_gb: float = 4

@dataclass
class AsyncEngineArgs(EngineArgs):
    enable_log_requests: bool = False
""",
    "vllm/entrypoints/serve/api_router.py": """
@router.post("/reset_mm_cache")
async def reset_mm_cache(raw_request): ...

@router.api_route("/flush", methods=["GET", "POST"])
def flush(raw_request, timeout=None): ...

@router.get("/v1/models")
async def models(raw_request): ...
""",
}


def test_scan_reads_methods_routes_and_arguments_from_a_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in WHEEL_MODULES.items():
            archive.writestr(name, text)
        archive.writestr("vllm-9.9.9.dist-info/METADATA", "Name: vllm\n")
    scan = facts_script.scan_wheel(wheel, VLLM, "9.9.9")
    assert scan["classes"] == {
        "vllm/engine/protocol.py:EngineClient": {
            "bases": [],
            "methods": {"reset_prefix_cache": "async (self, reset_running_requests, reset_connector)"},
        },
        "vllm/v1/engine/async_llm.py:AsyncLLM": {
            "bases": ["vllm/engine/protocol.py:EngineClient"],
            "methods": {
                "pause_generation": "async (self, mode, clear_cache)",
                "reset_prefix_cache": "async (self, reset_running_requests, reset_connector)",
            },
        },
        "vllm/v1/worker/gpu_worker.py:Worker": {
            "bases": ["vllm/v1/worker/worker_base.py:WorkerBase"],
            "methods": {
                "reload_weights": "(self, *args, **kwargs)",
                "reset_mm_cache": "(self)",
                "sleep": "(self, level)",
            },
        },
        "vllm/v1/worker/worker_base.py:WorkerBase": {"bases": [], "methods": {"reset_mm_cache": "(self)"}},
    }
    assert scan["routes"] == {
        "GET /flush": "vllm/entrypoints/serve/api_router.py:flush (raw_request, timeout)",
        "POST /flush": "vllm/entrypoints/serve/api_router.py:flush (raw_request, timeout)",
        "POST /reset_mm_cache": "vllm/entrypoints/serve/api_router.py:reset_mm_cache async (raw_request)",
    }
    assert scan["arguments"] == ["enable_log_requests", "mm_processor_cache_gb", "model"]


def test_an_implicit_reset_outside_the_methods_releases_is_named(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    records, arguments, releases = copy.deepcopy(facts_script.load_table(VLLM))
    sleep = next(r for r in records if r["class"] == "AsyncLLM" and r["method"] == "sleep")
    sleep["implicit_resets"][0]["since"] = "0.7.0"
    sleep["implicit_resets"][1]["before"] = "0.16.5"
    assert _problems(VLLM, vllm_scans, (records, arguments, releases)) == [
        "AsyncLLM.sleep: implicit reset of prefix since 0.7.0: the method exists from 0.7.3",
        "AsyncLLM.sleep: implicit reset of prefix: 0.16.5 is no scanned release",
    ]


@pytest.mark.parametrize(
    ("cls", "release", "level", "expected"),
    [
        ("AsyncLLM", "0.10.0", 1, set()),
        ("AsyncLLM", "0.10.1", 1, {"prefix"}),
        ("AsyncLLM", "0.16.0", 2, {"prefix"}),
        ("AsyncLLM", "0.17.0", 1, {"prefix", "encoder", "mm-engine"}),
        ("AsyncLLM", "0.17.0", 0, set()),
        ("AsyncLLM", "0.22.0", 1, {"prefix", "encoder", "mm-engine", "mm-frontend"}),
        ("LLM", "0.7.0", 1, {"prefix"}),
        ("LLM", "0.16.0", 1, {"prefix"}),
        ("LLM", "0.34.0", 1, {"prefix", "encoder", "mm-engine", "mm-frontend"}),
        ("LLMEngine (v1)", "0.16.0", 1, set()),
        ("LLMEngine (v1)", "0.17.0", 1, {"prefix", "encoder", "mm-engine"}),
        ("EngineCore", "0.16.0", 1, set()),
        ("EngineCore", "0.22.0", 1, {"prefix", "encoder", "mm-engine"}),
        ("Worker (gpu_worker)", "0.22.0", 1, set()),
    ],
)
def test_what_an_engine_sleep_clears(cls: str, release: str, level: int, expected: set[str]) -> None:
    assert load_facts().implicit_resets("sleep", cls, Version(release), level=level) == expected


def test_what_a_pause_clears() -> None:
    facts = load_facts()
    assert facts.implicit_resets("pause_generation", "AsyncLLM", Version("0.11.1")) == set()
    assert facts.implicit_resets("pause_generation", "AsyncLLM", Version("0.15.1")) == {
        "prefix",
        "mm-engine",
        "mm-frontend",
    }
    assert "encoder" in facts.implicit_resets("pause_generation", "AsyncLLM", Version("0.16.0"))
    assert "mm-frontend" not in facts.implicit_resets("pause_generation", "AsyncLLM", Version("0.19.0"))
    assert facts.implicit_resets("pause_generation", "AsyncLLM", Version("0.34.0"), clear_cache=False) == set()
    pause = facts.route("/pause")
    assert pause is not None and pause.resets_at(Version("0.16.0")) == {"prefix", "mm-engine", "mm-frontend", "encoder"}


def test_weight_transfer_steps_and_routes() -> None:
    facts = load_facts()
    for method in ("start_weight_update", "update_weights", "finish_weight_update", "start_draft_weight_update"):
        assert facts.is_weight_update(method, "AsyncLLM") and facts.is_weight_update(method, "LLM")
        fact = facts.get(method, "AsyncLLM")
        assert fact is not None and fact.is_async and fact.clears == ()
    assert not facts.is_weight_update("init_weight_transfer_engine")
    assert not facts.is_weight_update("update_weights", "LLMEngine (v1)")  # LLMEngine has none
    start = facts.get("start_weight_update", "AsyncLLM")
    assert start is not None and not start.exists_in(Version("0.20.0")) and start.exists_in(Version("0.21.0"))
    assert start.drops_param("is_checkpoint_format", Version("0.25.0"))
    assert facts.weight_update_routes() == {
        "/start_weight_update",
        "/start_draft_weight_update",
        "/update_weights",
        "/finish_weight_update",
    }
    update = facts.route("/update_weights")
    assert update is not None and update.first_release == Version("0.16.0")
    assert update.param_source("update_info") == "body"


def test_route_arguments_are_read_from_the_query_string() -> None:
    facts = load_facts()
    pause, sleep = facts.route("/pause"), facts.route("/sleep")
    assert pause is not None and sleep is not None
    assert pause.param_source("clear_cache") == pause.param_source("mode") == "query"
    assert sleep.param_source("level") == "query" and sleep.param_source("tags") is None


def test_the_table_lacks_no_method_that_acts_on_a_cache(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    records, _, releases = facts_script.load_table(VLLM)
    known = Version(releases["releases"][-1])
    assert facts_script.new_candidates(VLLM, vllm_scans, records, known) == []


def test_an_old_method_the_table_lacks_is_proposed(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    records, arguments, releases = copy.deepcopy(facts_script.load_table(VLLM))
    records = [r for r in records if not (r["class"] == "LLMEngine (v1)" and r["method"] == "sleep")]
    records = [r for r in records if r["method"] != "POST /start_weight_update"]
    _, _, _, added = facts_script.updated_table(VLLM, vllm_scans, records, arguments, releases)
    assert [(r["class"], r["method"], r["first_release"], r["module_path"], r["scope"]) for r in added] == [
        ("LLMEngine", "sleep", "0.7.3", "vllm/v1/engine/llm_engine.py", None),
        (
            "OpenAI API server route",
            "POST /start_weight_update",
            "0.21.0",
            "vllm/entrypoints/rl/online/api_router.py",
            None,
        ),
    ]


def test_a_same_named_class_in_another_module_is_told_apart(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    records, _, releases = copy.deepcopy(facts_script.load_table(VLLM))
    records = [r for r in records if r["class"] != "EncoderCache (CPU Model Runner)"]
    found = facts_script.new_candidates(VLLM, vllm_scans, records, Version(releases["releases"][-1]))
    assert sorted((r["class"], r["method"], r["module_path"], r["first_release"]) for r in found) == [
        ("EncoderCache", "reset_encoder_cache", "vllm/v1/worker/cpu/encoder_cache.py", "0.34.0"),
        ("EncoderCache", "reset_mm_cache", "vllm/v1/worker/cpu/encoder_cache.py", "0.34.0"),
    ]


def test_a_method_inherited_unchanged_is_its_bases(vllm_scans: dict[Version, dict[str, Any]]) -> None:
    """EngineCoreProc inherits reset_prefix_cache from EngineCore, which the table records."""
    records, _, releases = facts_script.load_table(VLLM)
    scans = copy.deepcopy(vllm_scans)
    newest = max(scans)
    proc = scans[newest]["classes"]["vllm/v1/engine/core.py:EngineCoreProc"]["methods"]
    assert "reset_prefix_cache" in proc
    assert facts_script.new_candidates(VLLM, scans, records, Version(releases["releases"][-1])) == []
    proc["reset_prefix_cache"] = "(self, overridden)"
    found = facts_script.new_candidates(VLLM, scans, records, Version(releases["releases"][-1]))
    assert [(r["class"], r["method"], r["first_release"]) for r in found] == [
        ("EngineCoreProc", "reset_prefix_cache", str(newest))
    ]
