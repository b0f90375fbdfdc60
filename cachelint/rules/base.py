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
from cachelint.overridden import never_runs
from cachelint.text_only import sends_only_text

if TYPE_CHECKING:
    from cachelint.config import Settings
    from cachelint.multimodal import Evidence
    from cachelint.project import ProjectIndex
    from cachelint.summary import FileSummary
    from cachelint.vllm_range import SupportedRange


def _no_summaries(holds: Callable[[str, bytes], bool]) -> list[FileSummary]:
    return []


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    summary: str
    fixable: str  # "always", "sometimes" or "never"
    former_names: tuple[str, ...] = ()  # names the rule had before, still accepted where names are
    fix_kinds: tuple[str, ...] = ()  # what its fixes can be: "safe" (applied by --fix), "unsafe" (--unsafe-fixes)

    @property
    def fix_column(self) -> str:
        """`cachelint rules`' Fix column: how often, and which kinds (`sometimes (safe or unsafe)`)."""
        return f"{self.fixable} ({' or '.join(self.fix_kinds)})" if self.fix_kinds else self.fixable


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
    # The summaries of the project's files whose shown path and bytes a test accepts, parsed when asked
    # for (cachelint.text_only looks for the requests of a folder and for classes of a hierarchy).
    summaries_where: Callable[[Callable[[str, bytes], bool]], list[FileSummary]] = _no_summaries
    # The supported SGLang range (every known release when not given) and the SGLang facts.
    sglang: SupportedRange | None = None
    sglang_facts: Facts = dataclasses.field(default_factory=load_sglang_facts)
    # The project's files with their bytes (shown path, bytes), for the SGLang rules' searches; and
    # those of them whose bytes name SGLang in any case.
    project_bytes: Callable[[], Iterable[tuple[str, bytes]]] = tuple
    sglang_bytes: Callable[[], Iterable[tuple[str, bytes]]] = tuple
    # Whether a file of the project imports SGLang.
    imports_sglang: Callable[[], bool] = lambda: False

    @property
    def sglang_range(self) -> SupportedRange:
        if self.sglang is None:
            from cachelint.vllm_range import SGLANG, every_release

            return every_release(dist=SGLANG)
        return self.sglang

    def multimodal_notes(self, file: FileSummary, finding: Finding | None = None) -> tuple[str, ...] | None:
        """None when the multimodal rules (CL003, CL004) must stay silent on `finding` in `file`:
        `multimodal = false`, or "auto" with no evidence that the project sends multimodal input to
        vLLM, or evidence that the code holding the finding's reset, pause or sleep sends its engine
        only text; else the note their findings in `file` carry: the nearest evidence (none when the
        setting forces them on)."""
        setting = self.settings.multimodal
        if setting != "auto":
            return () if setting else None
        evidence = self.project.memoized("multimodal", self.multimodal_evidence)
        if not evidence:
            return None
        function = file.function(finding.function) if finding is not None else None
        if function is not None and finding is not None:
            event = next((event for event in function.resets if event.span == finding.span), None)
            if event is not None and sends_only_text(
                self.project, file, function, event, evidence, self.summaries_where
            ):
                return None
        return (nearest(evidence, file.path).note,)


def where_run(findings: Iterable[Finding], file: FileSummary, context: Context) -> Iterator[Finding]:
    """The findings of a refit-path rule in `file` but those in a method no object runs (a method of
    a class never built that every subclass overrides: cachelint.overridden)."""
    for finding in findings:
        function = file.function(finding.function) if finding.function else None
        if function is None or not never_runs(context.project, file, function, context.summaries_where):
            yield finding


def multimodal_only(findings: Iterable[Finding], file: FileSummary, context: Context) -> Iterator[Finding]:
    """The findings of a multimodal rule (CL003, CL004) in `file` that some object runs, each with the
    note that says where the project sends multimodal input; none when the project is not checked for
    it, nor those whose code sends its engine only text."""
    for finding in where_run(findings, file, context):
        notes = context.multimodal_notes(file, finding)
        if notes is not None:
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
