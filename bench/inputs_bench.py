"""How cachelint's cost grows with odd inputs: many weight-update names in the configuration, many
findings in one file, many shown fixes in one file. Each is timed at several sizes; a cost in
proportion to the input keeps the time per item about the same from one size to the next (a cost
growing with the square of the input doubles it at each doubling).

Usage: python bench/inputs_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from cachelint.engine import Triggers
from cachelint.finding import Applicability, Edit, Finding, Fix, Span
from cachelint.output import ReportContext, render

SOURCES = [path.read_bytes() for path in sorted((Path(__file__).parent.parent / "fixtures").rglob("*.py"))]


def refit_names(count: int) -> Callable[[], None]:
    names = [f"push_weights_{index}" for index in range(count)]

    def run() -> None:
        triggers = Triggers(names)
        for raw in SOURCES:
            triggers.held_by(raw)

    return run


def full_report(count: int) -> Callable[[], None]:
    source = (
        "class Worker:\n    def update_weights(self):\n" + "        self.model_runner.reset_encoder_cache()\n" * count
    )
    findings = [
        Finding("worker.py", Span(3 + index, 9, 3 + index, 48), "CL001", "worker-only-cache-reset", "a message")
        for index in range(count)
    ]
    context = ReportContext(root=Path(), sources={"worker.py": source})
    return lambda: render(findings, "full", io.StringIO(), context)


def shown_fixes(count: int) -> Callable[[], None]:
    source = "def sleep(engine):\n" + "    if VLLM >= (0, 17):\n        engine.reset_encoder_cache()\n\n" * count
    findings = []
    for index in range(count):
        line = 2 + 3 * index
        edits = (
            Edit("server.py", Span(line, 1, line + 1, 1), ""),
            Edit("server.py", Span(line + 1, 1, line + 1, 5), ""),
        )
        fix = Fix("drop the gate", Applicability.SAFE, edits)
        findings.append(
            Finding("server.py", Span(line + 1, 9, line + 1, 37), "CL002", "version-gated-reset", "m", fix=fix)
        )
    context = ReportContext(root=Path(), sources={"server.py": source}, show_fixes=True)
    return lambda: render(findings, "full", io.StringIO(), context)


CASES: list[tuple[str, Callable[[int], Callable[[], None]], tuple[int, ...]]] = [
    ("weight-update names, trigger scan of the fixtures", refit_names, (12_500, 25_000, 50_000)),
    ("findings in one file, full output", full_report, (5_000, 10_000, 20_000)),
    ("fixes in one file, full output --show-fixes", shown_fixes, (1_250, 2_500, 5_000)),
]


def median_seconds(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    for title, make, sizes in CASES:
        print(title)
        previous = None
        for size in sizes:
            seconds = median_seconds(make(size), repeat)
            per_item = seconds / size * 1e6
            growth = f", {per_item / previous:.2f}x the time per item of the size before" if previous else ""
            print(f"  {size:>7,} items: {seconds:7.3f} s, {per_item:7.1f} us per item{growth}")
            previous = per_item


if __name__ == "__main__":
    main()
