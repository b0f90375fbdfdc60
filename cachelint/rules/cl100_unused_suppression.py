"""CL100 unused-suppression: a suppression comment that suppresses nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet

from cachelint.finding import Finding
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.summary import FileSummary
from cachelint.suppress import (
    UNUSED_SUPPRESSION_CODE,
    UNUSED_SUPPRESSION_NAME,
    Suppressions,
    SuppressionUse,
    unused_suppressions,
)


class UnusedSuppression(Rule):
    """Judged after every other rule has run, from the suppressions they used (see `unused`)."""

    info = RuleInfo(
        code=UNUSED_SUPPRESSION_CODE,
        name=UNUSED_SUPPRESSION_NAME,
        summary="A `noqa` or `cachelint: ignore` comment that suppresses no finding.",
        fixable="always",
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
