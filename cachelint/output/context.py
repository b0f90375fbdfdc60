"""What a reporter needs to know besides the findings themselves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cachelint import __version__

if TYPE_CHECKING:
    from cachelint.vllm_range import SupportedRange


@dataclass(frozen=True)
class ReportContext:
    root: Path
    sources: Mapping[str, str] = field(default_factory=dict)
    color: bool = False
    show_fixes: bool = False
    files_checked: int = 0
    fixed_count: int = 0
    unsafe_fixable_hidden: int = 0
    statistics: bool = False
    quiet: bool = False
    tool_version: str = __version__
    unsafe_fixes: bool = False  # --unsafe-fixes given: unsafe fixes count as fixable ([*]) too
    projects: tuple[tuple[Path, SupportedRange], ...] = ()  # each project's root and supported vLLM range
    ranges: Mapping[str, SupportedRange] = field(default_factory=dict)  # the range each checked file had
    sglang_projects: tuple[tuple[Path, SupportedRange], ...] = ()  # the projects that use SGLang, with its range

    def range_lines(self) -> list[str]:
        """The summary's words on the supported ranges: one line for each different one (SGLang's only
        for projects that use SGLang)."""
        ranges = dict.fromkeys(supported.summary() for _, supported in (*self.projects, *self.sglang_projects))
        return [f"Checked for {summary}." for summary in ranges]
