"""Every path that writes files writes them whole or not at all: `check --fix` (the files of a fix of
several files together), the libcst codemod command, `-o`, `--add-noqa`, the cache; and the language
server's fixes are refused for the files the command refuses.

The fault injection fails the N-th low-level write operation (creating a file, writing, flushing,
linking, renaming, setting an extended attribute) with ENOSPC, as a full disk does, for every N up to
one past the number of operations a run makes, and checks that each file is as before or as fixed."""

from __future__ import annotations

import errno
import gc
import os
import runpy
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cachelint.cli import main
from cachelint.writing import Replacement, WriteError, replace_together

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CL001_CASE = FIXTURES / "CL001" / "worker_extension_driver_side"
CL001_FILES = ("rl_sync/worker_ext.py", "rl_sync/async_driver.py", "rl_sync/sync_driver.py")
CL005 = FIXTURES / "CL005" / "unawaited_reset_in_async_server.py"
ONE_LINE_TRY = FIXTURES / "CL003" / "prefix_reset_in_one_line_try.py"
ENOSPC = os.strerror(errno.ENOSPC)


class Faults:
    """Counts the low-level write operations and fails the `fail_at`-th (1-based) with ENOSPC;
    `hook(name, count)` runs before each."""

    def __init__(self, fail_at: int | None = None, hook: Callable[[str, int], None] | None = None) -> None:
        self.fail_at = fail_at
        self.hook = hook
        self.count = 0
        self.failed: str | None = None

    def step(self, name: str) -> None:
        self.count += 1
        if self.hook is not None:
            self.hook(name, self.count)
        if self.count == self.fail_at:
            self.failed = name
            raise OSError(errno.ENOSPC, ENOSPC)

    @contextmanager
    def active(self) -> Iterator[Faults]:
        real = {name: getattr(os, name) for name in ("write", "fsync", "replace", "rename", "link", "open", "setxattr")}

        def wrap(name: str) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                if name != "open" or (len(args) > 1 and args[1] & os.O_CREAT):
                    self.step(name)
                return real[name](*args, **kwargs)

            return call

        for name in real:
            setattr(os, name, wrap(name))
        try:
            yield self
        finally:
            for name, function in real.items():
                setattr(os, name, function)


def run_check(*args: str) -> tuple[int, str]:
    """`cachelint check ARGS` in this process; the exit code and what it printed (stdout and stderr)."""
    try:
        result = CliRunner().invoke(main, ["check", *args])
    finally:
        gc.enable()  # the command turns the collector off for its one short process
    output = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exception is None or isinstance(result.exception, SystemExit), output
    assert "Traceback" not in output and "internal error" not in output, output
    return result.exit_code, output


def without_warnings(output: str) -> str:
    return "".join(line for line in output.splitlines(keepends=True) if not line.startswith("cachelint: warning:"))


def every_failure_point(run: Callable[[Faults], None]) -> int:
    """Run `run` once without failure to count the operations, then once failing each of them and
    once more with none failing; returns how many there were."""
    counting = Faults()
    with counting.active():
        run(counting)
    assert counting.count > 0
    for fail_at in range(1, counting.count + 2):
        faults = Faults(fail_at)
        with faults.active():
            run(faults)
    return counting.count


def leftovers(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if ".cachelint" in path.name)


# -- check --fix ------------------------------------------------------------------------------------


def cl001_project(root: Path) -> Path:
    shutil.copytree(CL001_CASE, root, ignore=shutil.ignore_patterns("*.fixed", "__pycache__"))
    shutil.copy(ONE_LINE_TRY, root / "rl_sync" / "one_line_try.py")
    return root


