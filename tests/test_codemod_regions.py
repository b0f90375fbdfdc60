"""Fixes made on the region of a file their changes lie in (cachelint.codemod.regions) give the edits
that the whole file's libcst tree gives, and fall back to the whole file where a region would not."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import libcst as cst
import pytest
from fixture_cases import FIXTURES, Case, rule_cases

from cachelint.changes import InsertAfter, InsertBefore, NewStatement
from cachelint.codemod import reader, regions
from cachelint.codemod.transform import WHOLE_FILE, RewriteError, Rewriter, SourceTree
from cachelint.engine import analyze
from cachelint.finding import Applicability, Edit, Fix, Span

CASES = rule_cases()


def _whole_file_edits(fix: Fix, read: Rewriter) -> dict[str, list[Edit]] | None:
    """The fix's edits made on each file's whole tree, as before regions."""
    edits = {}
    for path in fix.paths:
        text = read.text(path)
        assert text is not None
        try:
            edits[path] = SourceTree.parse(text).edits(path, [c for c in fix.changes if c.path == path])
        except (RewriteError, cst.ParserSyntaxError):
            return None
    return edits


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_region_edits_are_the_whole_files(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(case.path if case.path.is_dir() else case.path.parent)
    target = Path() if case.path.is_dir() else Path(case.path.name)
    analysis = analyze([target], case.settings(), project_root=case.path)
    fixes = [finding.fix for finding in analysis.findings if finding.fix is not None and finding.fix.changes]
    rewriter = Rewriter(reader(analysis.sources))
    for fix in fixes:
        assert rewriter.edits(fix) == _whole_file_edits(fix, rewriter)


def test_most_fixture_fixes_are_made_on_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above is mostly between a region and the whole file, not the whole file twice."""
    on_region = total = 0
    for case in CASES:
        monkeypatch.chdir(case.path if case.path.is_dir() else case.path.parent)
        target = Path() if case.path.is_dir() else Path(case.path.name)
        analysis = analyze([target], case.settings(), project_root=case.path)
        for finding in analysis.findings:
            if finding.fix is not None and finding.fix.changes:
                rewriter = Rewriter(reader(analysis.sources))
                rewriter.edits(finding.fix)
                total += 1
                on_region += all(region != WHOLE_FILE for _, region in rewriter.trees)
    assert total > 100
    assert on_region > total * 0.9


def _files() -> list[Path]:
    return sorted(FIXTURES.rglob("*.py"))


