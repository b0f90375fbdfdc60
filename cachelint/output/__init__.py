"""Reporters: findings to text in one of the output formats; they sort, they never analyse."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TextIO

from cachelint.finding import Finding
from cachelint.output.context import ReportContext
from cachelint.output.printable import printable

__all__ = ["FORMATS", "STATISTICS_FORMATS", "ReportContext", "render"]

Renderer = Callable[[Sequence[Finding], TextIO, ReportContext], None]

# Each format's module and function, imported when used (the human formats need rich in colour only).
_RENDERERS: dict[str, tuple[str, str]] = {
    "full": ("cachelint.output.full", "render_full"),
    "concise": ("cachelint.output.concise", "render_concise"),
    "json": ("cachelint.output.json_report", "render_json"),
    "json-lines": ("cachelint.output.json_lines", "render_json_lines"),
    "sarif": ("cachelint.output.sarif", "render_sarif"),
    "github": ("cachelint.output.github", "render_github"),
    "gitlab": ("cachelint.output.gitlab", "render_gitlab"),
    "junit": ("cachelint.output.junit", "render_junit"),
}

FORMATS = tuple(_RENDERERS)
HUMAN_FORMATS = ("full", "concise")
# The formats that can print --statistics: counts are neither annotations nor SARIF results (ruff's choice).
STATISTICS_FORMATS = ("full", "concise", "json")
ALL_PASSED = "All checks passed!"
# What rich prints for ALL_PASSED in bold green with the standard colours.
_ALL_PASSED_IN_COLOR = f"\x1b[1;32m{ALL_PASSED}\x1b[0m"


def render(findings: Sequence[Finding], fmt: str, out: TextIO, context: ReportContext) -> None:
    if fmt not in _RENDERERS:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt in HUMAN_FORMATS and not findings and not context.fixed_count:  # most runs: no need for rich
        if not context.quiet:
            out.write(f"{_ALL_PASSED_IN_COLOR if context.color else ALL_PASSED}\n")
            out.writelines(f"{printable(line)}\n" for line in context.range_lines())
        return
    _renderer(fmt)(sorted(findings, key=Finding.sort_key), out, context)


def preload(fmt: str, color: bool) -> None:
    """Import what printing `fmt` needs ahead of printing (rich for the human formats in colour)."""
    if fmt in _RENDERERS:
        _renderer(fmt)
    if color and fmt in HUMAN_FORMATS:
        import rich.console  # noqa: F401


def _renderer(fmt: str) -> Renderer:
    module, name = _RENDERERS[fmt]
    renderer: Renderer = getattr(importlib.import_module(module), name)
    return renderer
