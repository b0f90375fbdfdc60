"""`json-lines`: one compact JSON object per finding per line, the same objects as `json`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TextIO

from cachelint.finding import Finding
from cachelint.output.context import ReportContext
from cachelint.output.json_report import finding_object


def render_json_lines(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    for finding in findings:
        line = json.dumps(finding_object(finding, context), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        out.write(line + "\n")
