"""What every rule is: metadata plus a check over one file's summary within the project."""

from __future__ import annotations

import abc
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from cachelint.facts import Facts
from cachelint.finding import ChainStep, Finding, Fix, Span

if TYPE_CHECKING:
    from cachelint.config import Settings
    from cachelint.project import ProjectIndex
    from cachelint.summary import FileSummary
    from cachelint.vllm_range import SupportedRange


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    summary: str
    fixable: str  # "always", "sometimes" or "never"


@dataclass(frozen=True)
class Context:
    """Everything a rule may consult besides the file it checks."""

    project: ProjectIndex
    supported: SupportedRange
    settings: Settings
    facts: Facts


class Rule(abc.ABC):
    info: ClassVar[RuleInfo]

    @abc.abstractmethod
    def check(self, file: FileSummary, context: Context) -> Iterable[Finding]:
        """The findings located in `file`."""

    def finding(
        self,
        file: FileSummary,
        span: Span,
        message: str,
        help: str,
        fix: Fix | None = None,
        function: str = "",
        chain: tuple[ChainStep, ...] = (),
    ) -> Finding:
        return Finding(
            path=file.path,
            span=span,
            code=self.info.code,
            name=self.info.name,
            message=message,
            help=help,
            fix=fix,
            function=function,
            chain=chain,
        )
