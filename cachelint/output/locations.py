"""Finding paths as machine formats name them: repo-relative POSIX paths under the report root."""

from __future__ import annotations

import os
from pathlib import Path, PurePath


def repo_relative(path: str, root: Path) -> str | None:
    """`path` (absolute, or relative to the current directory) relative to `root`; None if outside it."""
    absolute = Path(path).absolute()
    for base in (root.absolute(), Path(os.path.realpath(root))):
        for candidate in (absolute, Path(os.path.realpath(absolute))):  # realpath: no error on a link loop
            try:
                return candidate.relative_to(base).as_posix()
            except ValueError:
                continue
    return None


def report_path(path: str, root: Path) -> str:
    """The repo-relative path when there is one, else the path as the finding gave it (POSIX form)."""
    relative = repo_relative(path, root)
    return relative if relative is not None else PurePath(path).as_posix()
