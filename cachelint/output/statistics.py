"""`--statistics`: how many findings each rule has, and how many of them `--fix` would fix."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from cachelint.finding import Applicability, Finding
from cachelint.output.context import ReportContext


@dataclass(frozen=True)
class RuleCount:
    code: str
    name: str
    count: int
    fixable_count: int

    def to_json(self) -> dict[str, object]:
        """ruff's fields for `--statistics --output-format json`."""
        return {
            "code": self.code,
            "name": self.name,
            "count": self.count,
            "fixable": self.fixable_count > 0,
            "fixable_count": self.fixable_count,
        }


def is_fixable(finding: Finding, context: ReportContext) -> bool:
    """Whether `--fix` in this run would apply the finding's fix (safe, or unsafe under --unsafe-fixes)."""
    if finding.fix is None or not finding.fix.changes:
        return False
    allowed = {Applicability.SAFE, Applicability.UNSAFE} if context.unsafe_fixes else {Applicability.SAFE}
    return finding.fix.applicability in allowed


def rule_counts(findings: Sequence[Finding], context: ReportContext) -> list[RuleCount]:
    """One count per code, most frequent first (then by code)."""
    counts = Counter(finding.code for finding in findings)
    fixable = Counter(finding.code for finding in findings if is_fixable(finding, context))
    names = {finding.code: finding.name or finding.code for finding in findings}
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [RuleCount(code, names[code], count, fixable[code]) for code, count in ordered]