@pytest.mark.parametrize("path", _files(), ids=lambda path: str(path.relative_to(FIXTURES)))
def test_default_indent_and_newline_are_libcsts(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    module = cst.parse_module(text)
    assert regions.default_indent(text) == module.default_indent
    assert regions.default_newline(text) == module.default_newline


@pytest.mark.parametrize(
    "text",
    [
        "x = 1\n",  # no indented block: libcst's fallback
        "def f():\n\treturn 1\n",
        "x = (\n        1)\nif x:\n  y = 2\n",  # a bracket's continuation line is no block
        'S = """\n    text\n"""\nclass A:\n   a = 1\n',
        "if x: y = 1\nelse:\n      y = 2\n",  # a one-line body opens no block
        "def f():\r\n    return 1\r\n",
        "x = 1\rdef f():\r    pass\r",
        "x = 1\rif x:\r\ty = 2\r",
        "# only a comment",
    ],
)
def test_default_indent_and_newline_of_odd_files(text: str) -> None:
    module = cst.parse_module(text)
    assert regions.default_indent(text) == module.default_indent
    assert regions.default_newline(text) == module.default_newline


def test_default_indent_is_none_when_the_tokenizer_fails() -> None:
    text = "x = (\n\ndef f():\n    pass\n"
    with pytest.raises(tokenize.TokenError):
        list(tokenize.generate_tokens(io.StringIO(text).readline))
    assert regions.default_indent(text) is None


SOURCE = """\
import vllm


@decorated
class Trainer:
    size = 2

    def update(self, llm):
        llm.collective_rpc("load")

    async def step(self, llm):
        await llm.sleep()


def main(llm):
    llm.wake_up()


llm.sleep(level=1)
"""


def _span(text: str, line: int) -> Span:
    body = text.splitlines()[line - 1]
    start = len(body) - len(body.lstrip())
    return Span(line, start + 1, line, len(body) + 1)


def test_region_is_the_methods_of_one_class_else_the_definitions() -> None:
    defined = regions.definitions(SOURCE)
    assert defined is not None
    assert [(item.first, item.last, item.members) for item in defined] == [(4, 12, ((8, 9), (11, 12))), (15, 16, ())]
    assert regions.region([_span(SOURCE, 9)], defined) == regions.Region(8, 9, in_class=True)
    assert regions.region([_span(SOURCE, 9), _span(SOURCE, 12)], defined) == regions.Region(8, 12, in_class=True)
    assert regions.region([_span(SOURCE, 6)], defined) == regions.Region(4, 12)  # a class attribute
    assert regions.region([_span(SOURCE, 9), _span(SOURCE, 16)], defined) == regions.Region(4, 16)
    assert regions.region([_span(SOURCE, 19)], defined) is None  # a module-level statement
    assert regions.region([], defined) is None


def _insert_after(text: str, line: int, guard: str = "") -> Fix:
    statement = NewStatement("llm.reset_mm_cache()", guard)
    return Fix("reset", Applicability.SAFE, changes=(InsertAfter("f.py", _span(text, line), (statement,)),))


@pytest.mark.parametrize("line", [9, 12, 16, 19])
def test_a_fix_anywhere_gives_the_whole_files_edits(line: int) -> None:
    rewriter = Rewriter({"f.py": SOURCE}.get)
    fix = _insert_after(SOURCE, line, guard="hasattr(llm, 'reset_mm_cache')")
    edits = rewriter.edits(fix)
    assert edits is not None
    assert edits == _whole_file_edits(fix, rewriter)
    in_region = [region for (_, region), tree in rewriter.trees.items() if tree is not None and region != WHOLE_FILE]
    assert bool(in_region) == (line != 19)


def test_a_region_indented_unlike_the_file_falls_back_to_the_whole_file() -> None:
    text = "if True:\n\tx = 1\n\n\nclass A:\n    def f(self, llm):\n        llm.sleep()\n"
    rewriter = Rewriter({"f.py": text}.get)
    fix = _insert_after(text, 7, guard="hasattr(llm, 'reset_mm_cache')")
    edits = rewriter.edits(fix)
    assert edits == _whole_file_edits(fix, rewriter)
    assert edits is not None
    assert "\t" in edits["f.py"][0].content  # the file's indentation, under the guard
    assert [tree for (_, region), tree in rewriter.trees.items() if region != WHOLE_FILE] == [None]


def test_a_statement_goes_before_an_if_and_above_the_comment_lines_of_it() -> None:
    text = (
        "def launch(fast):\n    args = {}\n\n    # a launch per release\n    if fast:\n        run(args)\n"
        "    elif args:\n        run(args, slow=True)\n    else:\n        run({})\n"
    )
    chain = ast.parse(text).body[0].body[1]  # type: ignore[attr-defined]
    where = Span(chain.lineno, chain.col_offset + 1, chain.end_lineno, chain.end_col_offset + 1)
    change = InsertBefore("f.py", where, (NewStatement('os.environ["X"] = "0"'),))
    rewritten = SourceTree.parse(text).rewrite([change]).code
    assert rewritten == text.replace("\n\n    # a launch", '\n    os.environ["X"] = "0"\n\n    # a launch')


BEFORE = """\
import os


def first():
    return 1


@decorated
def second():
    x = (1,
2); y = 3
    return x


z = first(); w = (
    2)
# a comment at the end
"""


def _changed(before: str, after: str) -> str:
    return regions.changed_statements(before, after, ast.parse(after))


def test_changed_statements_are_the_top_level_statements_holding_the_change() -> None:
    inside = BEFORE.replace("    return x\n", "    x.reset()\n    return x\n")
    assert _changed(BEFORE, inside) == "".join(inside.splitlines(True)[7:15])  # second() and the lines after
    module_level = BEFORE.replace("    2)\n", "    3)\n")
    assert _changed(BEFORE, module_level) == "".join(module_level.splitlines(True)[14:])
    first_line = "import sys\n" + BEFORE
    assert _changed(BEFORE, first_line) == "import sys\n"
    removed = BEFORE.replace("    return 1\n", "    pass\n")
    assert _changed(BEFORE, removed) == "".join(removed.splitlines(True)[3:7])
    assert _changed(BEFORE, BEFORE) == "".join(BEFORE.splitlines(True)[14:])  # nothing changed: the end


@pytest.mark.parametrize("line", range(1, BEFORE.count("\n") + 1))
def test_changed_statements_hold_every_changed_line_and_parse(line: int) -> None:
    lines = BEFORE.splitlines(True)
    after = "".join([*lines[: line - 1], lines[line - 1].rstrip("\n") + "  # changed\n", *lines[line:]])
    part = _changed(BEFORE, after)
    assert lines[line - 1].rstrip("\n") + "  # changed\n" in part
    cst.parse_module(part)
    compile(part, "<part>", "exec")


def test_a_region_libcst_does_not_give_back_whole_falls_back_to_the_whole_file() -> None:
    """libcst drops the last line break of code whose line breaks are all a lone CR."""
    text = SOURCE.replace("\n", "\r")
    rewriter = Rewriter({"f.py": text}.get)
    fix = _insert_after(text, 9)
    edits = rewriter.edits(fix)
    assert edits is not None
    assert edits == _whole_file_edits(fix, rewriter)
    assert [tree for (_, region), tree in rewriter.trees.items() if region != WHOLE_FILE] == [None]