def test_fix_writes_every_file_of_a_fix_or_none_at_every_failure_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = cl001_project(tmp_path / "template")
    originals = {name: (template / name).read_bytes() for name in [*CL001_FILES, "rl_sync/one_line_try.py"]}
    fixed = {name: (CL001_CASE / f"{name}.fixed").read_bytes() for name in CL001_FILES}
    outcomes = set()

    def run(faults: Faults) -> None:
        root = tmp_path / f"run{faults.fail_at}"
        shutil.copytree(template, root)
        monkeypatch.chdir(root)
        code, output = run_check("--no-cache", "--fix", "--unsafe-fixes", ".")
        cl001 = tuple((root / name).read_bytes() for name in CL001_FILES)
        assert cl001 in (tuple(originals[n] for n in CL001_FILES), tuple(fixed[n] for n in CL001_FILES))
        try_fixed = (root / "rl_sync/one_line_try.py").read_bytes() != originals["rl_sync/one_line_try.py"]
        complete = cl001[0] == fixed[CL001_FILES[0]] and try_fixed
        if faults.failed:
            assert code == 2, output
            assert f"not written: {ENOSPC}" in output
        else:
            assert (code, complete) == (0, True), output
        assert not complete or not faults.failed
        assert leftovers(root) == []
        outcomes.add((cl001[0] == fixed[CL001_FILES[0]], try_fixed))

    every_failure_point(run)
    assert outcomes == {(False, True), (True, False), (True, True)}  # one failure stops one fix


