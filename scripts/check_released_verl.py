"""Run cachelint over the released verl 0.8.0 and 0.9.1 wheels and check what it must find there.

Not part of the offline test suite: it downloads the wheels with `pip download --no-deps`.

- verl 0.8.0: CL003 at `vLLMHttpServer.clear_kv_cache` (reached from `update_weights` in
  vllm_rollout.py) and CL002 at the gated `reset_encoder_cache` in `_sleep_hybrid`.
- verl 0.9.1: neither (fixed upstream by PRs #6522 and #6932).
- `check --fix --unsafe-fixes` on a copy of verl 0.8.0: the diff size, every changed file parses, and a
  second run reports no CL002/CL003.

Usage: python scripts/check_released_verl.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

VERSIONS = ("0.8.0", "0.9.1")


def download(version: str, workdir: Path) -> Path:
    wheels = workdir / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"verl=={version}", "-d", str(wheels)],
        check=True,
    )
    wheel = next(wheels.glob(f"verl-{version}-*.whl"))
    target = workdir / f"verl-{version}"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def check(root: Path, *args: str) -> tuple[list[dict[str, object]], float]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "cachelint", "check", "--no-cache", "--output-format", "json", *args, "verl"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        sys.exit(f"cachelint failed in {root}:\n{result.stderr}")
    findings: list[dict[str, object]] = json.loads(result.stdout)
    return findings, elapsed


def show(version: str, findings: list[dict[str, object]], elapsed: float) -> None:
    counts: dict[str, int] = {}
    for finding in findings:
        counts[str(finding["code"])] = counts.get(str(finding["code"]), 0) + 1
    summary = ", ".join(f"{code}: {count}" for code, count in sorted(counts.items())) or "none"
    print(f"\nverl {version}: {len(findings)} findings ({summary}) in {elapsed:.1f} s")
    for finding in findings:
        location = finding["location"]
        assert isinstance(location, dict)
        print(f"  {finding['filename']}:{location['row']} {finding['code']} {finding['message']}")


def has(findings: list[dict[str, object]], code: str, text: str) -> bool:
    return any(f["code"] == code and text in str(f["message"]) + str(f["filename"]) for f in findings)


def in_function(root: Path, finding: dict[str, object], name: str) -> bool:
    location = finding["location"]
    assert isinstance(location, dict)
    tree = ast.parse((root / str(finding["filename"])).read_text(encoding="utf-8"))
    row = int(location["row"])
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name == name
        and node.lineno <= row <= (node.end_lineno or node.lineno)
        for node in ast.walk(tree)
    )


def expectations(root: Path, version: str, findings: list[dict[str, object]]) -> list[tuple[str, bool]]:
    cl003 = any(
        f["code"] == "CL003"
        and in_function(root, f, "clear_kv_cache")
        and str(f["message"]).startswith("update_weights (vllm_rollout.py")
        for f in findings
    )
    cl002 = any(
        f["code"] == "CL002" and in_function(root, f, "_sleep_hybrid") and "reset_encoder_cache" in str(f["message"])
        for f in findings
    )
    if version == "0.8.0":
        return [
            ("CL003 at vLLMHttpServer.clear_kv_cache, reached from update_weights in vllm_rollout.py", cl003),
            ("CL002 at the gated reset_encoder_cache in _sleep_hybrid", cl002),
        ]
    return [
        (
            "no CL003 at clear_kv_cache",
            not any(f["code"] == "CL003" and in_function(root, f, "clear_kv_cache") for f in findings),
        ),
        ("no CL002 in _sleep_hybrid", not cl002),
    ]


def fix_run(root: Path, workdir: Path) -> list[tuple[str, bool]]:
    copy = workdir / "verl-0.8.0-fixed"
    shutil.copytree(root, copy)
    before = {path: path.read_text(encoding="utf-8") for path in copy.rglob("*.py")}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "cachelint", "check", "--no-cache", "--fix", "--unsafe-fixes", "--quiet", "verl"],
        cwd=copy,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    changed = {path: text for path, text in before.items() if path.read_text(encoding="utf-8") != text}
    added = removed = 0
    unparsable = []
    for path, text in changed.items():
        after = path.read_text(encoding="utf-8")
        for line in difflib.unified_diff(text.splitlines(), after.splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        try:
            ast.parse(after)
        except SyntaxError:
            unparsable.append(path)
        print(f"\n--- diff of {path.relative_to(copy)}")
        print("\n".join(difflib.unified_diff(text.splitlines(), after.splitlines(), lineterm="", n=1)))
    print(
        f"\n--fix --unsafe-fixes on verl 0.8.0: exit {result.returncode} in {elapsed:.1f} s; "
        f"{len(changed)} files changed, +{added} -{removed} lines"
    )
    if result.stderr.strip():
        print(result.stderr.strip())
    again, _ = check(copy, "--select", "CL002,CL003")
    return [
        ("every changed file parses", not unparsable and bool(changed)),
        ("a second run reports no CL002/CL003", not again),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    options = parser.parse_args()
    workdir = options.keep or Path(tempfile.mkdtemp(prefix="cachelint-verl-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, bool]] = []
    roots = {}
    for version in VERSIONS:
        roots[version] = download(version, workdir)
        findings, elapsed = check(roots[version])
        show(version, findings, elapsed)
        results += [(f"verl {version}: {text}", ok) for text, ok in expectations(roots[version], version, findings)]
    results += fix_run(roots["0.8.0"], workdir)
    print()
    for text, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
