"""What a reporter needs to know besides the findings themselves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cachelint import __version__


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
