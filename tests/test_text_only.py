"""Generation requests and the code that holds a multimodal rule's finding: a trainer, client or server
whose own requests to its engine build text prompts keeps CL003 and CL004 quiet, in a project that
sends images elsewhere; one that forwards what its callers built does not."""

from __future__ import annotations

import ast
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from cli_runner import write_tree
from fixture_cases import FIXTURES, Case, analyze_case

from cachelint.summary import FileSummary
from cachelint.summary.walk import summarize

MIXED = FIXTURES / "CL004" / "text_only_client_beside_multimodal"
SERVED_ROUTE = FIXTURES / "CL004" / "served_route_reads_text"


def requests_of(source: str) -> list[tuple[str, str, bool]]:
    """(function, target, forwarded) of every request the summary of `source` records."""
    text = textwrap.dedent(source)
    summary = summarize("module.py", text, ast.parse(text))
    return [
        (function.qualname, request.target, request.forwarded)
        for function in summary.functions
        for request in function.requests
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (  # the prompt the caller passed, as it is: a passthrough
            """
            class Server:
                async def generate(self, prompt, sampling_params, request_id):
                    return self.engine.generate(prompt, sampling_params, request_id)
            """,
            [("Server.generate", "generate", True)],
        ),
        (  # token ids (annotated) in a prompt built here
            """
            class Server:
                async def generate(self, prompt_ids: list[int], sampling_params, request_id: str):
                    prompt = TokensPrompt(prompt_token_ids=prompt_ids)
                    return self.engine.generate(prompt=prompt, sampling_params=sampling_params, request_id=request_id)
            """,
            [("Server.generate", "generate", False)],
        ),
        (  # the text read out of the caller's examples
            """
            class Trainer:
                def rollout(self, examples):
                    texts = [self.tokenizer.apply_chat_template(x["prompt"], tokenize=False) for x in examples]
                    return self.llm.generate(texts[:: self.n], self.params)
            """,
            [("Trainer.rollout", "generate", False)],
        ),
        (  # the caller's examples themselves
            """
            class Trainer:
                def rollout(self, examples):
                    inputs = [example for example in examples]
                    return self.llm.generate(inputs, self.params)
            """,
            [("Trainer.rollout", "generate", True)],
        ),
        (  # an OpenAI request read from the HTTP request, through a front end
            """
            class Server:
                async def chat_completion(self, raw_request):
                    request = ChatCompletionRequest(**await raw_request.json())
                    return await self.serving_chat.create_chat_completion(request, raw_request)
            """,
            [("Server.chat_completion", "create_chat_completion", True)],
        ),
        (  # through a thread, with prompts built from token ids
            """
            class Engine:
                async def generate(self, batch):
                    ids = batch.get("prompt_token_ids")
                    prompts = [TokensPrompt(prompt_token_ids=row) for row in ids]
                    return await asyncio.to_thread(self.llm.generate, prompts=prompts, sampling_params=self.params)
            """,
            [("Engine.generate", "generate", False)],
        ),
        (  # a body built here, the caller's tokens in its text field, a model name annotated as text
            """
            class Worker:
                async def score(self, prompt_ids, model: str):
                    payload = {"model": model, "prompt": prompt_ids, "max_tokens": 1}
                    return await self._post(self.url, "/v1/completions", payload)
            """,
            [("Worker.score", "/v1/completions", False)],
        ),
        (  # media of the caller's in a field of a body built here
            """
            class Client:
                def generate(self, prompts, images):
                    body = {"prompts": prompts, "images": images}
                    return requests.post(f"{self.base_url}/generate/", json=body).json()
            """,
            [("Client.generate", "/generate/", True)],
        ),
        (  # ... or stored into it afterwards
            """
            class Client:
                async def generate_one(self, token_ids: list[int], features=None):
                    url = f"{self.proxy_url}/inference/v1/generate" if self.plain else f"{self.proxy_url}/x/generate"
                    payload = {"token_ids": token_ids}
                    if features:
                        payload["features"] = features
                    return await self._post(url, json=payload)
            """,
            [("Client.generate_one", "/generate", True)],
        ),
        (  # the caller's body, split from a wrapper by a helper
            """
            class Client:
                async def chat_completion(self, request_payload):
                    session_id, body = split_session(request_payload)
                    url = f"{self.proxy_url}/v1/chat/completions"
                    return await self._post(url, json=body)
            """,
            [("Client.chat_completion", "/v1/chat/completions", True)],
        ),
        (  # a closure posting its function's parameter, and a lambda's parameter
            """
            class Client:
                def chat(self, messages):
                    def send():
                        return self.session.post(f"{self.base_url}/v1/chat/completions", json={"messages": messages})
                    return send()

                def run(self, pool):
                    return pool.map(lambda prompt: self.llm.generate(prompt), self.queue)
            """,
            [
                ("Client.chat.<locals>.send", "/v1/chat/completions", True),
                ("Client.run", "generate", True),
            ],
        ),
        (  # a route the module serves: requests come in from outside
            """
            @app.post("/v1/chat/completions")
            async def chat(request: Request):
                return await handle(request)
            """,
            [("<module>", "/v1/chat/completions", True)],
        ),
        (  # a route whose handler shows its request: only that request counts
            """
            @app.post("/generate")
            async def generate(request: Request):
                return await _generate(await request.json())

            async def _generate(request_dict):
                prompt = request_dict.pop("prompt")
                return engine.generate(prompt, SamplingParams(**request_dict), request_dict.get("id"))

            async def complete(request):
                return await engine.generate(request.get("prompt_token_ids"), params)

            app.add_api_route("/v1/completions", complete, methods=["POST"])
            """,
            [("_generate", "generate", False), ("complete", "generate", False)],
        ),
        (  # ... read from a field that may hold media, it is forwarded
            """
            async def _generate(request_dict):
                inputs = request_dict.pop("inputs")
                return engine.generate(inputs, params)
            """,
            [("_generate", "generate", True)],
        ),
        (  # a route named in a label or a message is no request
            """
            async def turn(self, payload):
                return await retry(lambda: post_json(payload), label="POST /v1/completions")
            """,
            [],
        ),
    ],
    ids=[
        "forwarded-prompt",
        "token-prompt",
        "text-from-examples",
        "examples-whole",
        "front-end-passthrough",
        "to-thread",
        "built-body",
        "media-field",
        "media-stored-later",
        "split-body",
        "closure-and-lambda",
        "served-route",
        "served-route-handled-here",
        "text-field-popped",
        "label",
    ],
)
def test_requests_and_what_they_forward(source: str, expected: list[tuple[str, str, bool]]) -> None:
    assert requests_of(source) == expected


