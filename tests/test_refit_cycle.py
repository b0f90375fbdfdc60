"""The refit cycle model: pushes, what follows them, and what each event clears on which release."""

from __future__ import annotations

import ast
import textwrap

from packaging.version import Version

from cachelint.facts import load_cache_effects, load_facts
from cachelint.project import ProjectIndex
from cachelint.refit_cycle import ENCODER, PREFIX, Needs, clears, cycle, prefix_caching_setting, pushes
from cachelint.summary import summarize

ROOTS = frozenset({"sync_weights"})


def _index(code: str) -> ProjectIndex:
    text = textwrap.dedent(code)
    return ProjectIndex([summarize("rollout.py", text, ast.parse(text), module_name="rollout")])


def _events(code: str) -> dict[str, list]:
    index = _index(code)
    return {ref.function.name: ref.function.resets for ref in index.functions()}


def _cleared(event, release: str) -> frozenset[str]:
    return clears(event, load_facts(), load_cache_effects(), Version(release))


ENGINE = """
from vllm.v1.engine.async_llm import AsyncLLM

class Rollout:
    def __init__(self, config):
        self.engine = AsyncLLM.from_vllm_config(config)

    async def nap(self):
        await self.engine.sleep(level=1)

    async def pause(self):
        await self.engine.pause_generation()

    async def keep(self):
        await self.engine.pause_generation(clear_cache=False)
"""


def test_an_engine_sleep_clears_the_prefix_cache_from_0101_and_the_encoder_cache_from_0170() -> None:
    (sleep,) = _events(ENGINE)["nap"]
    assert _cleared(sleep, "0.10.0") == frozenset()
    assert _cleared(sleep, "0.10.1") == {PREFIX}
    assert _cleared(sleep, "0.16.0") == {PREFIX}
    assert _cleared(sleep, "0.17.0") == {PREFIX, ENCODER}


def test_a_clearing_pause_clears_the_prefix_from_0120_and_the_encoder_from_0160_and_a_keeping_one_nothing() -> None:
    events = _events(ENGINE)
    (pause,) = events["pause"]
    assert _cleared(pause, "0.15.1") == {PREFIX}
    assert _cleared(pause, "0.16.0") == {PREFIX, ENCODER}
    (keep,) = events["keep"]
    assert _cleared(keep, "0.20.0") == frozenset()


def test_prefix_caching_is_read_from_literal_settings_only() -> None:
    assert prefix_caching_setting([("a.py", b"LLM(m, enable_prefix_caching=False)")]) is False
    assert prefix_caching_setting([("c.yaml", b"enable_prefix_caching: true")]) is True
    assert prefix_caching_setting([("c.py", b"no_enable_prefix_caching: bool = True")]) is False
    assert prefix_caching_setting([("c.py", b"enable_prefix_caching: bool | None = None")]) is None
    both = [("a.py", b"enable_prefix_caching=False"), ("b.py", b"enable_prefix_caching=True")]
    assert prefix_caching_setting(both) is None


def test_what_the_next_generation_needs_by_release() -> None:
    effects = load_cache_effects()
    default = Needs(effects, None, multimodal=True, salted=False)
    assert default.on(Version("0.7.3")) == frozenset()  # V0 by default: prefix caching off, outputs die
    assert default.on(Version("0.10.1.1")) == {PREFIX}
    assert default.on(Version("0.10.2")) == {PREFIX, ENCODER}
    salted = Needs(effects, True, multimodal=True, salted=True)
    assert salted.on(Version("0.20.0")) == {ENCODER}
    assert Needs(effects, False, multimodal=False, salted=False).on(Version("0.20.0")) == frozenset()


PUSHES = """
from vllm import LLM
from vllm.v1.engine.async_llm import AsyncLLM

class Trainer:
    def __init__(self, model, config):
        self.llm = LLM(model)
        self.engine = AsyncLLM.from_vllm_config(config)

    def load(self, state):
        model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        model.load_weights(state.items())

    async def sync_weights(self, names):
        await self.engine.init_weight_transfer_engine({})
        await self.engine.update_weights(names=names)
        await self.engine.finish_weight_update()

    async def step(self, names):
        await self.sync_weights(names)
        await self.engine.reset_prefix_cache()
"""


def test_pushes_are_the_last_weight_load_of_each_function_and_setup_is_not_one() -> None:
    index = _index(PUSHES)
    found = {(push.ref.function.name, push.call.name, push.kind, push.engine) for push in pushes(index, ROOTS)}
    assert found == {
        ("load", "load_weights", "driver-worker", "self.llm"),
        ("sync_weights", "finish_weight_update", "native", "self.engine"),
    }


def test_a_reset_in_the_caller_after_the_push_is_on_its_cycle() -> None:
    index = _index(PUSHES)
    push = next(push for push in pushes(index, ROOTS) if push.kind == "native")
    steps = cycle(index, push, ROOTS).steps
    assert [(step.ref.function.name, step.event.method) for step in steps] == [("step", "reset_prefix_cache")]
    load = next(push for push in pushes(index, ROOTS) if push.kind == "driver-worker")
    assert cycle(index, load, ROOTS).steps == ()  # `step` is no reset entry point of its own
