"""Methods no object runs: a method of a class that is never an object's own class, which every
subclass overrides; or of a class the project's code never names (`never_named`).

A class is never an object's own class when it cannot be built: it derives from `ABC` or `Protocol`,
declares an `@abstractmethod`, or the `__init__` it runs calls a method whose body, as the class
resolves it, only raises `NotImplementedError` (SkyRL's `BaseVLLMInferenceEngine.__init__` calls
`self._create_engine(...)`, which each engine class defines). Such a class's method runs only on
objects of a subclass that inherits it, or through `super()`. When every subclass declared in the
project (in files the run parsed or not) overrides it without calling `super()`'s, or is itself such a
class whose own subclasses all do, no object runs it: a reset there never happens, and a finding there
would report code that never runs. A class with no subclass in the project may be subclassed
elsewhere: its methods count as run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from cachelint.text_only import declaring, unique_classes

if TYPE_CHECKING:
    from cachelint.project import ProjectIndex
    from cachelint.summary import ClassSummary, FileSummary, FunctionSummary
    from cachelint.text_only import Finder

# Bases that declare a class abstract, by their last name.
_ABSTRACT_BASES = frozenset({"ABC", "Protocol"})
# How deep subclasses that are themselves abstract are followed.
_MAX_DEPTH = 4


def never_runs(project: ProjectIndex, file: FileSummary, function: FunctionSummary, find: Finder) -> bool:
    """Whether no object runs `function` (a method of `file`; see the module doc)."""
    if not function.cls or function.abstract:
        return False
    cls = file.class_named(function.cls)
    if cls is None or not cannot_be_built(project, file, cls):
        return False
    return _overridden_below(project, cls.name, function.name, find, _MAX_DEPTH)


def cannot_be_built(project: ProjectIndex, file: FileSummary, cls: ClassSummary) -> bool:
    """Whether `cls` (declared in `file`) is never an object's own class: it derives from `ABC` or
    `Protocol`, declares an `@abstractmethod`, or the `__init__` it runs calls a method that, as the
    class resolves it, only raises NotImplementedError."""
    if any(base.rsplit(".", 1)[-1] in _ABSTRACT_BASES for base in cls.bases):
        return True
    own = {function.name: function for function in file.functions if function.cls == cls.name}
    if any(method.abstract == "abstractmethod" for method in own.values()):
        return True
    lineage = [
        base for name in cls.bases for last in [name.rsplit(".", 1)[-1]] for base in (last, *project.base_classes(last))
    ]

    def resolved(name: str) -> FunctionSummary | None:
        if name in own:
            return own[name]
        found = next(
            (project.methods_by_class[key] for base in lineage if (key := (base, name)) in project.methods_by_class), []
        )
        return found[0].function if found else None

    init = resolved("__init__")
    return init is not None and any(
        call.chain == ["self"] and (called := resolved(call.name)) is not None and called.abstract == "raise"
        for call in init.calls
    )


def _overridden_below(project: ProjectIndex, cls: str, method: str, find: Finder, depth: int) -> bool:
    """Whether every subclass of `cls` overrides `method` without calling `super()`'s, or is itself a
    class never built whose subclasses all do; False when `cls` has none."""
    subclasses = _direct_subclasses(project, cls, find)
    if not subclasses or depth == 0:
        return False
    for summary, sub in subclasses:
        own = summary.function(f"{sub.name}.{method}")
        if own is not None:
            if method in own.super_calls:
                return False
        elif not (
            cannot_be_built(project, summary, sub) and _overridden_below(project, sub.name, method, find, depth - 1)
        ):
            return False
    return True


def _direct_subclasses(project: ProjectIndex, cls: str, find: Finder) -> list[tuple[FileSummary, ClassSummary]]:
    """The classes declared anywhere in the project that name `cls` among their bases."""
    found = project.memoized(f"subclasses:{cls}", lambda: find(declaring(set(), {cls})))
    declared = (*project.subclasses(cls), *((summary, sub) for summary in found for sub in summary.classes))
    return list(
        unique_classes(
            (summary, sub) for summary, sub in declared if any(base.rsplit(".", 1)[-1] == cls for base in sub.bases)
        )
    )


def never_named(project: ProjectIndex, cls: str, files: Callable[[], Iterable[tuple[str, bytes]]]) -> bool:
    """Whether the class `cls` was taken out of the project: its code never names it but in its own
    `class` statement and in imports, and a commented-out line does (`BACKEND_MAP = {"vllm": VLLMBackend,
    # "sglang": SGLangBackend}`). No object of it is built, and its methods never run. A class named
    nowhere else is kept: it may be a library's API, built by its users. `files`: the project's files with
    their bytes."""

    def find() -> bool:
        name = cls.encode()
        word = re.compile(rb"\b" + re.escape(name) + rb"\b")
        own = re.compile(rb"class[ \t]+" + re.escape(name) + rb"\b")
        commented_out = False
        for _, raw in files():
            if name not in raw:
                continue
            for line in raw.splitlines():
                code, _, comment = line.partition(b"#")
                if word.search(comment) and any(mark in comment for mark in (b":", b"=", b",", b"(")):
                    commented_out = True
                if not word.search(code):
                    continue
                stripped = code.lstrip()
                if own.match(stripped) or stripped.startswith((b"from ", b"import ")):
                    continue
                return False
        return commented_out

    return project.memoized(f"never-named:{cls}", find)