def test_a_file_without_request_words_records_none() -> None:
    source = """
    class Server:
        async def run(self, prompt):
            return self.engine.add_request(prompt)
    """
    assert requests_of(source) == []


def test_requests_survive_the_cache() -> None:
    text = textwrap.dedent(
        """
        class Server:
            def generate(self, prompt):
                return self.llm.generate(prompt)
        """
    )
    summary = summarize("m.py", text, ast.parse(text))
    again = FileSummary.from_json(json.loads(summary.encode()))
    assert again.functions == summary.functions
    assert again.functions[1].requests[0].chain == ["self", "llm"]


# ---------------------------------------------------------------- the code that decides


def flagged(project: Path) -> list[tuple[str, str]]:
    analysis = analyze_case(Case("CL004", project))
    return sorted((finding.path, finding.code) for finding in analysis.findings)


def test_a_subclass_sending_images_from_a_file_not_parsed_keeps_the_base_flagged(tmp_path: Path) -> None:
    """rollout/vision.py holds no trigger word, so the run does not parse it for the rules; its class
    statement is found before the base's text-only requests decide."""
    project = tmp_path / "mixed"
    shutil.copytree(MIXED, project, ignore=shutil.ignore_patterns("*.fixed"))
    assert ("mixed_rl/rollout/base.py", "CL004") in flagged(project)
    (project / "mixed_rl/rollout/vision.py").unlink()
    assert ("mixed_rl/rollout/base.py", "CL004") not in flagged(project)


