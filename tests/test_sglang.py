"""SGLang: its supported range from the project's pins (the same reader as vLLM's), receivers known as
SGLang's, launch sites, and the separation of the engines: vLLM's rules never fire on SGLang's objects
and SGLang's never on vLLM's."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
from cli_runner import check, write_tree

from cachelint.config import Settings
from cachelint.engine import Triggers, analyze
from cachelint.facts import SglangClass
from cachelint.project import ProjectIndex
from cachelint.provenance import Kind, receiver
from cachelint.summary.walk import summarize
from cachelint.vllm_range import SGLANG, VLLM, read_supported_range, resolve_range

# -- the supported range ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "first", "last"),
    [
        ("sglang==0.5.10.post1", "0.5.10.post1", "0.5.10.post1"),
        ("sglang[all]>=0.5.20", "0.5.20", None),
        ('sglang[srt]>=0.4.9,<0.5; extra == "sglang"', "0.4.9", "0.4.10.post2"),
    ],
)
def test_the_sglang_range_is_read_from_its_pins(tmp_path: Path, requirement: str, first: str, last: str | None) -> None:
    write_tree(tmp_path, {"requirements.txt": f"vllm==0.19.0\nsglang-router\n{requirement}\n"})
    supported = read_supported_range(tmp_path, SGLANG)
    assert str(supported.releases[0]) == first
    assert last is None or str(supported.releases[-1]) == last
    assert supported.source == "requirements.txt" or supported.source.endswith("requirements.txt")
    assert [str(release) for release in read_supported_range(tmp_path, VLLM).releases] == ["0.19.0"]


def test_no_sglang_pin_assumes_every_release(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pyproject.toml": '[project]\nname = "p"\ndependencies = ["vllm>=0.20"]\n'})
    supported = read_supported_range(tmp_path, SGLANG)
    assert supported.assumed and supported.releases == SGLANG.facts().releases


def test_the_setting_and_the_flag_set_the_sglang_range(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    supported = resolve_range(">=0.5.21", str(config), tmp_path, SGLANG)
    assert [str(r) for r in supported.releases][:1] == ["0.5.21"]
    assert supported.source.endswith('[tool.cachelint] sglang = ">=0.5.21"')
    flag = resolve_range("0.5.10", "--sglang", tmp_path, SGLANG)
    assert flag.summary() == 'SGLang 0.5.10 (--sglang "0.5.10")'


SGLANG_PROJECT = {
    "pyproject.toml": '[project]\nname = "p"\ndependencies = ["vllm>=0.22", "sglang[all]==0.5.10"]\n',
    "rl/__init__.py": "",
    "rl/rollout.py": textwrap.dedent(
        """
        import sglang as sgl


        class Rollout:
            def __init__(self, model_path):
                self.engine = sgl.Engine(model_path=model_path)

            def update_weights(self, buckets):
                for bucket in buckets:
                    self.engine.update_weights_from_tensor(bucket, flush_cache=False)
        """
    ),
}


def test_the_summary_settings_and_sarif_name_the_sglang_range(tmp_path: Path) -> None:
    project = write_tree(tmp_path / "p", SGLANG_PROJECT)
    result = check("--output-format", "concise", ".", cwd=project)
    assert result.code == 1
    assert "rl/rollout.py:11:13: CL201" in result.stdout
    assert "Checked for SGLang 0.5.10 (pyproject.toml, dependencies)." in result.stdout.splitlines()
    shown = json.loads(check("--show-settings", "rl/rollout.py", cwd=project).stdout)
    assert shown["supported-sglang"]["range"] == "0.5.10"
    assert shown["supported-sglang"]["pins"] == [
        {"file": "pyproject.toml", "requirement": "sglang[all]==0.5.10", "where": "dependencies"}
    ]
    sarif = json.loads(check("--output-format", "sarif", ".", cwd=project).stdout)
    assert [p["range"] for p in sarif["runs"][0]["properties"]["supportedSglang"]] == ["0.5.10"]
    narrowed = check("--output-format", "concise", "--sglang", ">=0.5.21", ".", cwd=project)
    assert "CL204" in narrowed.stdout  # a tensor update outside a weight-update session
    assert "Checked for SGLang 0.5.21\N{EN DASH}" in narrowed.stdout


def test_a_project_without_sglang_says_nothing_about_it(tmp_path: Path) -> None:
    project = write_tree(
        tmp_path / "p", {"pyproject.toml": '[project]\nname = "p"\ndependencies = ["vllm>=0.22"]\n', "a.py": "x = 1\n"}
    )
    result = check(".", cwd=project)
    assert "SGLang" not in result.stdout + result.stderr
    assert "supported-sglang" not in json.loads(check("--show-settings", "a.py", cwd=project).stdout)
    sarif = json.loads(check("--output-format", "sarif", ".", cwd=project).stdout)
    assert "supportedSglang" not in sarif["runs"][0]["properties"]


def test_sglang_pins_that_match_no_known_release_do_not_stop_the_run(tmp_path: Path) -> None:
    project = write_tree(
        tmp_path / "p",
        {"requirements.txt": "vllm>=0.22\nsglang==0.3.0\n", "rl.py": SGLANG_PROJECT["rl/rollout.py"]},
    )
    result = check("--output-format", "concise", ".", cwd=project)
    assert result.code == 1, result.stderr  # CL201 depends on no release; CL204 has none to judge
    assert [line.split(" ")[1] for line in result.stdout.splitlines() if ": CL" in line] == ["CL201"]
    assert "the SGLang pins (`sglang==0.3.0`) match no release cachelint knows" in result.stderr
    full = check(".", cwd=project)
    assert "Checked for no SGLang release (requirements.txt: its pins match none cachelint knows)." in full.stdout
    bad = check("--sglang", "<0.1", ".", cwd=project)
    assert bad.code == 2 and "--sglang" in bad.stderr


# -- receivers --------------------------------------------------------------------------------------------

RECEIVERS = """
import sglang as sgl
from sglang.srt.entrypoints.engine import Engine as SrtEngine
from vllm import LLM


