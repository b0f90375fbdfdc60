"""Rule pages: the Markdown files (rules/CL001.md ...) documenting each rule, split into sections."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_PAGE_CODE = re.compile(r"CL\d{3}")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PYTHON_BLOCK = re.compile(r"^```(?:python|py)[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True)
class RulePage:
    code: str
    name: str
    title: str
    text: str
    sections: dict[str, str]

    @property
    def summary(self) -> str:
        """The first sentence of "What it does", on one line."""
        what = " ".join(self.sections.get("What it does", "").split())
        return _SENTENCE_END.split(what, maxsplit=1)[0]

    @property
    def example_code(self) -> str | None:
        return first_python_block(self.sections.get("Example", ""))

    @property
    def use_instead_code(self) -> str | None:
        return first_python_block(self.sections.get("Use instead", ""))


def rule_pages_dir() -> Path:
    """`cachelint/rule_pages` in an installed wheel, else the checkout's top-level `rules/`."""
    package_dir = Path(__file__).parent
    installed = package_dir / "rule_pages"
    if installed.is_dir():
        return installed
    return package_dir.parent / "rules"


def page_uri(code: str) -> str:
    """The `file:` URI of the rule's page as installed (the project publishes no web pages of its own)."""
    return (rule_pages_dir() / f"{code}.md").resolve().as_uri()


def load_page(code: str) -> RulePage | None:
    code = code.upper()
    if not _PAGE_CODE.fullmatch(code):
        return None
    path = rule_pages_dir() / f"{code}.md"
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return parse_page(code, text)


def rule_codes() -> list[str]:
    """The code of every rule, from the names of the pages (every rule has one): no rule is imported."""
    directory = rule_pages_dir()
    if not directory.is_dir():
        return []
    return sorted(path.stem for path in directory.glob("CL*.md") if _PAGE_CODE.fullmatch(path.stem))


def all_pages() -> list[RulePage]:
    return [page for page in map(load_page, rule_codes()) if page is not None]


def parse_page(code: str, text: str) -> RulePage:
    """Split a page at its `## ` headings (outside code fences); the `# ` line is the title."""
    title = ""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
            continue
        elif not in_fence and line.startswith("# ") and not title:
            title = line[2:].strip()
            continue
        if current is not None:
            current.append(line)
    words = title.split()
    name = words[1] if len(words) > 1 and words[0] == code else ""
    return RulePage(
        code=code,
        name=name,
        title=title,
        text=text,
        sections={heading: "\n".join(lines).strip("\n") for heading, lines in sections.items()},
    )


def first_python_block(markdown: str) -> str | None:
    match = _PYTHON_BLOCK.search(markdown)
    return match.group(1) if match else None
