"""Properties over generated code: modules from hypothesmith's grammar, and the rule fixtures mutated
(receivers renamed, statements inserted, blocks reindented, comments put between tokens).

- analysis never raises: no internal-error finding, and invalid-syntax exactly when CPython rejects;
- every fix output parses (CPython and libcst), no fix is refused for not parsing, and fixing again
  changes nothing;
- `# noqa: CODE` on a finding's line suppresses exactly the findings of CODE on that line.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import io
import keyword
import random
import tempfile
import tokenize
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import libcst
import pytest
from fixture_cases import FIXTURES, RANGE_HEADER
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cachelint.config import Settings
from cachelint.engine import analyze
from cachelint.finding import INTERNAL_ERROR, INVALID_SYNTAX, Finding
from cachelint.fixes import fix_to_fixed_point, write_changes

hypothesmith: ModuleType | None
try:
    hypothesmith = importlib.import_module("hypothesmith")
except ImportError:  # pragma: no cover - the mutation properties below still run
    hypothesmith = None

PROPERTY_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
FIXTURE_FILES = sorted(path for path in FIXTURES.glob("CL[0-9][0-9][0-9]/*.py"))
NEW_NAMES = ("eng", "server_handle", "_rt2", "llm_client", "inference_engine", "worker")
INSERTED = (
    "pass",
    "_probe = 1",
    'logger.debug("refit %s", 1)',
    "del _unused",
    'note = "reset_prefix_cache"',
    "self.step += 1",
)


def _rejects(data: bytes) -> bool:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False


# -- mutations: each returns new source, or the same source when the result would not parse --------


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(text).readline))


def _replace_at(text: str, edits: list[tuple[int, int, int, str]]) -> str:
    """Replace (line, col, length) with content; lines 1-based, columns 0-based, as tokenize counts."""
    lines = text.splitlines(keepends=True)
    for line, col, length, content in sorted(edits, reverse=True):
        row = lines[line - 1]
        lines[line - 1] = row[:col] + content + row[col + length :]
    return "".join(lines)


def rename_receiver(text: str, rnd: random.Random) -> str:
    names = sorted(
        {
            token.string
            for token in _tokens(text)
            if token.type == tokenize.NAME
            and not keyword.iskeyword(token.string)
            and not keyword.issoftkeyword(token.string)
        }
    )
    if not names:
        return text
    old, new = rnd.choice(names), rnd.choice(NEW_NAMES)
    edits = [
        (token.start[0], token.start[1], len(old), new)
        for token in _tokens(text)
        if token.type == tokenize.NAME and token.string == old
    ]
    return _replace_at(text, edits)


def insert_statement(text: str, rnd: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    starts = [
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.stmt) and not lines[node.lineno - 1][: node.col_offset].strip()
    ]
    if not starts:
        return text
    node = rnd.choice(starts)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.decorator_list:
        line = node.decorator_list[0].lineno
    else:
        line = node.lineno
    indent = lines[node.lineno - 1][: node.col_offset]
    lines.insert(line - 1, f"{indent}{rnd.choice(INSERTED)}\n")
    return "".join(lines)


def reindent(text: str, rnd: random.Random) -> str:
    unit = rnd.choice(("  ", "   ", "        ", "\t"))
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        width = len(line) - len(stripped)
        out.append(unit * (width // 4) + " " * (width % 4) + stripped)
    return "".join(out)


def comment_between_tokens(text: str, rnd: random.Random) -> str:
    tokens = _tokens(text)
    places: list[tuple[int, int, str]] = []
    depth = 0
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        if token.type in (tokenize.NEWLINE, tokenize.NL) and token.start[1] > 0:
            places.append((*token.start, "  # note: sync_weights, collective_rpc"))
        elif token.type == tokenize.OP and token.string in "([{," and depth > 0:
            places.append((*token.end, "  # between tokens\n"))
    if not places:
        return text
    line, col, content = rnd.choice(places)
    return _replace_at(text, [(line, col, 0, content)])


MUTATIONS: dict[str, Callable[[str, random.Random], str]] = {
    "rename": rename_receiver,
    "insert": insert_statement,
    "reindent": reindent,
    "comment": comment_between_tokens,
}


def mutate(text: str, steps: list[tuple[str, random.Random]]) -> str:
    for name, rnd in steps:
        try:
            mutated = MUTATIONS[name](text, rnd)
            ast.parse(mutated)
            libcst.parse_module(mutated)  # tabs and spaces mixed as CPython allows but libcst does not
        except (SyntaxError, libcst.ParserSyntaxError, tokenize.TokenError, IndexError, ValueError):
            event(f"mutation left out (would not parse): {name}")
            continue  # this mutation would break the file: the property is about valid code
        text = mutated
    return text


@st.composite
def mutated_fixtures(draw: st.DrawFn) -> tuple[Path, str]:
    path = draw(st.sampled_from(FIXTURE_FILES))
    steps = draw(st.lists(st.tuples(st.sampled_from(sorted(MUTATIONS)), st.randoms(use_true_random=False)), max_size=4))
    return path, mutate(path.read_text(encoding="utf-8"), steps)


# -- helpers ------------------------------------------------------------------------------------------


def _settings(text: str) -> Settings:
    match = RANGE_HEADER.search(text)
    return dataclasses.replace(Settings(), vllm=match.group(1)) if match else Settings()


def _analyze(path: Path, text: str) -> list[Finding]:
    return analyze([path], _settings(text), project_root=path).findings


def _keys(findings: list[Finding]) -> set[tuple[int, int, str]]:
    return {(f.span.line, f.span.col, f.code) for f in findings}


def _parses_everywhere(text: str) -> bool:
    try:
        ast.parse(text)
        libcst.parse_module(text)
    except (SyntaxError, libcst.ParserSyntaxError):
        return False
    return True


def _single_line_statements(text: str) -> set[int]:
    """Lines holding a whole logical line (no bracket, string or backslash continues it)."""
    lines: set[int] = set()
    first: int | None = None
    skipped = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in _tokens(text):
        if token.type == tokenize.NEWLINE:
            if first == token.start[0]:
                lines.add(first)
            first = None
        elif first is None and token.type not in skipped:
            first = token.start[0]
    return lines


# -- properties ---------------------------------------------------------------------------------------


@pytest.mark.skipif(hypothesmith is None, reason="hypothesmith is not installed")
@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles the modules it generates (`1()`)
@settings(PROPERTY_SETTINGS, max_examples=30)  # generating modules is the slow part
@given(source=hypothesmith.from_grammar() if hypothesmith is not None else st.just(""))
def test_analysis_never_raises_on_generated_modules(source: str) -> None:
    # The comment holds a trigger word, so every module is summarized, not only syntax-checked.
    data = ("import vllm  # reset_prefix_cache, collective_rpc\n" + source).encode("utf-8", "surrogatepass")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.py"
        path.write_bytes(data)
        findings = analyze([path], Settings(), project_root=path).findings
    assert not [f for f in findings if f.code == INTERNAL_ERROR], findings
    assert any(f.code == INVALID_SYNTAX for f in findings) == _rejects(data)


@PROPERTY_SETTINGS
@given(case=mutated_fixtures())
def test_fixes_parse_and_fixing_again_changes_nothing(case: tuple[Path, str]) -> None:
    fixture, text = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / fixture.name
        path.write_text(text, encoding="utf-8")
        settings_ = _settings(text)
        before = _analyze(path, text)
        assert not [f for f in before if f.code in (INTERNAL_ERROR, INVALID_SYNTAX)], before

        outcome = fix_to_fixed_point([path], settings_, unsafe=True, project_root=path)
        event(f"fixes applied: {min(outcome.fixed, 3)}{'+' if outcome.fixed > 3 else ''}")
        assert outcome.errors == []
        for file in outcome.changed:
            assert _parses_everywhere(file.text), file.text
        assert write_changes(outcome) == []
        written = path.read_text(encoding="utf-8")
        assert _parses_everywhere(written)
        assert _keys(_analyze(path, written)) == _keys(outcome.analysis.findings)

        again = fix_to_fixed_point([path], settings_, unsafe=True, project_root=path)
        assert again.changed == []
        assert again.fixed == 0
        assert path.read_text(encoding="utf-8") == written


@PROPERTY_SETTINGS
@given(case=mutated_fixtures(), pick=st.randoms(use_true_random=False))
def test_noqa_suppresses_exactly_its_line(case: tuple[Path, str], pick: random.Random) -> None:
    fixture, text = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / fixture.name
        path.write_text(text, encoding="utf-8")
        before = _analyze(path, text)
        whole_lines = _single_line_statements(text)
        candidates = [
            f
            for f in before
            if f.is_rule and f.code != "CL100" and f.span.line in whole_lines and f.span.line == f.span.end_line
        ]
        event(f"findings that can take a noqa: {'some' if candidates else 'none'}")
        if not candidates:
            return
        target = pick.choice(candidates)
        line = target.span.line
        lines = text.splitlines(keepends=True)
        body = lines[line - 1].rstrip("\r\n")
        lines[line - 1] = f"{body}  # noqa: {target.code}" + lines[line - 1][len(body) :]
        suppressed = "".join(lines)
        path.write_text(suppressed, encoding="utf-8")
        after = _analyze(path, suppressed)
    expected = {f for f in _keys(before) if not (f[2] == target.code and f[0] == line)}
    covering = {
        (f.span.line, f.span.col, f.code)
        for f in before
        if f.code == target.code and f.span.line <= line <= f.span.end_line
    }
    assert _keys(after) == expected - covering
    assert not [f for f in after if f.code == "CL100" and f.span.line == line]
