"""Reading fixture cases: files or folders under fixtures/CLxxx with `# error: CLxxx` expectations."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachelint.config import Settings
from cachelint.engine import Analysis, analyze

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXPECTATION = re.compile(r"#\s*error:\s*(CL\d{3}(?:\s*,\s*CL\d{3})*)")
RANGE_HEADER = re.compile(r'^#\s*fixture:\s*vllm\s*=\s*"([^"]*)"', re.MULTILINE)
SGLANG_HEADER = re.compile(r'^#\s*fixture:\s*sglang\s*=\s*"([^"]*)"', re.MULTILINE)


@dataclass(frozen=True)
class Case:
    code: str
    path: Path  # a .py file or a project folder

    @property
    def id(self) -> str:
        return f"{self.code}/{self.path.name}"

    def python_files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        return sorted(p for p in self.path.rglob("*.py") if not p.name.endswith(".fixed.py"))

    def vllm_range(self) -> str | None:
        if self.path.is_dir():
            return None
        match = RANGE_HEADER.search(self.path.read_text(encoding="utf-8"))
        return match.group(1) if match else None

    def sglang_range(self) -> str | None:
        if self.path.is_dir():
            return None
        match = SGLANG_HEADER.search(self.path.read_text(encoding="utf-8"))
        return match.group(1) if match else None

    def settings(self, base: Settings | None = None) -> Settings:
        """`base` (default settings) with the case's `# fixture:` ranges."""
        settings = base or Settings()
        if self.vllm_range() is not None:
            settings = dataclasses.replace(settings, vllm=self.vllm_range())
        if self.sglang_range() is not None:
            settings = dataclasses.replace(settings, sglang=self.sglang_range())
        return settings

    def expected(self, code: str | None = None) -> set[tuple[str, int, str]]:
        """(file relative to the case, line, code) for every expectation comment."""
        found = set()
        for file in self.python_files():
            source = file.read_text(encoding="utf-8")
            for token in tokenize.generate_tokens(io.StringIO(source).readline):
                if token.type != tokenize.COMMENT:
                    continue
                match = EXPECTATION.search(token.string)
                if match:
                    for expected_code in re.split(r"\s*,\s*", match.group(1)):
                        if code is None or expected_code == code:
                            found.add((self.relative(file), token.start[0], expected_code))
        return found

    def relative(self, file: Path) -> str:
        if self.path.is_file():
            return file.name
        return file.relative_to(self.path).as_posix()


def rule_cases() -> list[Case]:
    cases = []
    for rule_dir in sorted(FIXTURES.glob("CL[0-9][0-9][0-9]")):
        for entry in sorted(rule_dir.iterdir()):
            is_case_file = entry.suffix == ".py" and not entry.name.endswith(".fixed.py")
            if is_case_file or (entry.is_dir() and not entry.name.startswith((".", "__"))):
                cases.append(Case(rule_dir.name, entry))
    return cases


def analyze_case(case: Case, settings: Settings | None = None, **options: Any) -> Analysis:
    """`analyze` over a case as a user would run it: from its folder, with its vLLM range."""
    base = case.settings(settings)
    old = Path.cwd()
    os.chdir(case.path if case.path.is_dir() else case.path.parent)
    try:
        target = Path() if case.path.is_dir() else Path(case.path.name)
        root = Path().resolve() if case.path.is_dir() else case.path
        return analyze([target], base, project_root=root, **options)
    finally:
        os.chdir(old)
