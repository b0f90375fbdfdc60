"""scripts/real_code.py offline: the committed triage is complete and well-formed, a wheel's pins reach
cachelint, and new, vanished and changed findings are caught. The corpus run itself needs the network
and is not part of the test suite (see docs/REAL_CODE.md)."""

from __future__ import annotations

import importlib.util
import re
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("real_code", REPO / "scripts" / "real_code.py")
assert _spec is not None and _spec.loader is not None
real_code = importlib.util.module_from_spec(_spec)
sys.modules["real_code"] = real_code
_spec.loader.exec_module(real_code)


def test_committed_triage_is_complete() -> None:
    _, entries = real_code.read_triage(real_code.TRIAGE)
    corpus = {dist.label for dist in real_code.CORPUS}
    assert entries
    for entry in entries:
        assert entry.key.distribution in corpus, entry.key.show()
        assert entry.verdict in ("true", "false", "debatable"), entry.key.show()
        assert entry.fix == "-" or re.fullmatch(r"(ok|wrong)@[0-9a-f]{8}", entry.fix), entry.key.show()
        assert entry.reason.strip(), entry.key.show()
        if entry.fix != "-":
            assert "fix:" in entry.reason, entry.key.show()
    keys = [entry.key for entry in entries]
    assert len(keys) == len(set(keys))


def make_wheel(path: Path, requires: list[str]) -> Path:
    wheel = path / "demo_rl-1.0-py3-none-any.whl"
    metadata = "Metadata-Version: 2.1\nName: demo-rl\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {line}\n" for line in requires
    )
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo_rl-1.0.dist-info/METADATA", metadata)
        archive.writestr("demo_rl-1.0.data/purelib/demo_rl/__init__.py", "")
        archive.writestr(
            "demo_rl/server.py",
            "from vllm.v1.engine.async_llm import AsyncLLM\n\n\n"
            "class Server:\n"
            "    def __init__(self, config):\n"
            "        self.engine = AsyncLLM.from_engine_args(config)\n\n"
            "    async def update_weights(self, weights):\n"
            "        await self.engine.collective_rpc('load', args=(weights,))\n"
            "        await self.engine.reset_prefix_cache()\n\n"
            "    def image_prompt(self, prompt_ids, image):\n"
            "        return {'prompt_token_ids': prompt_ids, 'multi_modal_data': {'image': image}}\n",
        )
    return wheel


def test_wheel_pins_reach_cachelint(tmp_path: Path) -> None:
    """The same wheel, pinned below and above 0.9.0 (the first release with reset_mm_cache): the pin
    written from Requires-Dist decides whether CL003 fires."""
    found = {}
    for pin in ("vllm<0.9; extra == 'vllm'", "vllm>=0.18; extra == 'vllm'"):
        folder = tmp_path / pin[:8].replace("<", "lt").replace(">", "ge").replace("=", "")
        folder.mkdir()
        tree = folder / "tree"
        real_code.unpack(make_wheel(folder, ["requests", pin]), tree)
        assert (tree / "demo_rl" / "__init__.py").is_file()
        assert not (tree / "demo_rl-1.0.data" / "purelib").exists()
        assert pin in (tree / "requirements.txt").read_text(encoding="utf-8")
        found[pin] = [f["code"] for f in real_code.cachelint(tree) if f["code"] == "CL003"]
    assert found == {"vllm<0.9; extra == 'vllm'": [], "vllm>=0.18; extra == 'vllm'": ["CL003"]}


def finding(line: int, edits: list[dict[str, object]] | None = None) -> dict[str, object]:
    fix = {"applicability": "unsafe", "edits": edits, "message": "m"} if edits else None
    return {"code": "CL003", "filename": "a.py", "location": {"row": line, "column": 5}, "message": "m", "fix": fix}


def test_new_vanished_and_changed_fix_fail(tmp_path: Path) -> None:
    dist = real_code.Dist("demo", "1.0")
    edit = {"content": "x", "location": {"row": 3, "column": 1}, "end_location": {"row": 3, "column": 1}}
    kept = real_code.Found(real_code.key_of(dist, finding(3, [edit])), finding(3, [edit]))
    fix_id = real_code.fix_id(kept.fix)
    triage = tmp_path / "triage.tsv"
    triage.write_text(
        "# header\n"
        f"demo==1.0\ta.py\t3\t5\tCL003\ttrue\tok@{fix_id}\treal; fix: fine\n"
        "demo==1.0\ta.py\t9\t5\tCL003\tfalse\t-\tgone\n",
        encoding="utf-8",
    )
    _, entries = real_code.read_triage(triage)
    new = real_code.Found(real_code.key_of(dist, finding(7)), finding(7))
    problems, updated = real_code.compare([kept, new], entries, {"demo==1.0"})
    assert [p.split(":")[0] for p in problems] == ["new", "vanished"]
    assert sorted((e.key.line, e.verdict) for e in updated) == [(3, "true"), (7, "untriaged")]

    changed_edit = {**edit, "content": "y"}
    changed = real_code.Found(kept.key, finding(3, [changed_edit]))
    _, entries = real_code.read_triage(triage)
    problems, _ = real_code.compare([changed], entries, {"demo==1.0"})
    assert problems[0].startswith("new or changed fix")


def test_bad_triage_line_is_one_clear_error(tmp_path: Path) -> None:
    triage = tmp_path / "triage.tsv"
    triage.write_text("demo==1.0\ta.py\t3\t5\tCL003\tmaybe\t-\tx\n", encoding="utf-8")
    with pytest.raises(real_code.Failure, match="bad verdict 'maybe'"):
        real_code.read_triage(triage)


def test_apply_alone_matches_cachelint_positions() -> None:
    text = "def f():\n    a()\n"
    edits: list[dict[str, object]] = [
        {"content": "\n    b()", "location": {"row": 2, "column": 8}, "end_location": {"row": 2, "column": 8}}
    ]
    assert real_code.apply_alone(text, edits) == "def f():\n    a()\n    b()\n"
