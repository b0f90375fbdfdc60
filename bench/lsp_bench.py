"""Latency and memory of `cachelint server` on the RL corpus of run_bench.py, driven by a real LSP client.

The server is started from the corpus root (as an editor starts it in a workspace), with the corpus's
cache filled by one `cachelint check` first (warm, as after a first check). One file the rules analyse
(verl's vllm_async_server.py, which has a finding) is opened; then each change inserts one comment line
at its top, in the unsaved buffer only: new text every time, so nothing comes from a cached run, and
its finding moves down a line, so the server publishes new diagnostics for every change. The latency
is the time from sending didChange to receiving the publishDiagnostics for that version.

Two runs, with the default debounce, each in a new server: separate changes (each sent once the
previous one's diagnostics arrived and the debounce's quiet spell passed: checked at once), and bursts
of five changes 40 ms apart, as fast typing sends them (checked once, after the last one: the latency
from the last change holds the debounce). Memory: the server process's resident size (VmRSS in
/proc/PID/status, Linux) after the 10th change of the first run, every 50th, and the last.

Usage: python bench/lsp_bench.py [--changes 200] [--work DIR] [--wheels DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from cachelint.server.app import DEFAULT_DEBOUNCE_MS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_bench import RL_WHEELS, build_rl, load, log, machine

TIMEOUT = 60.0
MEMORY_EARLY = 10
MEMORY_EVERY = 50  # and the resident size after every this many changes
# The memory for the most recent unsaved buffers fills up over the first changes; beyond that nothing
# may grow with their number (what a reference cycle holds would, until the collector's full pass).
MEMORY_GROWTH = 1.2
BURST = 5  # keystrokes
BURST_GAP = 0.04  # seconds between keystrokes: fast typing


class Client(LanguageClient):
    """Records each publishDiagnostics as it arrives."""

    def __init__(self) -> None:
        super().__init__("cachelint-lsp-bench", "1")
        self.arrivals: list[tuple[float, types.PublishDiagnosticsParams]] = []
        self.arrived = asyncio.Event()

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def publish(params: types.PublishDiagnosticsParams) -> None:
            self.arrivals.append((time.perf_counter(), params))
            self.arrived.set()

    async def published(self, uri: str, version: int) -> tuple[float, list[types.Diagnostic]]:
        """When the diagnostics of `uri` at `version` arrived, and what they were."""

        async def wait() -> tuple[float, list[types.Diagnostic]]:
            while True:
                for arrival, params in self.arrivals:
                    if params.uri == uri and params.version == version:
                        return arrival, list(params.diagnostics)
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(wait(), TIMEOUT)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def session(
    root: Path, path: Path, changes: int, burst: int, pause: float
) -> tuple[list[float], list[tuple[int, float]]]:
    """Send `changes` changes in bursts of `burst`, `BURST_GAP` apart within a burst and `pause` between
    bursts (counted from the burst's last change). Return the latency after the last change of each
    burst, and the server's RSS (MB) after the 10th change, every 50th and the last."""
    client = Client()
    await client.start_io(sys.executable, "-m", "cachelint", "server", cwd=str(root))
    capabilities = types.ClientCapabilities()
    await client.initialize_async(types.InitializeParams(capabilities=capabilities, root_uri=root.as_uri()))
    client.initialized(types.InitializedParams())
    pid = client._server.pid  # type: ignore[union-attr]  # the server process pygls started
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 0, text)))
    _, diagnostics = await client.published(uri, 0)
    if not diagnostics:
        raise SystemExit(f"{path}: no finding, so a change would publish nothing new")
    first_line = diagnostics[0].range.start.line
    latencies: list[float] = []
    memory: list[tuple[int, float]] = []
    version = 0
    while version < changes:
        for _ in range(min(burst, changes - version)):
            if version % burst:
                await asyncio.sleep(BURST_GAP)
            version += 1
            at = types.Range(types.Position(0, 0), types.Position(0, 0))
            change = types.TextDocumentContentChangePartial(range=at, text=f"# edit {version} of the benchmark\n")
            sent = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(version, uri), [change])
            )
            if version in (MEMORY_EARLY, changes) or version % MEMORY_EVERY == 0:
                memory.append((version, rss_mb(pid)))
        arrived, diagnostics = await client.published(uri, version)
        latencies.append(arrived - sent)
        line = diagnostics[0].range.start.line if diagnostics else None
        if line != first_line + version:  # each change moved the finding down one line
            raise SystemExit(f"change {version}: the finding is on line {line}, expected {first_line + version}")
        await asyncio.sleep(max(0.0, sent + pause - time.perf_counter()))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return latencies, memory


