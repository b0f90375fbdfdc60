"""CL100 unused-suppression: a suppression comment that suppresses nothing. Its findings are made here,
not in `cachelint.suppress`, which every run imports: only a run with directives imports this module."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from cachelint.changes import ReplaceComment
from cachelint.finding import Applicability, Finding, Fix, Span
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.summary import FileSummary
from cachelint.suppress import (
    FILE_IGNORE,
    NOQA,
    UNUSED_SUPPRESSION_CODE,
    UNUSED_SUPPRESSION_NAME,
    Directive,
    Suppressions,
    SuppressionUse,
)


class UnusedSuppression(Rule):
    """Judged after every other rule has run, from the suppressions they used (see `unused`)."""

    info = RuleInfo(
        code=UNUSED_SUPPRESSION_CODE,
        name=UNUSED_SUPPRESSION_NAME,
        summary="A `noqa` or `cachelint: ignore` comment that suppresses no finding.",
        fixable="always",
        fix_kinds=("safe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        return iter(())

    def unused(
        self,
        suppressions: Mapping[str, Suppressions],
        used: AbstractSet[SuppressionUse],
        is_enabled: Callable[[str], bool],
    ) -> list[Finding]:
        return unused_suppressions(suppressions, used, is_enabled)


def unused_suppressions(
    suppressions_by_path: Mapping[str, Suppressions],
    used: AbstractSet[SuppressionUse],
    is_enabled: Callable[[str], bool] = lambda code: True,
) -> list[Finding]:
    """CL100 findings for directives (or codes in them) that suppressed nothing.

    Only cachelint's own directives and `noqa`s naming CL codes are candidates, and only codes that
    `is_enabled` (a code of a rule that did not run may still be needed). Pass only files that were
    analysed without invalid-syntax or internal-error findings."""
    used_codes: defaultdict[tuple[str, Directive], set[str]] = defaultdict(set)
    for use in used:
        used_codes[use.path, use.directive].add(use.code)
    findings = []
    for path in sorted(suppressions_by_path):
        directives = suppressions_by_path[path].directives
        exempt = exempt_from_cl100(directives)
        for index, directive in enumerate(directives):
            if index in exempt:
                continue
            finding = unused_finding(path, directive, used_codes[path, directive], is_enabled)
            if finding is not None:
                findings.append(finding)
    return findings


def exempt_from_cl100(directives: Sequence[Directive]) -> set[int]:
    """The indices of the directives that another directive suppresses a CL100 finding about: one
    covering CL100 on the same line, or a file-ignore covering it (counted, not searched for each)."""
    covering = {index for index, directive in enumerate(directives) if directive.covers(UNUSED_SUPPRESSION_CODE)}
    whole_file = sum(directives[index].kind == FILE_IGNORE for index in covering)
    on_line = Counter(directives[index].line for index in covering)
    exempt = set()
    for index, directive in enumerate(directives):
        own = index in covering
        if whole_file - (own and directive.kind == FILE_IGNORE) > 0 or on_line[directive.line] - own > 0:
            exempt.add(index)
    return exempt


def unused_finding(
    path: str, directive: Directive, used_codes: set[str], is_enabled: Callable[[str], bool]
) -> Finding | None:
    label = f"`{directive.kind}`"
    if directive.codes:
        unused = [
            code
            for code in directive.codes
            if code not in used_codes
            and code != UNUSED_SUPPRESSION_CODE
            and is_enabled(code)
            and (directive.kind != NOQA or code.startswith("CL"))
        ]
        message = f"Unused {label} directive (unused: {', '.join(unused)})"
    else:
        unused = [] if directive.kind == NOQA or used_codes else ["*"]
        message = f"Unused {label} directive"
    if not unused:
        return None
    kept = [code for code in directive.codes if code not in unused]
    if kept and directive.codes_cols is not None:
        first, last = (col - directive.comment_col for col in directive.codes_cols)
        text = f"{directive.comment[:first]}{', '.join(kept)}{directive.comment[last:]}"
        change = ReplaceComment(
            path, Span(directive.line, directive.comment_col, directive.line, directive.comment_col), text
        )
        fix = Fix(f"Remove unused {', '.join(unused)}", Applicability.SAFE, changes=(change,))
    else:
        fix = Fix(f"Remove unused {label} directive", Applicability.SAFE, changes=(removal_change(path, directive),))
    return Finding(
        path=path,
        span=Span(directive.line, directive.col, directive.line, directive.end_col),
        code=UNUSED_SUPPRESSION_CODE,
        name=UNUSED_SUPPRESSION_NAME,
        message=message,
        help="Remove the suppression: nothing it covers is reported.",
        fix=fix,
    )


def removal_change(path: str, directive: Directive) -> ReplaceComment:
    """Remove the directive from its comment: the whole comment when nothing else is in it (and its line
    when the comment has the line to itself)."""
    start = directive.col - directive.comment_col
    end = directive.end_col - directive.comment_col
    before, after = directive.comment[:start], directive.comment[end:].strip()
    if before.strip():
        remainder = before.rstrip() + (f" {after}" if after else "")
    elif after:
        remainder = after if after.startswith("#") else f"# {after}"
    else:
        remainder = ""
    at = Span(directive.line, directive.comment_col, directive.line, directive.comment_col)
    return ReplaceComment(path, at, remainder)
