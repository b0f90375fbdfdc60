"""Suppression comments: which findings they hide, which are unused (CL100), and `--add-noqa` edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachelint.codemod import with_edits
from cachelint.config import Settings
from cachelint.edits import apply_edits
from cachelint.finding import INVALID_SYNTAX, Applicability, Edit, Finding, Span
from cachelint.fixes import fix_to_fixed_point
from cachelint.rules.cl100_unused_suppression import unused_suppressions
from cachelint.suppress import (
    FILE_IGNORE,
    IGNORE,
    NOQA,
    UNUSED_SUPPRESSION_CODE,
    add_noqa_edits,
    apply,
    may_be_reported_unused,
    parse_suppressions,
)

PATH = "pkg/refit.py"


def finding(code: str, line: int, end_line: int | None = None, col: int = 1) -> Finding:
    return Finding(PATH, Span(line, col, end_line or line, col + 1), code, code.lower(), f"{code} here")


def kept_codes(text: str, findings: list[Finding]) -> list[tuple[str, int]]:
    kept, _ = apply(findings, {PATH: parse_suppressions(text)})
    return [(item.code, item.span.line) for item in kept]


def unused(text: str, findings: list[Finding]) -> list[Finding]:
    suppressions = {PATH: parse_suppressions(text)}
    _, used = apply(findings, suppressions)
    return unused_suppressions(suppressions, used)


def fixed(text: str, reported: list[Finding]) -> str:
    """`text` with the fixes of `reported` made as `--fix` makes them (their edits read off the rewritten
    module), newlines as the text has them."""
    made = with_edits(reported, lambda path: text)
    newline = "\r\n" if "\r\n" in text else "\r" if "\r" in text else "\n"
    edits = [
        Edit(e.path, e.span, e.content.replace("\n", newline)) for item in made if item.fix for e in item.fix.edits
    ]
    return apply_edits(text, edits)


# which findings a directive hides


def test_noqa_with_codes_hides_only_those_codes() -> None:
    text = "engine.reset()  # noqa: CL001, CL003\nengine.reset()\n"
    findings = [finding("CL001", 1), finding("CL002", 1), finding("CL003", 1), finding("CL001", 2)]
    assert kept_codes(text, findings) == [("CL002", 1), ("CL001", 2)]


def test_noqa_spellings() -> None:
    for comment in (
        "# noqa:CL001",
        "#noqa: CL001,CL002",
        "# NOQA: cl001 CL002",
        "# type: ignore # noqa: CL001",
    ):
        assert kept_codes(f"x = 1  {comment}\n", [finding("CL001", 1)]) == [], comment


def test_blanket_noqa_hides_everything_on_its_line() -> None:
    text = "engine.reset()  # noqa\nengine.reset()  # noqa - legacy\n"
    assert kept_codes(text, [finding("CL001", 1), finding("CL004", 2)]) == []


def test_cachelint_ignore() -> None:
    text = (
        "a()  # cachelint: ignore[CL001]\n"
        "b()  # cachelint: ignore[CL001,CL002]\n"
        "c()  # cachelint: ignore\n"
        "d()  # cachelint: ignore[CL002] -- worker reset is intended here\n"
    )
    findings = [finding("CL001", 1), finding("CL002", 1), finding("CL002", 2), finding("CL004", 3)]
    findings += [finding("CL001", 4), finding("CL002", 4)]
    assert kept_codes(text, findings) == [("CL002", 1), ("CL001", 4)]
    kinds = [directive.kind for directive in parse_suppressions(text).directives]
    assert kinds == [IGNORE, IGNORE, IGNORE, IGNORE]


def test_a_directive_anywhere_in_a_multi_line_statement() -> None:
    text = (
        "engine.collective_rpc(  # noqa: CL001\n"
        '    "reset_encoder_cache",\n'
        ")\n"
        "engine.collective_rpc(\n"
        '    "reset_mm_cache",\n'
        ")  # cachelint: ignore[CL002]\n"
        "after()\n"
    )
    findings = [
        finding("CL001", 1, end_line=3),
        finding("CL001", 2),
        finding("CL002", 5),
        finding("CL002", 7),
    ]
    assert kept_codes(text, findings) == [("CL002", 7)]


def test_a_finding_covering_the_directive_line() -> None:
    text = "def refit(self):\n    self.load()  # noqa: CL003\n    self.reset()\n"
    assert kept_codes(text, [finding("CL003", 1, end_line=3), finding("CL003", 3)]) == [("CL003", 3)]


def test_file_ignore() -> None:
    text = "# cachelint: file-ignore[CL003]\nimport vllm\n\nx()  # cachelint: file-ignore[CL001]\n"
    findings = [finding("CL003", 2), finding("CL003", 40), finding("CL001", 2), finding("CL001", 4)]
    assert kept_codes(text, findings) == [("CL001", 2), ("CL001", 4)]
    directives = parse_suppressions(text).directives
    assert [directive.kind for directive in directives] == [FILE_IGNORE]  # a trailing file-ignore is none


def test_blanket_file_ignore_is_on_its_own_line_anywhere() -> None:
    text = "import vllm\n\n    # cachelint: file-ignore\n"
    assert kept_codes(text, [finding("CL001", 1), finding("CL004", 9)]) == []


def test_noqa_inside_a_string_is_not_a_suppression() -> None:
    text = 'log("# noqa: CL001")\ndoc = """\n# noqa\n# cachelint: file-ignore\n"""\n'
    findings = [finding("CL001", 1), finding("CL001", 3), finding("CL002", 4)]
    assert parse_suppressions(text).directives == ()
    assert kept_codes(text, findings) == [("CL001", 1), ("CL001", 3), ("CL002", 4)]


