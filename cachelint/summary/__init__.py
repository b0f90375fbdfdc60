"""The file summary: one walk per file (`walk.summarize`) reduced to a serializable model (`model`),
the one model every rule reads.

The walk is split by what each part extracts: `bindings` (imports, receivers and how they were bound),
`gates` (version tests around each point), `compat` (probes, compatibility code, engine arguments,
processor-cache workarounds) and `calls` (calls and cache-reset events), on the machinery of `walker`.
Importing this package loads only the model; the walk is imported when a file is summarized.
"""

from __future__ import annotations

from typing import Any

from cachelint.summary.model import (
    LIFECYCLE_METHODS,
    PAUSE_METHODS,
    RESET_METHODS,
    SGLANG_METHODS,
    SGLANG_UPDATES,
    Anchor,
    ArgumentUse,
    CallSite,
    ClassSummary,
    FileSummary,
    FunctionSummary,
    Gate,
    HasattrProbe,
    Launch,
    Request,
    ResetEvent,
    VersionComparison,
    Workaround,
)

__all__ = [
    "LIFECYCLE_METHODS",
    "PAUSE_METHODS",
    "RESET_METHODS",
    "SGLANG_METHODS",
    "SGLANG_UPDATES",
    "Anchor",
    "ArgumentUse",
    "CallSite",
    "ClassSummary",
    "FileSummary",
    "FunctionSummary",
    "Gate",
    "HasattrProbe",
    "Launch",
    "Request",
    "ResetEvent",
    "VersionComparison",
    "Workaround",
    "summarize",
]


def __getattr__(name: str) -> Any:
    if name == "summarize":
        from cachelint.summary.walk import summarize

        return summarize
    raise AttributeError(name)
