"""The releases a project deploys, read from its Dockerfiles, shell scripts, compose files and CI
workflows (cachelint.deployment), and how they combine with its pins and its own version tests into
the supported range (vllm_range.read_supported_range, widen_by_code)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest
from cli_runner import check, write_tree
from packaging.version import Version

from cachelint.deployment import image_release, read_deployed, read_dockerfile, read_shell, read_yaml
from cachelint.vllm_range import (
    SGLANG,
    VLLM,
    from_specifier,
    known_releases,
    match_release,
    read_supported_range,
    widen_by_code,
)

SEED = Path(__file__).resolve().parent.parent / "fixtures" / "CL004" / "seed_stale_pin_docker_and_gates"


def releases(found: Iterable[tuple[int, str, Version]]) -> list[str]:
    return [str(version) for _, _, version in found]


# -- what each kind of file names ----------------------------------------------------------------------------


def test_an_unrelated_dockerfile_names_no_release() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "ARG TORCH_VERSION=2.6.0\n"
        'RUN pip install "torch==${TORCH_VERSION}" vllm-flash-attn==2.6.2 && pip install vllm\n'
        "FROM ghcr.io/example/reward-server:0.19.0\n"
    )
    assert releases(read_dockerfile(text, "vllm")) == []
    assert releases(read_dockerfile(text, "sglang")) == []


def test_a_range_in_a_dockerfile_install_names_no_release() -> None:
    """A deployment builds one release: `vllm>=0.8` says which it is not."""
    assert releases(read_dockerfile('RUN pip install "vllm>=0.8,<0.12"\n', "vllm")) == []


def test_dockerfile_args_env_from_and_run() -> None:
    text = (
        "# vLLM 0.20.2 was tried too\n"
        "ARG BASE=vllm/vllm-openai\n"
        "ARG VLLM_VERSION=0.23.0\n"
        "FROM --platform=linux/amd64 ${BASE}:v${VLLM_VERSION} AS runtime\n"
        "ENV SGLANG_VERSION 0.5.15.post1\n"
        'RUN python -m pip install --no-cache-dir "vllm==${VLLM_VERSION}" && \\\n'
        "    uv pip install sglang[all]==0.4.6.post1\n"
    )
    assert releases(read_dockerfile(text, "vllm")) == ["0.23.0", "0.23.0", "0.23.0"]
    assert [(line, str(version)) for line, _, version in read_dockerfile(text, "sglang")] == [
        (5, "0.5.15.post1"),
        (6, "0.4.6.post1"),
    ]


@pytest.mark.parametrize(
    ("image", "name", "release"),
    [
        ("vllm/vllm-openai:v0.10.1", "vllm", "0.10.1"),
        ("vllm/vllm-openai:latest", "vllm", None),
        ("lmsysorg/sglang:v0.5.15.post1-cu126", "sglang", "0.5.15.post1"),
        ("verlai/verl:app-verl0.5-vllm0.9.1-mcore0.12.2", "vllm", "0.9.1"),
        ("rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", "vllm", "0.8.5"),
        ("vllm/vllm-openai@sha256:0123abcd", "vllm", None),
        ("ghcr.io/example/reward-server:0.19.0", "vllm", None),
    ],
)
def test_image_release(image: str, name: str, release: str | None) -> None:
    found = image_release(image, name)
    assert (str(found) if found else None) == release


def test_shell_script_variables_images_and_installs() -> None:
    text = (
        "#!/usr/bin/env bash\n"
        "# SGLANG_IMAGE_TAG=v0.4.0 is an old comment\n"
        "SGLANG_IMAGE_TAG=v0.5.15.post1\n"
        'docker run --gpus all "lmsysorg/sglang:${SGLANG_IMAGE_TAG}" python -m sglang.launch_server\n'
        "export VLLM_VERSION=${VLLM_VERSION:-0.10.1}\n"
        "pip3 install vllm==$VLLM_VERSION\n"
    )
    assert [(line, str(version)) for line, _, version in read_shell(text, "sglang")] == [
        (3, "0.5.15.post1"),
        (4, "0.5.15.post1"),
    ]
    assert releases(read_shell(text, "vllm")) == ["0.10.1", "0.10.1"]


def test_compose_and_workflow_files() -> None:
    text = (
        "services:\n"
        "  rollout:\n"
        "    image: vllm/vllm-openai:v0.11.0  # pinned\n"
        "    environment:\n"
        "      - SGLANG_IMAGE_TAG=v0.5.15\n"
        "jobs:\n"
        "  gpu:\n"
        "    env:\n"
        '      VLLM_VERSION: "0.12.0"\n'
        "    steps:\n"
        "      - name: install vllm==0.9.0 (named, not run)\n"
        "      - run: |\n"
        "          pip install vllm==0.13.0 pytest\n"
        '      - run: pip install "vllm==0.14.0"\n'
    )
    assert [(line, str(version)) for line, _, version in read_yaml(text, "vllm")] == [
        (3, "0.11.0"),
        (9, "0.12.0"),
        (13, "0.13.0"),
        (14, "0.14.0"),
    ]
    assert releases(read_yaml(text, "sglang")) == ["0.5.15"]


def test_where_deployment_files_are_looked_for(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "Dockerfile": "FROM vllm/vllm-openai:v0.10.0\n",
            "docker/Dockerfile.stable.vllm": "ARG VLLM_VERSION=0.23.0\n",
            "docker/rocm/Containerfile": "FROM rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521\n",
            ".github/workflows/ci.yml": "    steps:\n      - run: pip install vllm==0.11.0\n",
            "scripts/serve.sh": "VLLM_IMAGE_TAG=v0.12.0\n",
            "examples/deep/run.sh": "VLLM_VERSION=0.13.0\n",  # not a deployment folder
            "docker/sub/pyproject.toml": '[project]\nname = "sub"\n',  # a project of its own
            "docker/sub/Dockerfile": "FROM vllm/vllm-openai:v0.14.0\n",
        },
    )
    found = sorted((path.relative_to(root).as_posix(), str(version)) for path, _, _, version in _fields(root))
    assert found == [
        (".github/workflows/ci.yml", "0.11.0"),
        ("Dockerfile", "0.10.0"),
        ("docker/Dockerfile.stable.vllm", "0.23.0"),
        ("docker/rocm/Containerfile", "0.8.5"),
        ("scripts/serve.sh", "0.12.0"),
    ]


def _fields(root: Path) -> list[tuple[Path, int, str, Version]]:
    return [(item.file, item.line, item.text, item.version) for item in read_deployed(root)]


@pytest.mark.parametrize(
    ("written", "known", "note"),
    [
        ("0.19.0+cu121", "0.19.0", ""),
        ("0.8.5.post1", "0.8.5.post1", ""),
        ("0.9.0.1", "0.9.0.1", ""),
        ("0.5.4", None, "older than any release cachelint knows"),
        ("99.0", str(known_releases()[-1]), "newer than"),
    ],
)
def test_a_deployed_version_matches_a_known_release(written: str, known: str | None, note: str) -> None:
    release, why = match_release(Version(written), VLLM)
    assert (str(release) if release else None, note in why) == (known, True)


def test_sglang_post_releases_match_the_nearest_known_one() -> None:
    release, why = match_release(Version("0.5.15.post3+cu126"), SGLANG)
    assert (str(release), why) == ("0.5.15.post1", "")


# -- how the sources combine ---------------------------------------------------------------------------------


def test_pins_only_is_todays_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path, {"requirements.txt": "vllm>=0.12,<0.17\n"})
    monkeypatch.chdir(tmp_path)
    supported = read_supported_range(tmp_path)
    assert (supported.label("-"), supported.source, supported.evidence) == ("0.12.0-0.16.0", "requirements.txt", ())
    assert supported.warnings(tmp_path) == []


def test_a_deployment_inside_the_pins_adds_nothing_and_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(tmp_path, {"requirements.txt": "vllm>=0.12,<0.17\n", "Dockerfile": "FROM vllm/vllm-openai:v0.14.1\n"})
    monkeypatch.chdir(tmp_path)
    supported = read_supported_range(tmp_path)
    assert (supported.label("-"), supported.source) == ("0.12.0-0.16.0", "requirements.txt")
    assert [item.added for item in supported.evidence] == [()]
    assert supported.warnings(tmp_path) == []


def test_deployment_alone_replaces_every_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"pyproject.toml": '[project]\nname = "x"\n', "docker/Dockerfile": "FROM lmsysorg/sglang:v0.5.15.post1\n"}
    write_tree(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    supported = read_supported_range(tmp_path, SGLANG)
    assert (supported.label("-"), supported.source, supported.assumed) == (
        "0.5.15.post1",
        "docker/Dockerfile 0.5.15.post1",
        False,
    )
    assert read_supported_range(tmp_path).assumed  # no vLLM deployed: every vLLM release, as before


def test_old_pins_and_a_deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path, {"requirements.txt": "vllm==0.5.5\n", "Dockerfile": "FROM vllm/vllm-openai:v0.10.1\n"})
    monkeypatch.chdir(tmp_path)
    supported = read_supported_range(tmp_path)
    assert supported.label("-") == "0.10.1"
    assert any(warning.endswith("the deployment files decide") for warning in supported.warnings(tmp_path))


def test_the_seed_tree_names_all_three_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SEED)
    declared = read_supported_range(SEED)
    assert declared.label("-") == "0.8.5-0.12.0, 0.23.0"
    tests = [(Version("0.13.0"), ">=", "rlpkg/server.py:10: x"), (Version("0.22.0"), "<", "rlpkg/server.py:34: y")]
    widened = widen_by_code(declared, tests)
    assert widened.summary() == (
        'vLLM 0.8.5\N{EN DASH}0.23.0 (setup.py, extra "vllm" 0.8.5-0.12.0; widened by '
        "docker/Dockerfile.stable.vllm 0.23.0 and the code's gates up to 0.22.0)"
    )
    result = check("--output-format", "json", "--no-cache", ".", cwd=SEED)
    [finding] = json.loads(result.stdout)
    assert finding["code"] == "CL004"
    assert finding["vllm_range"]["source"] == widened.source
    assert "the pins may be stale" in result.stderr
    full = check("--no-cache", ".", cwd=SEED)
    assert f"Checked for {widened.summary()}." in full.stdout


def test_gates_inside_the_range_and_settings_are_never_widened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path, {"requirements.txt": "vllm>=0.12,<0.17\n"})
    monkeypatch.chdir(tmp_path)
    supported = read_supported_range(tmp_path)
    assert widen_by_code(supported, [(Version("0.13.0"), ">=", "a.py:1: t")]) is supported
    setting = from_specifier(">=0.12,<0.17", "--vllm")
    assert widen_by_code(setting, [(Version("0.22.0"), "<", "a.py:1: t")]) is setting


def test_gates_below_the_lower_bound_widen_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path, {"requirements.txt": "vllm>=0.12,<0.17\n"})
    monkeypatch.chdir(tmp_path)
    widened = widen_by_code(read_supported_range(tmp_path), [(Version("0.11.1"), ">=", "a.py:3: v >= parse('0.11.1')")])
    assert widened.label("-") == "0.11.1-0.16.0"
    after = widen_by_code(read_supported_range(tmp_path), [(Version("0.11.0"), ">", "a.py:3: v > parse('0.11.0')")])
    assert after.label("-") == "0.11.1-0.16.0"  # the code asks for a release after 0.11.0
    assert widened.source == "requirements.txt 0.12.0-0.16.0; widened by the code's gates down to 0.11.1"
    [warning] = widened.warnings(tmp_path)
    assert warning.startswith("a.py:3 (`v >= parse('0.11.1')`): the code tests vLLM 0.11.1, outside the pins")


def test_the_summary_and_sarif_list_each_source() -> None:
    sarif = json.loads(check("--output-format", "sarif", "--no-cache", ".", cwd=SEED).stdout)
    [project] = sarif["runs"][0]["properties"]["supportedVllm"]
    assert [item["kind"] for item in project["evidence"]] == ["deployment", "code"]
    assert project["evidence"][0]["where"][0] == "docker/Dockerfile.stable.vllm:4: ARG VLLM_VERSION=0.23.0"


def test_a_run_answered_from_the_cache_shows_the_same_widened_range(tmp_path: Path) -> None:
    import shutil

    tree = tmp_path / "seed"
    shutil.copytree(SEED, tree, ignore=shutil.ignore_patterns("*.fixed", ".cachelint_cache"))
    first = check(".", cwd=tree)
    again = check(".", cwd=tree)
    assert "the code's gates up to 0.22.0" in first.stdout
    assert (again.code, again.stdout, again.stderr) == (first.code, first.stdout, first.stderr)
