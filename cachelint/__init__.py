"""cachelint: finds and fixes vLLM cache-reset bugs in RL post-training code.

`cachelint.check(paths)` and `cachelint.fix(paths)` are the Python API (cachelint/api.py); the result
types are frozen dataclasses. The names are imported when first used, so that `import cachelint` (and
the command line's start) stays cheap.
"""

__version__ = "0.2.0"
# The name on the package index (`cachelint` there is another project); the import name and the command
# stay `cachelint`.
DISTRIBUTION = "cachelint-rl"

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (a few milliseconds)
if TYPE_CHECKING:
    from typing import Any

    from cachelint.api import CheckResult, FixedSource, FixResult, check, fix
    from cachelint.changes import Change
    from cachelint.config import ConfigError, Settings
    from cachelint.discovery import MissingPathError
    from cachelint.finding import Applicability, Edit, Finding, Fix, Span

_EXPORTS = {
    "check": "cachelint.api",
    "fix": "cachelint.api",
    "CheckResult": "cachelint.api",
    "FixResult": "cachelint.api",
    "FixedSource": "cachelint.api",
    "Settings": "cachelint.config",
    "ConfigError": "cachelint.config",
    "MissingPathError": "cachelint.discovery",
    "Applicability": "cachelint.finding",
    "Change": "cachelint.changes",
    "Edit": "cachelint.finding",
    "Finding": "cachelint.finding",
    "Fix": "cachelint.finding",
    "Span": "cachelint.finding",
}

__all__ = [
    "Applicability",
    "Change",
    "CheckResult",
    "ConfigError",
    "Edit",
    "Finding",
    "Fix",
    "FixResult",
    "FixedSource",
    "MissingPathError",
    "Settings",
    "Span",
    "__version__",
    "check",
    "fix",
]


def __getattr__(name: str) -> "Any":
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
