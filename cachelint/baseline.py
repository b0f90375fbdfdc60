"""`--add-noqa`: baseline a codebase by adding `# noqa: CODES` for every current finding.

Only files that were checked are edited, through the fixer's `write_files` (atomically, with encoding,
BOM and line endings, never outside the project nor a file with several hard links), and only when it
did not change on disk since it was analysed. Unused suppressions (CL100)
get no directive: the fix for those is to remove them (`--fix`)."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cachelint.edits import apply_edits
from cachelint.engine import Analysis
from cachelint.finding import Finding
from cachelint.fixes import FixedFile, write_files
from cachelint.source import SourceError, decode_source, read_file
from cachelint.suppress import UNUSED_SUPPRESSION_CODE, add_noqa_edits


@dataclass
class BaselineOutcome:
    added: int = 0  # directives added, or existing noqa code lists extended
    files: list[str] = field(default_factory=list)  # display paths of the files written
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def add_noqa(analysis: Analysis) -> BaselineOutcome:
    outcome = BaselineOutcome()
    by_path: defaultdict[str, list[Finding]] = defaultdict(list)
    for finding in analysis.findings:
        if not finding.is_rule:
            outcome.warnings.append(f"{finding.path}: not changed: {finding.code}: {finding.message}")
        elif finding.code != UNUSED_SUPPRESSION_CODE:
            by_path[finding.path].append(finding)
    for display, findings in sorted(by_path.items()):
        source = analysis.sources.get(display)
        if source is None:
            continue
        edits, skipped = add_noqa_edits(source.text, findings)
        if skipped:
            outcome.warnings.append(
                f"{display}: {skipped} finding{'s' if skipped != 1 else ''} left as they are: "
                "the line ends inside a string or continues with a backslash"
            )
        if not edits:
            continue
        path = Path(os.path.abspath(display))
        try:
            original = read_file(path)
            current = decode_source(original)
        except (OSError, SourceError) as error:
            outcome.errors.append(
                f"{display}: not written: cannot read it back ({getattr(error, 'strerror', None) or error})"
            )
            continue
        if current.text != source.text:
            outcome.errors.append(f"{display}: not written: it changed on disk since it was read")
            continue
        file = FixedFile(path, display, source, original, apply_edits(source.text, edits))
        errors = write_files([file], analysis.root)
        if errors:
            outcome.errors += errors
            continue
        outcome.added += len(edits)
        outcome.files.append(display)
    return outcome