class Client:
    def flush_cache(self):
        return self.session.get(f"{self.url}/flush_cache")


class Mixed:
    def __init__(self):
        self.engine = sgl.Engine(model_path="m")
        self.srt = SrtEngine(model_path="m")
        self.llm = LLM(model="m")
        self.client = Client()

    def calls(self):
        self.engine.flush_cache()
        self.srt.flush_cache()
        self.engine.tokenizer_manager.flush_cache()
        self.llm.flush_cache()
        self.client.flush_cache()


class SubEngine(sgl.Engine):
    def mine(self):
        self.flush_cache()
"""


def _receivers(source: str) -> dict[str, tuple[Kind, SglangClass | None]]:
    text = textwrap.dedent(source)
    summary = summarize("pkg/mod.py", text, ast.parse(text), module_name="pkg.mod")
    index = ProjectIndex([summary])
    found = {}
    for function in summary.functions:
        for call in function.calls:
            if call.name == "flush_cache":
                got = receiver(index, summary, function, call)
                found[call.receiver or "self"] = (got.kind, got.sglang_class)
    return found


def test_receivers_are_known_as_sglang_s() -> None:
    assert _receivers(RECEIVERS) == {
        "self.engine": (Kind.SGLANG, SglangClass.ENGINE),
        "self.srt": (Kind.SGLANG, SglangClass.ENGINE),
        "self.engine.tokenizer_manager": (Kind.SGLANG, SglangClass.TOKENIZER_MANAGER),
        "self.llm": (Kind.VLLM, None),
        "self.client": (Kind.PROJECT, None),
        "self": (Kind.SGLANG, SglangClass.ENGINE),
    }


# -- each engine's rules on its own engine only --------------------------------------------------------------


def _codes(tmp_path: Path, files: dict[str, str]) -> set[str]:
    project = write_tree(tmp_path / "p", {name: textwrap.dedent(text) for name, text in files.items()})
    analysis = analyze([project], Settings(multimodal=True), project_root=project)
    return {finding.code for finding in analysis.findings}


def test_vllm_rules_never_fire_on_sglang_engines(tmp_path: Path) -> None:
    source = """
        import asyncio

        import sglang as sgl
        from sglang.srt.managers.io_struct import PauseGenerationReqInput


        class Rollout:
            def __init__(self, model_path):
                self.engine = sgl.Engine(model_path=model_path)

            async def update_weights(self, buckets):
                self.engine.tokenizer_manager.pause_generation(PauseGenerationReqInput(mode="abort"))
                self.engine.update_weights_from_tensor(buckets)
                await self.engine.tokenizer_manager.reset_prefix_cache()
                self.engine.sleep(level=1)
                if hasattr(self.engine, "reset_encoder_cache"):
                    await asyncio.sleep(0)

            def generate(self, prompt, image):
                return {"prompt": prompt, "multi_modal_data": {"image": image}}
    """
    codes = _codes(tmp_path, {"pyproject.toml": '[project]\nname = "p"\n', "rl.py": source})
    assert not {code for code in codes if code.startswith("CL0")}, codes
    assert "CL204" in codes  # the vLLM reset on SGLang's tokenizer manager


def test_sglang_rules_never_fire_on_vllm_engines(tmp_path: Path) -> None:
    source = """
        import requests
        import sglang  # noqa: F401
        from vllm import LLM
        from vllm.v1.engine.async_llm import AsyncLLM


        class Rollout:
            def __init__(self, model_path, config):
                self.llm = LLM(model=model_path)
                self.engine = AsyncLLM.from_vllm_config(config)

            async def update_weights(self, named_tensors):
                self.llm.update_weights_from_tensor(named_tensors, flush_cache=False)
                self.llm.flush_cache()
                await self.engine.update_weights_from_disk("ckpt", flush_cache=True)
                await self.engine.pause_generation(mode="keep")
                self.llm.begin_weight_update()

            def generate(self, prompt, image):
                return {"text": prompt, "image_data": image}
    """
    codes = _codes(tmp_path, {"pyproject.toml": '[project]\nname = "p"\n', "rl.py": source})
    assert not {code for code in codes if code.startswith("CL2")}, codes


def test_launch_sites_are_recorded() -> None:
    text = textwrap.dedent(
        """
        import multiprocessing
        import subprocess

        import sglang as sgl
        from sglang.srt.entrypoints.http_server import launch_server


        def in_process(args):
            return sgl.Engine(**args)


        def child(server_args):
            process = multiprocessing.Process(target=launch_server, args=(server_args,))
            process.start()


        def server(env):
            subprocess.Popen(["python", "-m", "sglang.launch_server"], env=env)


        def unrelated():
            subprocess.run(["ls"])
        """
    )
    summary = summarize("pkg/mod.py", text, ast.parse(text), module_name="pkg.mod")
    assert [(launch.function, launch.kind, launch.env_value) for launch in summary.launches] == [
        ("in_process", "in-process", ""),
        ("child", "in-process", ""),
        ("server", "subprocess", "env"),
    ]


def test_a_command_naming_sglang_on_a_later_line_is_a_launch() -> None:
    text = textwrap.dedent(
        """
        import subprocess


        def start(port):
            command = [
                "python",
                "-m",
                "sglang.launch_server",
            ]
            subprocess.Popen(command)
            subprocess.Popen(
                ["python", "-m",
                 "SGLang.launch_server"],
            )
            subprocess.Popen(["python", "-m", "http.server"])
        """
    )
    summary = summarize("pkg/mod.py", text, ast.parse(text), module_name="pkg.mod")
    assert [(launch.span.line, launch.kind) for launch in summary.launches] == [(11, "subprocess"), (12, "subprocess")]


def test_cl2_selects_the_sglang_rules(tmp_path: Path) -> None:
    project = write_tree(tmp_path / "p", SGLANG_PROJECT)
    only_sglang = check("--output-format", "concise", "--select", "CL2", ".", cwd=project)
    assert only_sglang.code == 1 and "CL201" in only_sglang.stdout
    without = check("--output-format", "concise", "--ignore", "CL2", ".", cwd=project)
    assert without.code == 0 and "CL2" not in without.stdout


@pytest.mark.parametrize(
    ("source", "holds"),
    [
        (b"engine.update_weights_from_tensor(named_tensors=tensors)\n", True),
        (b'requests.post(f"{url}/update_weights_from_disk", json=body)\n', True),
        (b'client.call("update_weights_from_distributed", names)\n', True),
        (b"class Loader:\n    def update_weights_from_ipc(self):\n        pass\n", True),
        # a launch or an import alone is parsed when CL202 asks for the project's launch sites
        (b'cmd = ["python", "-m", "sglang.launch_server", "--port", "30000"]\n', False),
        (b"from sglang.srt.utils import MultiprocessingSerializer\n", False),
        (b'"""Sends the weights to SGLang with ``update_weights_from_tensor`` IPC."""\n', False),
        (b"# the sglang rollout loads the weights\nrollout_name = 'sglang'\n", False),
    ],
)
def test_sglang_trigger_words_are_code_not_prose(source: bytes, holds: bool) -> None:
    """Only a file whose bytes hold a trigger word is parsed up front; an update named in a docstring
    would make a checkpoint module a refit root, and its calls pull the training engines in on demand."""
    assert Triggers(()).held_by(source) is holds


def test_only_proven_subprocess_launches_are_recorded() -> None:
    text = textwrap.dedent(
        """
        import subprocess
        import sys

        from areal_like.config import SGLangConfig


        def ensure_tool(cmd):
            subprocess.check_call(["which", cmd])


        def run_user_code(path):
            return subprocess.Popen([sys.executable, path])


        def launch_server_cmd(command):
            return subprocess.Popen(command)


        def build_and_launch(args):
            cmd = SGLangConfig.build_cmd(args)
            return subprocess.Popen(cmd, disable_radix_cache=True)


        def server(port):
            subprocess.Popen(["python", "-m", "sglang.launch_server", "--disable-radix-cache"])
        """
    )
    summary = summarize("pkg/sglang_example.py", text, ast.parse(text), module_name="pkg.sglang_example")
    assert [(launch.function, launch.turned_off) for launch in summary.launches] == [
        ("launch_server_cmd", []),
        ("build_and_launch", ["disable_radix_cache"]),
        ("server", ["disable_radix_cache"]),
    ]


def test_a_process_targeting_sglang_from_a_context_is_a_launch() -> None:
    text = textwrap.dedent(
        """
        import multiprocessing


        def start(server_args):
            from sglang.srt.entrypoints.http_server import launch_server

            context = multiprocessing.get_context("spawn")
            return context.Process(target=launch_server, args=(server_args,))
        """
    )
    summary = summarize("pkg/mod.py", text, ast.parse(text), module_name="pkg.mod")
    assert [(launch.span.line, launch.kind) for launch in summary.launches] == [(9, "in-process")]


def test_served_routes_send_nothing() -> None:
    text = textwrap.dedent(
        """
        from aiohttp import web


        def app(handler, url, requests):
            application = web.Application()
            application.router.add_post("/update_weights_from_disk", handler)
            application.add_routes([web.post("/flush_cache", handler)])
            requests.post(f"{url}/flush_cache")
        """
    )
    summary = summarize("pkg/mod.py", text, ast.parse(text), module_name="pkg.mod")
    (function,) = [function for function in summary.functions if function.name == "app"]
    assert [(event.method, event.span.line) for event in function.sglang] == [("flush_cache", 9)]


def _route_receivers(tmp_path: Path, files: dict[str, str]) -> list[str]:
    project = write_tree(tmp_path / "p", {name: textwrap.dedent(text) for name, text in files.items()})
    analysis = analyze([project], Settings(sglang=">=0.5.2,<0.5.21"), project_root=project)
    return [note for finding in analysis.findings if finding.code == "CL204" for note in finding.notes]


def test_a_route_is_sglang_s_only_where_the_code_points_at_sglang(tmp_path: Path) -> None:
    post = """
        import requests


        class {name}:
            def update(self, url, handles):
                requests.post(f"{{url}}/update_weights_from_ipc", json={{"zmq_handles": handles}}).raise_for_status()
    """
    files = {
        "pyproject.toml": '[project]\nname = "p"\ndependencies = ["sglang>=0.5.2,<0.5.21", "lmdeploy"]\n',
        "rl/__init__.py": "",
        "rl/sglang_client.py": post.format(name="SGLangClient"),
        "rl/lmdeploy_client.py": post.format(name="LMDeployClient"),
        "rl/client.py": post.format(name="InferenceClient"),
        "rl/engines.py": "import lmdeploy\nimport sglang\n",
    }
    assert _route_receivers(tmp_path, files) == [
        "receiver: `/update_weights_from_ipc` is a route of SGLang's server (`SGLangClient.update` names SGLang)"
    ]
