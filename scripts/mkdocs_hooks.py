"""MkDocs hook (mkdocs.yml `hooks:`): the rule pages, kept in the top-level rules/ folder that the wheel
ships, become the site's rules/CLxxx.md pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

RULES = Path(__file__).resolve().parent.parent / "rules"


def on_files(files: Files, config: Any) -> Files:
    for page in sorted(RULES.glob("CL*.md")):
        files.append(File.generated(config, f"rules/{page.name}", abs_src_path=str(page)))
    return files
