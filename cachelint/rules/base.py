"""What every rule is: metadata plus a check over one file's summary within the project."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from cachelint.facts import Facts, load_sglang_facts
from cachelint.finding import ChainStep, Finding, Fix, Span
from cachelint.multimodal import nearest

if TYPE_CHECKING:
    from cachelint.config import Settings
    from cachelint.multimodal import Evidence
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
    # Where the files of the project show that it sends multimodal input to vLLM: looked for only when
    # a multimodal rule has something to report.
    multimodal_evidence: Callable[[], tuple[Evidence, ...]] = tuple
    # The supported SGLang range (every known release when not given) and the SGLang facts.
    sglang: SupportedRange | None = None
    sglang_facts: Facts = dataclasses.field(default_factory=load_sglang_facts)
    # The project's files with their bytes (shown path, bytes), for the SGLang rules' searches.
    project_bytes: Callable[[], Iterable[tuple[str, bytes]]] = tuple

    @property
    def sglang_range(self) -> SupportedRange:
        if self.sglang is None:
            from cachelint.vllm_range import SGLANG, every_release

            return every_release(dist=SGLANG)
        return self.sglang

    def multimodal_notes(self, path: str) -> tuple[str, ...] | None:
        """None when the multimodal rules (CL003, CL004) must stay silent: `multimodal = false`, or
        "auto" with no evidence that the project sends multimodal input to vLLM; else the note their
        findings in the file at `path` carry: the nearest evidence (none when the setting forces them on)."""
        setting = self.settings.multimodal
        if setting != "auto":
            return () if setting else None
        evidence = self.project.memoized("multimodal", self.multimodal_evidence)
        return (nearest(evidence, path).note,) if evidence else None


def multimodal_only(findings: Iterable[Finding], path: str, context: Context) -> Iterator[Finding]:
    """The findings of a multimodal rule (CL003, CL004) in the file at `path`, each with the note that
    says where the project sends multimodal input; none when the project is not checked for it."""
    for finding in findings:
        notes = context.multimodal_notes(path)
        if notes is None:
            return
        yield dataclasses.replace(finding, notes=(*finding.notes, *notes))


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
        notes: tuple[str, ...] = (),
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
            notes=notes,
            chain=chain,
        )
