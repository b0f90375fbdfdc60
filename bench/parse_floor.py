"""The parse floor of a cold run, with CPython's parser and with a native one from the package index.

Takes the files cachelint summarizes in TREE (those holding a trigger word and those its on-demand
search reaches: found by analysing TREE here, in one process), then times, on the same bytes:
  ast         `ast.parse`, and a visit of every node (`ast.iter_child_nodes` over a stack, reading its class);
  tree-sitter `Parser.parse` of tree-sitter-python, and a visit of every node (a `TreeCursor`, reading its type).
tree-sitter runs in a virtual environment of its own (`--venv`), never in cachelint's.

Usage: python bench/parse_floor.py TREE [--venv DIR] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_bench import venv_bin

TREE_SITTER = ("tree-sitter==0.26.1", "tree-sitter-python==0.25.0")

TIMER = r"""
import ast, gc, json, statistics, sys, time
import tree_sitter_python
from tree_sitter import Language, Parser

gc.disable()
paths, repeat = json.load(open(sys.argv[1])), int(sys.argv[2])
sources = [open(path, "rb").read() for path in paths]
parser = Parser(Language(tree_sitter_python.language()))


def visit_ast(tree):
    stack, kinds = [tree], set()
    while stack:
        node = stack.pop()
        kinds.add(node.__class__)
        stack.extend(ast.iter_child_nodes(node))
    return len(kinds)


def visit_tree_sitter(tree):
    cursor, kinds = tree.walk(), set()
    while True:
        kinds.add(cursor.node.type)
        if cursor.goto_first_child() or cursor.goto_next_sibling():
            continue
        while cursor.goto_parent():
            if cursor.goto_next_sibling():
                break
        else:
            return len(kinds)


def timed(step, items):
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        results = [step(item) for item in items]
        runs.append(time.perf_counter() - started)
    return statistics.median(runs), min(runs), results


print(f"{len(sources)} files, {sum(map(len, sources)) / 1e6:.1f} MB; medians of {repeat} runs, in one process")
for name, parse, visit in (("ast", ast.parse, visit_ast), ("tree-sitter", parser.parse, visit_tree_sitter)):
    parse_median, parse_min, trees = timed(parse, sources)
    visit_median, visit_min, _ = timed(visit, trees)
    print(
        f"  {name:<12} parse {parse_median:.3f} s (min {parse_min:.3f})   visit every node, reading its type "
        f"{visit_median:.3f} s (min {visit_min:.3f})"
    )
"""


def summarized_files(tree: Path) -> list[str]:
    """The files a cold run of cachelint over `tree` summarizes, up front or on demand."""
    from cachelint import engine
    from cachelint.config import Settings

    found: list[str] = []
    take_outcome = engine.Analyzer._take_outcome

    def noting(analyzer: engine.Analyzer, loaded: engine.LoadedFile, outcome: engine.Outcome) -> None:
        take_outcome(analyzer, loaded, outcome)
        if loaded.summary is not None:
            found.append(str(loaded.path))

    with mock.patch.object(engine.Analyzer, "_take_outcome", noting):
        engine.analyze([tree], Settings(), workers=1)  # one process: each project of a monorepo in turn
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "cachelint-tree-sitter")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    python = venv_bin(options.venv, "python")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(options.venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *TREE_SITTER], check=True)
    files = summarized_files(options.tree.resolve())
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as listing:
        json.dump(files, listing)
    try:
        subprocess.run([str(python), "-c", TIMER, listing.name, str(options.repeat)], check=True)
    finally:
        Path(listing.name).unlink()


if __name__ == "__main__":
    main()
