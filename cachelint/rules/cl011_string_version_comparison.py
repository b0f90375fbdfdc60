"""CL011 string-version-comparison: vLLM's or SGLang's version compared with a release as text."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from typing import Any

from packaging.version import Version

from cachelint.changes import ReplaceExpression
from cachelint.finding import Applicability, Finding, Fix
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.cl002_version_gated_reset import is_cache_reset
from cachelint.summary import FileSummary, VersionComparison
from cachelint.vllm_range import label_releases

_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_LABELS = {"vllm": "vLLM", "sglang": "SGLang"}


class StringVersionComparison(Rule):
    info = RuleInfo(
        code="CL011",
        name="string-version-comparison",
        summary="vLLM's or SGLang's version ordered against a release as text, character by character.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        reported_by_cl002 = [
            gate.test_span
            for function in file.functions
            for event in function.resets
            if is_cache_reset(event)
            for gate in event.gates
            if gate.raw_string
        ]
        for comparison in file.version_comparisons:
            compare = _ORDERINGS.get(comparison.operator)
            literal = _text(comparison.literal)
            if not comparison.raw_string or compare is None or literal is None:
                continue
            if any(span.contains(comparison.span) for span in reported_by_cl002):
                continue
            supported = context.supported if comparison.engine == "vllm" else context.sglang_range
            wrong = [
                release
                for release in supported.releases
                if compare(str(release), literal) != compare(release, Version(literal))
            ]
            if not wrong:
                continue
            label = _LABELS[comparison.engine]
            shown = label_releases(wrong, supported.dist, "-")
            message = (
                f"`{_pair_text(comparison)}` orders {label}'s version as text, character by character "
                f'("0.10.0" < "0.9.0"): it gives the wrong answer on {label} {shown} '
                f"({supported.share(wrong)})"
            )
            yield self.finding(file, comparison.span, message, _help(comparison), fix=_fix(file, comparison))


def _text(literal: str) -> str | None:
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def _pair_text(comparison: VersionComparison) -> str:
    """The comparison as written; of a chained one (`"0.8" <= v < "0.11"`), the pair judged."""
    if comparison.single:
        return comparison.text
    if comparison.installed_span <= comparison.literal_span:
        return f"{comparison.installed} {comparison.operator} {comparison.literal}"
    written = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[comparison.operator]
    return f"{comparison.literal} {written} {comparison.installed}"


def _help(comparison: VersionComparison) -> str:
    return (
        f"Compare parsed versions: `Version({comparison.installed}) {comparison.operator} "
        f"Version({comparison.literal})` (`from packaging.version import Version`)"
    )


def _parser(file: FileSummary) -> str | None:
    """How the file already names packaging's version parser: `Version`, `version.parse`, ..."""
    for local, imported in sorted(file.imports.items()):
        if imported in ("packaging.version.Version", "packaging.version.parse"):
            return local
        if imported == "packaging.version":
            return f"{local}.parse"
    return None


def _fix(file: FileSummary, comparison: VersionComparison) -> Fix:
    parser = _parser(file)
    if parser is None or not comparison.single:
        return Fix(_help(comparison), Applicability.DISPLAY)
    changes = (
        ReplaceExpression(file.path, comparison.installed_span, f"{parser}({comparison.installed})"),
        ReplaceExpression(file.path, comparison.literal_span, f"{parser}({comparison.literal})"),
    )
    # The code under the test now runs (or stops running) on the releases where the text order was wrong.
    return Fix(f"Compare `{parser}(...)` of both sides", Applicability.UNSAFE, changes=changes)