def describe(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (
        f"median {statistics.median(latencies) * 1000:.0f} ms, 90th percentile {p90 * 1000:.0f} ms, "
        f"min {ordered[0] * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms ({len(latencies)} changes)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=200, help="changes per run (default 200)")
    parser.add_argument("--work", type=Path, help="folder for the corpus (default: a temporary one)")
    parser.add_argument("--wheels", type=Path, help="take the RL wheels from here instead of downloading")
    options = parser.parse_args()
    if options.changes < MEMORY_EARLY:
        parser.error(f"--changes must be at least {MEMORY_EARLY}")
    work = options.work or Path(tempfile.mkdtemp(prefix="cachelint-lsp-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    wheels = options.wheels
    if wheels is None and not (work / "rl").exists():
        wheels = work / "wheels"
        log(f"downloading {', '.join(RL_WHEELS)}")
        download = ["download", "-q", "--no-deps", "--only-binary=:all:", "--dest", str(wheels), *RL_WHEELS]
        subprocess.run([sys.executable, "-m", "pip", *download], check=True)
    corpus = build_rl(work, Path(sys.prefix), wheels)
    log(f"{corpus.files} files, {corpus.lines} lines in {corpus.root}")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    check = [sys.executable, "-m", "cachelint", "check", "."]
    subprocess.run(check, cwd=corpus.root, env=environment, stdout=subprocess.DEVNULL, check=False)
    start_load = load()
    # A person pauses between separate edits far longer than the debounce; this pause is just long
    # enough for each edit to come after a quiet spell.
    pause = 2 * DEFAULT_DEBOUNCE_MS / 1000
    log(f"run 1: {options.changes} separate changes")
    separate, memory = asyncio.run(session(corpus.root, corpus.changed, options.changes, 1, pause))
    log(f"run 2: {options.changes} changes in bursts of {BURST} keystrokes {BURST_GAP * 1000:.0f} ms apart")
    bursts, _ = asyncio.run(session(corpus.root, corpus.changed, options.changes, BURST, pause))
    print(f"Machine: {machine()}")
    print(f"Python {platform.python_version()}; load average (1, 5, 15 min) {start_load} at start, {load()} at end")
    print(f"Corpus: rl ({corpus.files} files, {corpus.lines // 1000}k lines); changed file: {corpus.changed.name}")
    print(f"Debounce: {DEFAULT_DEBOUNCE_MS} ms (the default)")
    print()
    print("didChange -> publishDiagnostics")
    print(f"  a separate change:            {describe(separate)}")
    print(f"  the last keystroke of a burst: {describe(bursts)}")
    sizes = ", ".join(f"{size:.1f} MB after {count}" for count, size in dict(memory).items())
    print(f"server RSS (separate changes): {sizes}")
    median = statistics.median(separate)
    print(f"Target: median under 0.3 s after a change: {median:.3f} s, {'met' if median < 0.3 else 'NOT MET'}")
    if len(memory) > 1:
        (early, first_size), (last, last_size) = memory[0], memory[-1]
        growth = last_size / first_size
        verdict = "met" if growth <= MEMORY_GROWTH else "NOT MET"
        target = f"RSS after change {last} at most {MEMORY_GROWTH}x that after change {early}"
        print(f"Target: {target}: {growth:.2f}x, {verdict}")


if __name__ == "__main__":
    main()
