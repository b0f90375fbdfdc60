"""The files a walk finds are named as the folder was given, as `str(folder / relative)` names them:
what the findings, the cache and the messages show for a file does not depend on how its folder was
spelled beyond what pathlib keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import write_tree

from cachelint.discovery import Excludes, discover, walk_python_files

TREE = {
    "pkg/__init__.py": "",
    "pkg/server.py": "x = 1\n",
    "pkg/sub/worker.pyi": "x: int\n",
    "pkg/build/generated.py": "x = 1\n",  # a default exclude
    "pkg/notes.txt": "",
}
FOUND = ["pkg/__init__.py", "pkg/server.py", "pkg/sub/worker.pyi"]


@pytest.mark.parametrize("spelling", [".", "./", "pkg/..", "{tmp}", "{tmp}/", "{tmp}//."])
def test_a_walk_names_each_file_as_pathlib_joins_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    write_tree(tmp_path, TREE)
    monkeypatch.chdir(tmp_path)
    folder = Path(spelling.format(tmp=tmp_path))
    found = list(walk_python_files(folder, Excludes.build(tmp_path, ())))
    assert found == [str(folder / relative) for relative in FOUND]
    assert all(Path(path).is_file() for path in found)


def test_a_file_named_and_found_by_a_walk_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path, TREE)
    monkeypatch.chdir(tmp_path)
    excludes = Excludes.build(tmp_path, ())
    found = discover([Path("pkg/server.py"), Path("pkg"), Path("./pkg/sub/worker.pyi")], excludes)
    assert found == ["pkg/server.py", "pkg/__init__.py", "pkg/sub/worker.pyi"]
