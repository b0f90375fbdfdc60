"""Reading TOML files with the standard library (tomli before Python 3.11)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load_toml(path: Path) -> dict[str, Any]:
    """Parse `path`; raises ValueError with the file name and the parser's message."""
    try:
        with path.open("rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
            return data
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: invalid TOML: {error}") from error
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: invalid TOML: not UTF-8 (byte {error.start + 1}: {error.reason})") from error
    except RecursionError as error:
        raise ValueError(f"{path}: invalid TOML: nested too deeply") from error
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror or error}") from error