def test_a_second_file_edited_while_the_first_is_replaced_stops_the_whole_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the replacement of the worker and of the driver, the driver changes (here only its time:
    an editor saving the same text): the worker gets its old text back and nothing is written."""
    root = cl001_project(tmp_path / "p")
    (root / "rl_sync/one_line_try.py").unlink()
    monkeypatch.chdir(root)
    before = {name: (root / name).read_bytes() for name in CL001_FILES}

    def touch_driver(name: str, count: int) -> None:
        if name == "replace" and not touched:
            touched.append(count)
            os.utime(root / "rl_sync/async_driver.py", ns=(1, 1))

    touched: list[int] = []
    with Faults(hook=touch_driver).active():
        code, output = run_check("--no-cache", "--fix", "--unsafe-fixes", ".")
    assert code == 2
    assert "rl_sync/async_driver.py: not written: it changed on disk since it was read" in output
    assert {name: (root / name).read_bytes() for name in CL001_FILES} == before
    assert leftovers(root) == []


def test_a_file_edited_after_the_analysis_stops_every_file_of_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = cl001_project(tmp_path / "p")
    monkeypatch.chdir(root)
    import cachelint.fixes as fixes

    real = fixes.fix_to_fixed_point

    def edited_meanwhile(*args: Any, **kwargs: Any) -> Any:
        outcome = real(*args, **kwargs)
        with (root / "rl_sync/sync_driver.py").open("a") as stream:
            stream.write("# saved in an editor meanwhile\n")
        return outcome

    monkeypatch.setattr(fixes, "fix_to_fixed_point", edited_meanwhile)
    worker = (root / "rl_sync/worker_ext.py").read_bytes()
    async_driver = (root / "rl_sync/async_driver.py").read_bytes()
    code, output = run_check("--no-cache", "--fix", "--unsafe-fixes", ".")
    assert code == 2
    assert (
        "cachelint: error: rl_sync/sync_driver.py: not written: it changed on disk since it was read; "
        "rl_sync/worker_ext.py and rl_sync/async_driver.py, changed with it, left as they were"
    ) in output
    assert (root / "rl_sync/worker_ext.py").read_bytes() == worker
    assert (root / "rl_sync/async_driver.py").read_bytes() == async_driver
    assert (root / "rl_sync/one_line_try.py").read_bytes() != ONE_LINE_TRY.read_bytes()  # its own fix is written


def test_fix_keeps_extended_attributes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(os, "setxattr"):
        pytest.skip("no extended attributes on this platform")
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    server = tmp_path / "server.py"
    shutil.copy(CL005, server)
    try:
        os.setxattr(server, "user.origin", b"kept")
    except OSError:
        pytest.skip("this file system takes no user extended attributes")
    monkeypatch.chdir(tmp_path)
    code, _ = run_check("--no-cache", "--fix", "server.py")
    assert code == 0
    assert server.read_bytes() == (FIXTURES / "CL005" / f"{CL005.name}.fixed").read_bytes()
    assert os.getxattr(server, "user.origin") == b"kept"


def test_a_fix_that_failed_is_not_shown_as_fixable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A form feed before an indented line: CPython takes it, libcst cannot parse the file."""
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    source = CL005.read_text().replace(
        "        self.engine.reset_prefix_cache()", "\x0c        self.engine.reset_prefix_cache()"
    )
    (tmp_path / "server.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    code, output = run_check("--no-cache", "server.py")
    assert "CL005 [*]" in output  # offered: whether libcst can make it is known once it is tried
    code, output = run_check("--no-cache", "--fix", "server.py")
    assert code == 1
    assert "server.py:16:10: CL005 fix not applied: libcst cannot parse server.py" in output
    assert "[*]" not in output and "fixable" not in output
    assert (tmp_path / "server.py").read_text() == source


# -- the write path itself --------------------------------------------------------------------------


def test_replace_together_restores_the_files_already_replaced(tmp_path: Path) -> None:
    paths = [tmp_path / name for name in ("a.py", "b.py", "c.py")]
    for path in paths:
        path.write_text(f"{path.name} old\n")
    paths[0].chmod(0o640)
    files = [Replacement(p, p.name, f"{p.name} new\n".encode(), f"{p.name} old\n".encode()) for p in paths]
    with Faults().active() as counting:
        replace_together(files, tmp_path)
    assert [path.read_text() for path in paths] == [f"{path.name} new\n" for path in paths]
    assert paths[0].stat().st_mode & 0o777 == 0o640
    for fail_at in range(1, counting.count + 1):
        for path in paths:
            path.write_text(f"{path.name} old\n")
        with Faults(fail_at).active() as faults, pytest.raises(WriteError) as raised:
            replace_together(files, tmp_path)
        assert faults.failed is not None
        assert str(raised.value).endswith(f": not written: {ENOSPC}")
        assert [path.read_text() for path in paths] == [f"{path.name} old\n" for path in paths]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py", "c.py"]


def test_replace_together_refuses_links_before_writing_anything(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "shared.py").write_text("shared\n")
    (project / "own.py").write_text("own\n")
    (project / "link.py").symlink_to(outside / "shared.py")
    files = [
        Replacement(project / "own.py", "own.py", b"new\n", b"own\n"),
        Replacement(project / "link.py", "link.py", b"new\n", b"shared\n"),
    ]
    with pytest.raises(WriteError, match=r"link.py: not written: it is a symbolic link to .*shared.py"):
        replace_together(files, project)
    assert (project / "own.py").read_text() == "own\n"
    assert (outside / "shared.py").read_text() == "shared\n"


# -- the codemod command ----------------------------------------------------------------------------


def run_codemod(*args: str) -> int:
    """`python -m libcst.tool codemod --no-format -x cachelint.codemod.FixCacheResets ARGS` in this
    process (with `-j 1` libcst's driver transforms and writes here, where the faults are)."""
    argv = sys.argv
    sys.argv = [
        "libcst.tool",
        "codemod",
        "--no-format",
        "--hide-progress",
        "-x",
        "cachelint.codemod.FixCacheResets",
        *args,
    ]
    try:
        runpy.run_module("libcst.tool", run_name="__main__")
    except SystemExit as done:
        return int(done.code or 0)
    finally:
        sys.argv = argv
    return 0


def test_codemod_writes_each_file_whole_at_every_failure_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = CL005.read_bytes()
    after = (FIXTURES / "CL005" / f"{CL005.name}.fixed").read_bytes()

    def run(faults: Faults) -> None:
        root = tmp_path / f"run{faults.fail_at}"
        root.mkdir()
        (root / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
        for name in ("a.py", "b.py"):
            shutil.copy(CL005, root / name)
        monkeypatch.chdir(root)
        code = run_codemod("-j", "1", ".")
        err = capsys.readouterr().err
        contents = [(root / name).read_bytes() for name in ("a.py", "b.py")]
        assert all(content in (before, after) for content in contents)
        assert code == (1 if before in contents else 0), err
        if before in contents:
            assert f"not written: {ENOSPC}; the file is as it was" in err
        assert leftovers(root) == [".cachelint_cache"] or leftovers(root) == []

    every_failure_point(run)


def test_codemod_never_writes_a_file_cut_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills after 8,192 bytes: libcst's own write left the file cut there."""
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    source = CL005.read_text() + "".join(f"\n\ndef helper_{i}():\n    return {i}\n" for i in range(400))
    (tmp_path / "server.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    real_write = os.write

    def write(descriptor: int, data: Any) -> int:
        if len(data) > 8192:
            real_write(descriptor, bytes(data[:8192]))
            raise OSError(errno.ENOSPC, ENOSPC)
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", write)
    assert run_codemod("-j", "1", "server.py") == 1
    monkeypatch.undo()
    assert (tmp_path / "server.py").read_text() == source


def test_codemod_refuses_links_as_check_fix_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    shutil.copy(CL005, outside / "shared.py")
    (project / "link.py").symlink_to(outside / "shared.py")
    shutil.copy(CL005, project / "hard.py")
    os.link(project / "hard.py", outside / "other_name.py")
    shutil.copy(CL005, project / "own.py")
    monkeypatch.chdir(project)
    assert run_codemod("-j", "1", ".") == 0
    assert (outside / "shared.py").read_bytes() == CL005.read_bytes()
    assert (outside / "other_name.py").read_bytes() == CL005.read_bytes()
    assert (project / "own.py").read_bytes() == (FIXTURES / "CL005" / f"{CL005.name}.fixed").read_bytes()


# -- -o ---------------------------------------------------------------------------------------------


def test_output_file_keeps_the_old_report_at_every_failure_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    shutil.copy(CL005, tmp_path / "server.py")
    monkeypatch.chdir(tmp_path)
    old = b'{"old": "report"}\n'

    def run(faults: Faults) -> None:
        report = tmp_path / "out.sarif"
        report.write_bytes(old)
        fresh = tmp_path / f"new{faults.fail_at}" / "deeper" / "out.sarif"
        code, output = run_check("--no-cache", "--output-format", "sarif", "-o", "out.sarif", "server.py")
        if faults.failed:
            assert code == 2 and report.read_bytes() == old, output
            assert f"cannot write the report: {ENOSPC}" in output
        else:
            assert code == 1 and report.read_bytes().startswith(b"{") and report.read_bytes() != old
        code, output = run_check("--no-cache", "--output-format", "sarif", "-o", str(fresh), "server.py")
        if code == 2:
            assert not fresh.parent.parent.exists()  # no empty file, no new folder
        else:
            assert code == 1 and fresh.read_bytes().startswith(b"{")
        assert leftovers(tmp_path) == []

    every_failure_point(run)


# -- --add-noqa -------------------------------------------------------------------------------------


def test_add_noqa_writes_each_file_whole_at_every_failure_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    before = CL005.read_text()

    def run(faults: Faults) -> None:
        root = tmp_path / f"run{faults.fail_at}"
        root.mkdir()
        for name in ("a.py", "b.py"):
            (root / name).write_text(before)
        code, output = run_check("--no-cache", "--add-noqa", str(root))
        texts = [(root / name).read_text() for name in ("a.py", "b.py")]
        with_noqa = before.replace("# error: CL005", "# error: CL005  # noqa: CL005")
        assert all(text in (before, with_noqa) for text in texts), texts
        assert code == (2 if before in texts else 0), output
        assert leftovers(root) == []

    monkeypatch.chdir(tmp_path)
    every_failure_point(run)


# -- the cache --------------------------------------------------------------------------------------


def test_a_full_disk_never_damages_the_cache_nor_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The database fills up (sqlite's page limit: what a full disk answers it), and the cache folder's
    own files fail at every point: the run reports what a run without the cache reports, with a
    warning at most, and the cache is whole for the next run."""
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    for number in range(12):  # more than the new database's pages hold
        shutil.copy(CL005, tmp_path / f"server{number}.py")
    monkeypatch.chdir(tmp_path)
    code, output = run_check("--no-cache", "--output-format", "concise", ".")
    expected = (code, without_warnings(output))
    import cachelint.cache as cache

    real_set_up = cache._set_up

    def small_disk(connection: sqlite3.Connection) -> None:
        real_set_up(connection)
        [pages] = connection.execute("PRAGMA page_count").fetchone()
        connection.execute(f"PRAGMA max_page_count = {pages}")  # not one page more

    monkeypatch.setattr(cache, "_set_up", small_disk)
    code, output = run_check("--output-format", "concise", ".")
    assert (code, without_warnings(output)) == expected
    assert "the cache is off for this run" in output
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    database = sqlite3.connect(tmp_path / ".cachelint_cache" / cache.DATABASE)
    assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    database.close()
    assert run_check("--output-format", "concise", ".") == (expected[0], expected[1])

    def run(faults: Faults) -> None:
        shutil.rmtree(tmp_path / ".cachelint_cache", ignore_errors=True)
        code, output = run_check("--output-format", "concise", ".")
        assert (code, without_warnings(output)) == expected
        folder = tmp_path / ".cachelint_cache"
        if folder.exists():  # made whole, or not at all
            assert (folder / ".gitignore").read_text() == cache.GITIGNORE
            assert (folder / "CACHEDIR.TAG").read_text() == cache.CACHEDIR_TAG
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".cachelint_cache.")] == []

    every_failure_point(run)


# -- the language server ----------------------------------------------------------------------------


def test_server_fix_all_at_every_failure_point(tmp_path: Path) -> None:
    """The server writes no file but its cache: a write failing there never changes the edit fix-all
    gives, nor a file on disk."""
    pytest.importorskip("pygls")
    from cachelint.server.analysis import OpenFile
    from cachelint.server.app import fix_all
    from cachelint.server.diagnostics import ClientFeatures
    from cachelint.server.documents import SourceText
    from cachelint.server.projects import resolve_scope

    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    server = tmp_path / "server.py"
    shutil.copy(CL005, server)
    text = server.read_text()
    edits: list[object] = []

    def run(faults: Faults) -> None:
        shutil.rmtree(tmp_path / ".cachelint_cache", ignore_errors=True)
        files = (OpenFile(server.as_uri(), server, 1, SourceText(text), text.encode()),)
        edit = fix_all(resolve_scope(server), server, files, ClientFeatures())
        assert edit is not None and edit.changes is not None
        edits.append(edit)
        assert edit == edits[0]
        assert server.read_text() == text

    every_failure_point(run)
    [[change]] = edits[0].changes.values()  # type: ignore[attr-defined]
    assert change.new_text.startswith("await ")


def test_api_fix_writes_the_files_of_a_fix_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachelint import api

    root = cl001_project(tmp_path / "p")
    (root / "rl_sync/one_line_try.py").unlink()
    monkeypatch.chdir(root)
    before = {name: (root / name).read_bytes() for name in CL001_FILES}
    replaced: list[int] = []

    def fail_second_replace(name: str, count: int) -> None:
        if name == "replace":
            replaced.append(count)
            if len(replaced) == 2:
                raise OSError(errno.ENOSPC, ENOSPC)

    with Faults(hook=fail_second_replace).active():
        result = api.fix(".", cache=False, unsafe_fixes=True, write=True)
    assert [error for error in result.errors if "not written" in error] == [
        f"rl_sync/async_driver.py: not written: {ENOSPC}; rl_sync/worker_ext.py and rl_sync/sync_driver.py, "
        "changed with it, left as they were"
    ]
    assert {name: (root / name).read_bytes() for name in CL001_FILES} == before
    assert leftovers(root) == []
