"""Reporters: findings to text in one of the output formats; they sort, they never analyse."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TextIO

from cachelint.finding import Finding
from cachelint.output.concise import render_concise
from cachelint.output.context import ReportContext
from cachelint.output.full import render_full
from cachelint.output.github import render_github
from cachelint.output.json_lines import render_json_lines
from cachelint.output.json_report import render_json
from cachelint.output.sarif import render_sarif

__all__ = ["FORMATS", "ReportContext", "render"]

Renderer = Callable[[Sequence[Finding], TextIO, ReportContext], None]

_RENDERERS: dict[str, Renderer] = {
    "full": render_full,
    "concise": render_concise,
    "json": render_json,
    "json-lines": render_json_lines,
    "sarif": render_sarif,
    "github": render_github,
}

FORMATS = tuple(_RENDERERS)


def render(findings: Sequence[Finding], fmt: str, out: TextIO, context: ReportContext) -> None:
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")
    renderer(sorted(findings, key=Finding.sort_key), out, context)