def test_a_passthrough_in_the_folder_keeps_a_client_that_sends_nothing_flagged(tmp_path: Path) -> None:
    project = tmp_path / "mixed"
    shutil.copytree(MIXED, project, ignore=shutil.ignore_patterns("*.fixed"))
    assert ("mixed_rl/async_rl/client.py", "CL004") not in flagged(project)
    write_tree(
        project,
        {
            "mixed_rl/async_rl/chat_proxy.py": (
                "import requests\n\n\n"
                "def forward(base_url, body):\n"
                '    return requests.post(f"{base_url}/v1/chat/completions", json=body).json()\n'
            )
        },
    )
    assert ("mixed_rl/async_rl/client.py", "CL004") in flagged(project)


def test_evidence_in_the_folder_keeps_a_client_that_sends_nothing_flagged(tmp_path: Path) -> None:
    project = tmp_path / "mixed"
    shutil.copytree(MIXED, project, ignore=shutil.ignore_patterns("*.fixed"))
    write_tree(project, {"mixed_rl/async_rl/limits.py": 'LIMITS = {"limit_mm_per_prompt": {"image": 1}}\n'})
    assert ("mixed_rl/async_rl/client.py", "CL004") in flagged(project)


@pytest.mark.parametrize(
    ("handler", "old", "new"),
    [
        ("reads a field that may hold media", 'pop("prompt")', 'pop("inputs")'),
        (
            "leaves the request to code it does not show",
            "return await _generate(request_dict)",
            "return await handle(request)",
        ),
    ],
)
def test_a_served_route_keeps_the_pause_flagged_when_its_handler(
    tmp_path: Path, handler: str, old: str, new: str
) -> None:
    project = tmp_path / "bridge"
    shutil.copytree(SERVED_ROUTE, project)
    assert flagged(project) == []
    server = project / "bridge_rl" / "server.py"
    source = server.read_text(encoding="utf-8")
    assert old in source
    server.write_text(source.replace(old, new), encoding="utf-8")
    assert flagged(project) == [("bridge_rl/server.py", "CL004")], handler


HELPER_PROJECT = {
    "pyproject.toml": '[project]\nname = "helper-rl"\nversion = "0.1.0"\ndependencies = ["vllm>=0.20,<0.22"]\n',
    "helper_rl/__init__.py": "",
    "helper_rl/inputs.py": (
        "def build_inputs(rows):\n"
        '    return [{"prompt": row["prompt"], "multi_modal_data": {"image": row["image"]}} for row in rows]\n'
    ),
    "helper_rl/text.py": 'def build_texts(rows):\n    return [row["prompt"] for row in rows]\n',
    "helper_rl/trainer.py": (
        "from vllm import LLM\n\n"
        "from helper_rl.inputs import build_inputs\n"
        "from helper_rl.text import build_texts\n\n\n"
        "class Trainer:\n"
        "    def __init__(self, model: str):\n"
        "        self.llm = LLM(model=model, enable_sleep_mode=True)\n\n"
        "    def rollout(self):\n"
        "        outputs = self.llm.generate(BUILD(self.rows))\n"
        "        self.llm.sleep(level=1)\n"
        "        return outputs\n"
    ),
}


@pytest.mark.parametrize(("helper", "reported"), [("build_inputs", True), ("build_texts", False)])
def test_a_prompt_built_by_a_function_of_a_multimodal_file_keeps_the_finding(
    tmp_path: Path, helper: str, reported: bool
) -> None:
    files = dict(HELPER_PROJECT)
    files["helper_rl/trainer.py"] = files["helper_rl/trainer.py"].replace("BUILD", helper)
    project = write_tree(tmp_path / "helper", files)
    assert (("helper_rl/trainer.py", "CL004") in flagged(project)) is reported