def test_invalid_syntax_cannot_be_suppressed() -> None:
    text = "# cachelint: file-ignore\ndef f(:  # noqa\n"
    broken = Finding(PATH, Span(2, 7, 2, 8), INVALID_SYNTAX, INVALID_SYNTAX, "invalid syntax")
    kept, used = apply([broken], {PATH: parse_suppressions(text)})
    assert kept == [broken]
    assert used == set()


def test_text_that_does_not_tokenize_or_decode_has_no_suppressions() -> None:
    assert parse_suppressions('x = 1  # noqa\ns = """never closed\n').directives == ()
    assert parse_suppressions(b"# -*- coding: utf-8 -*-\nx = '\xff'  # noqa\n").directives == ()
    assert len(parse_suppressions(b"x = 1  # noqa\n").directives) == 1


def test_findings_in_other_files_are_kept() -> None:
    other = Finding("other.py", Span(1, 1, 1, 2), "CL001", "cl001", "m")
    kept, _ = apply([other], {PATH: parse_suppressions("x  # noqa\n")})
    assert kept == [other]


# unused suppressions (CL100)


def test_unused_noqa_is_removed_with_its_whitespace() -> None:
    text = "engine.reset()  # noqa: CL003\nnext_line()\n"
    (report,) = unused(text, [])
    assert (report.code, report.name) == ("CL100", "unused-suppression")
    assert report.message == "Unused `noqa` directive (unused: CL003)"
    assert report.span == Span(1, 17, 1, 30)
    assert report.fix is not None and report.fix.applicability is Applicability.SAFE
    assert fixed(text, [report]) == "engine.reset()\nnext_line()\n"


def test_only_the_unused_codes_are_removed() -> None:
    text = "engine.reset()  # noqa: CL001, CL003\n"
    (report,) = unused(text, [finding("CL001", 1)])
    assert report.message == "Unused `noqa` directive (unused: CL003)"
    assert fixed(text, [report]) == "engine.reset()  # noqa: CL001\n"


def test_foreign_and_blanket_noqa_are_never_reported() -> None:
    text = "a()  # noqa\nb()  # noqa: E501\nc()  # noqa: E501, CL003\n"
    (report,) = unused(text, [])
    assert report.message == "Unused `noqa` directive (unused: CL003)"
    assert fixed(text, [report]) == "a()  # noqa\nb()  # noqa: E501\nc()  # noqa: E501\n"


def test_unused_cachelint_ignore() -> None:
    text = "a()  # cachelint: ignore\nb()  # cachelint: ignore[CL001,CL002]\n"
    blanket, partial = unused(text, [finding("CL002", 2)])
    assert blanket.message == "Unused `cachelint: ignore` directive"
    assert partial.message == "Unused `cachelint: ignore` directive (unused: CL001)"
    assert fixed(text, [blanket, partial]) == "a()\nb()  # cachelint: ignore[CL002]\n"


def test_unused_file_ignore_takes_its_line_with_it() -> None:
    text = "import vllm\n# cachelint: file-ignore[CL003]\nx = 1\n"
    (report,) = unused(text, [finding("CL001", 3)])
    assert report.message == "Unused `cachelint: file-ignore` directive (unused: CL003)"
    assert fixed(text, [report]) == "import vllm\nx = 1\n"


def test_other_comment_text_is_kept() -> None:
    text = "a()  # noqa: CL003  # keep this\nb()  # type: ignore  # noqa: CL003\nc()  # noqa: CL003 why\n"
    reports = unused(text, [])
    assert fixed(text, reports) == "a()  # keep this\nb()  # type: ignore\nc()  # why\n"


def test_used_directives_are_not_reported() -> None:
    text = "a()  # noqa: CL001\n# cachelint: file-ignore\nb()  # cachelint: ignore[CL002]\n"
    findings = [finding("CL001", 1), finding("CL002", 3), finding("CL004", 5)]
    assert unused(text, findings) == []


def test_codes_of_rules_that_did_not_run_are_not_reported() -> None:
    text = "a()  # noqa: CL001, CL003\n"
    suppressions = {PATH: parse_suppressions(text)}
    (report,) = unused_suppressions(suppressions, set(), is_enabled=lambda code: code == "CL003")
    assert report.message == "Unused `noqa` directive (unused: CL003)"
    assert fixed(text, [report]) == "a()  # noqa: CL001\n"


