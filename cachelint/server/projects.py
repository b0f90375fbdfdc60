"""Which project a file belongs to, with which settings: resolved as the command line resolves them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachelint.config import CONFIG_FILE_NAMES, ConfigError, Settings, checked_option, read_config_table

# Files whose change may change the settings, the project root or the supported vLLM range.
PROJECT_FILE_PATTERNS = (
    *CONFIG_FILE_NAMES,
    "setup.py",
    "setup.cfg",
    "requirements*.txt",
    "requirements/*.txt",
)


@dataclass(frozen=True)
class Scope:
    """A project root and the settings its files are checked with: files of one scope are analysed
    together, so that a change to one re-checks the others."""

    root: Path
    settings: Settings


# The settings an editor may send (in initializationOptions, or in workspace/didChangeConfiguration,
# at the top level or under "cachelint"), by their names there, and the config file keys they stand for.
# Like the command line's flags, they override the configuration files.
CLIENT_SETTINGS = {
    "select": "select",
    "extendSelect": "extend-select",
    "ignore": "ignore",
    "vllm": "vllm",
    "sglang": "sglang",
}


def client_overrides(options: Any) -> dict[str, Any]:
    """The changes to the settings that an editor's settings ask for, each checked as a config file's
    value is (ConfigError with the same words: `the editor's `select` holds an unknown rule ...`)."""
    if isinstance(options, Mapping) and isinstance(options.get("cachelint"), Mapping):
        options = options["cachelint"]
    if not isinstance(options, Mapping):
        return {}
    overrides: dict[str, Any] = {}
    for name, key in CLIENT_SETTINGS.items():
        if options.get(name) is None:
            continue
        where = f"the editor's `{name}`"
        overrides[key.replace("-", "_")] = checked_option(key, options[name], where)
        if key in ("vllm", "sglang"):
            overrides[f"{key}_origin"] = where
    return overrides


def resolve_scope(path: Path, overrides: Mapping[str, Any] | None = None) -> Scope:
    """The scope of the file at `path`, as `cachelint check PATH` resolves it, with the editor's
    settings (`client_overrides`) in place of flags; raises ConfigError."""
    from cachelint.cli import resolve_settings
    from cachelint.vllm_range import find_project_root

    return Scope(find_project_root(path), resolve_settings([path], None, False, dict(overrides or {})))


def broken_config_file(path: Path) -> Path | None:
    """The configuration file that made resolving the scope of `path` fail: the nearest one that
    cannot be read, or the one in use (then a value in it is wrong)."""
    here = _existing(path).resolve()
    for folder in (here, *here.parents):
        for name in CONFIG_FILE_NAMES:
            candidate = folder / name
            if not candidate.is_file():
                continue
            try:
                if read_config_table(candidate) is not None:
                    return candidate
            except ConfigError:
                return candidate
    return None


def is_project_file(path: Path) -> bool:
    """Whether a change to `path` may change a scope or the supported vLLM range."""
    return any(path.match(pattern) for pattern in PROJECT_FILE_PATTERNS)


def _existing(path: Path) -> Path:
    """The nearest folder at or above `path` that exists (an unsaved file may not)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path if path.is_dir() else path.parent