SHARED_ENGINE_PROJECT = {
    "pyproject.toml": '[project]\nname = "shared-rl"\nversion = "0.1.0"\ndependencies = ["vllm>=0.20,<0.22"]\n',
    "shared_rl/__init__.py": "",
    "shared_rl/generation.py": (
        "from vllm import LLM\n\n\n"
        "class Generation:\n"
        "    def __init__(self, model: str):\n"
        "        self.llm = LLM(model=model, enable_sleep_mode=True)\n\n"
        "    def generate(self, rows):\n"
        '        prompts = [{"prompt": row["prompt"], "multi_modal_data": {"image": row["image"]}} for row in rows]\n'
        "        return self.llm.generate(prompts)\n"
    ),
    "shared_rl/rollouts.py": (
        '"""Custom rollouts on the trainer\'s engine, which also gets the image prompts of generation.py."""\n\n'
        "from vllm import SamplingParams\n\n\n"
        "def generate_text(trainer, rows):\n"
        '    outputs = trainer.generation.llm.generate([row["prompt"] for row in rows], SamplingParams())\n'
        "    trainer.generation.llm.sleep(level=1)\n"
        "    return outputs\n"
    ),
}


def test_an_engine_reached_through_another_object_is_not_judged_by_the_codes_own_requests(tmp_path: Path) -> None:
    """The helper's own request is text, but the engine belongs to another object whose requests carry
    images: its sleep still desyncs their processor cache."""
    project = write_tree(tmp_path / "shared", SHARED_ENGINE_PROJECT)
    assert ("shared_rl/rollouts.py", "CL004") in flagged(project)


SIBLINGS_PROJECT = {
    "pyproject.toml": '[project]\nname = "sib-rl"\nversion = "0.1.0"\ndependencies = ["vllm>=0.20,<0.22"]\n',
    "sib_rl/__init__.py": "",
    "sib_rl/base.py": (
        "class ServerBase:\n"
        "    async def generate(self, prompt_ids, params, request_id):\n"
        "        raise NotImplementedError\n"
    ),
    "sib_rl/token_server.py": (
        "from vllm.inputs import TokensPrompt\n"
        "from vllm.v1.engine.async_llm import AsyncLLM\n\n"
        "from sib_rl.base import ServerBase\n\n\n"
        "class TokenServer(ServerBase):\n"
        "    def __init__(self, config):\n"
        "        self.engine = AsyncLLM.from_vllm_config(config)\n\n"
        "    async def generate(self, prompt_ids: list[int], params, request_id: str):\n"
        "        prompt = TokensPrompt(prompt_token_ids=prompt_ids)\n"
        "        return [out async for out in self.engine.generate(prompt, params, request_id)]\n\n"
        "    async def sleep(self) -> None:\n"
        "        await self.engine.sleep(level=1)\n"
    ),
    "sib_rl/other_server.py": (
        '"""A sibling: another subclass of the base, with an engine of its own that forwards prompts."""\n\n'
        "from sib_rl.base import ServerBase\n\n\n"
        "class OtherServer(ServerBase):\n"
        "    async def generate(self, prompt, params, request_id):\n"
        "        return await self.engine.generate(prompt, params, request_id)\n"
    ),
    "sib_rl/vision.py": (
        'def image_prompt(ids, image):\n    return {"prompt_token_ids": ids, "multi_modal_data": {"image": image}}\n'
    ),
}


def test_a_sibling_class_is_not_part_of_the_scope(tmp_path: Path) -> None:
    """OtherServer shares the base with TokenServer but no instance: its passthrough says nothing of
    TokenServer's engine, which gets token prompts only."""
    project = write_tree(tmp_path / "sib", SIBLINGS_PROJECT)
    assert ("sib_rl/token_server.py", "CL004") not in flagged(project)
    files = dict(SIBLINGS_PROJECT)
    files["sib_rl/other_server.py"] = files["sib_rl/other_server.py"].replace("(ServerBase)", "(TokenServer)")
    files["sib_rl/other_server.py"] = files["sib_rl/other_server.py"].replace(
        "from sib_rl.base import ServerBase", "from sib_rl.token_server import TokenServer"
    )
    project = write_tree(tmp_path / "sub", files)
    assert ("sib_rl/token_server.py", "CL004") in flagged(project)