@pytest.mark.parametrize(
    ("text", "reported"),
    [
        ("a()  # noqa: E501\nb()  # noqa\n", False),
        ("a()  # NOQA:cl003\n", True),
        ("a()  # noqa: E501 CL001\n", True),
        ("# cachelint: file-ignore[CL003]\n", True),
        ('s = "# noqa: CL003"\n', False),  # a string: looked at, then found to hold no directive
        ("a()  # cachel\u0131nt: ignore\n", True),  # IGNORECASE lets i match the dotless i
    ],
)
def test_a_file_without_findings_is_read_for_directives_only_when_one_can_be_unused(text: str, reported: bool) -> None:
    """The engine tokenizes a file without findings only when `may_be_reported_unused` says so; it must
    say so for every file CL100 would report on."""
    assert bool(unused(text, [])) is reported
    if reported:
        assert may_be_reported_unused(text)
    assert may_be_reported_unused(text) is (reported or "CL003" in text)


def test_cl100_itself_can_be_suppressed() -> None:
    assert unused("# cachelint: file-ignore[CL100]\na()  # noqa: CL003\n", []) == []
    assert unused("a()  # noqa: CL003  # cachelint: ignore[CL100]\n", []) == []
    assert UNUSED_SUPPRESSION_CODE == "CL100"


def test_directive_kinds_parse_their_positions() -> None:
    (directive,) = parse_suppressions("x = f(1)  # noqa: CL001,CL002\n").directives
    assert (directive.kind, directive.codes) == (NOQA, ("CL001", "CL002"))
    assert (directive.line, directive.col, directive.end_col, directive.code_end_col) == (1, 11, 30, 9)


# --add-noqa


def test_add_noqa_adds_and_merges() -> None:
    text = "a()\nb()  # noqa: CL002\nc()   \nd()  # explained elsewhere\ne()  # noqa\n"
    findings = [finding("CL003", 1), finding("CL001", 1), finding("CL001", 2), finding("CL001", 3)]
    findings += [finding("CL001", 4), finding("CL001", 5)]
    edits, skipped = add_noqa_edits(text, findings)
    assert skipped == 0
    assert apply_edits(text, edits) == (
        "a()  # noqa: CL001, CL003\n"
        "b()  # noqa: CL001, CL002\n"
        "c()  # noqa: CL001\n"
        "d()  # explained elsewhere  # noqa: CL001\n"
        "e()  # noqa\n"
    )
    assert all(edit.path == PATH for edit in edits)


def test_add_noqa_skips_lines_ending_inside_a_string_or_continued() -> None:
    text = 'x = f("""\nbody\n""")\ny = 1 + \\\n    2\nz = 3\n'
    findings = [finding("CL001", 1), finding("CL001", 2), finding("CL002", 4), finding("CL003", 6)]
    edits, skipped = add_noqa_edits(text, findings)
    assert skipped == 3
    assert apply_edits(text, edits) == 'x = f("""\nbody\n""")\ny = 1 + \\\n    2\nz = 3  # noqa: CL003\n'


def test_added_noqa_suppresses_the_findings() -> None:
    text = "engine.collective_rpc(\n    'reset_encoder_cache',\n)\nllm.reset()\n"
    findings = [finding("CL001", 1, end_line=3), finding("CL004", 4)]
    edits, _ = add_noqa_edits(text, findings)
    assert kept_codes(apply_edits(text, edits), findings) == []


def test_line_endings_other_than_newline() -> None:
    crlf = "a()  # noqa: CL003\r\nb()  # noqa: CL001\r\n"
    assert kept_codes(crlf, [finding("CL001", 2)]) == []
    assert fixed(crlf, unused(crlf, [finding("CL001", 2)])) == "a()\r\nb()  # noqa: CL001\r\n"
    old_mac = "a()\rb()  # noqa: CL001\r"
    assert kept_codes(old_mac, [finding("CL001", 1), finding("CL001", 2)]) == [("CL001", 1)]


@pytest.mark.parametrize("layout", ["trailing", "own line", "last line without a line break"])
def test_one_fix_pass_removes_every_one_of_many_identical_unused_noqa(tmp_path: Path, layout: str) -> None:
    # Identical lines let a diff of the whole file pair them in many ways, whose edits overlapped and
    # left one removal per round: 11 or more took a second `--fix`.
    line = {"trailing": "y = 2  # noqa: CL001\n", "own line": "    # noqa: CL001\n"}.get(
        layout, "y = 2  # noqa: CL001\n"
    )
    body = "def f():\n" + line * 25 + "    return 1\n" if layout == "own line" else "x = 1\n" + line * 25
    if layout == "last line without a line break":
        body = body.rstrip("\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n', encoding="utf-8")
    (tmp_path / "m.py").write_text(body, encoding="utf-8")
    outcome = fix_to_fixed_point([tmp_path], Settings(), unsafe=False, workers=1)
    assert outcome.fixed == 25
    assert outcome.analysis.findings == []
    expected = {
        "trailing": "x = 1\n" + "y = 2\n" * 25,
        "own line": "def f():\n    return 1\n",
        "last line without a line break": "x = 1\n" + "y = 2\n" * 24 + "y = 2",
    }[layout]
    (fixed,) = outcome.changed
    assert fixed.text == expected
