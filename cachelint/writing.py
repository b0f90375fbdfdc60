"""Writing files whole or not at all: the one write path of fixes, `--add-noqa`, the codemod command,
`-o` and the cache folder's own files.

`replace_together` replaces a set of files (the files of one fix) or none of them: each new text is
first written to a temporary file in the file's own folder, with the file's mode, owner, group and
extended attributes, and flushed to disk; only then are the files replaced, one rename each. When a
write, a rename, or the check that a file did not change since it was read fails, every file already
replaced gets its old inode back (kept under a second name until all are done) and the temporaries are
removed: every file is as it was. Ctrl-C waits until the set is written or restored.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cachelint import interrupts

# tempfile and secrets are imported where a file is written: every run imports this module (through
# the cache), few write.

# Extended attributes a process may be refused to set (security labels, trusted.*) or a file system
# may not hold: the new file then gets the defaults, as `cp -a` leaves them.
_XATTR_SKIPPED = (errno.EPERM, errno.EACCES, errno.ENOTSUP, errno.ENODATA, errno.EINVAL)


class WriteError(Exception):
    """A set of files was not written; every one of them is as it was. The message names the file
    (`display`) and the reason."""

    def __init__(self, message: str, display: str) -> None:
        super().__init__(message)
        self.display = display


@dataclass(frozen=True)
class Replacement:
    """A file's new bytes. `original`: the bytes they were made from (the file must still hold them),
    or None for a file written whatever it holds (a report)."""

    path: Path  # absolute, as named (a link inside the project is written through)
    display: str
    data: bytes
    original: bytes | None = None


def unwritable(path: Path, root: Path) -> str | None:
    """Why cachelint must not write the file at `path` (absolute), or None. It never writes outside the
    project (through a symbolic link, named or found by walking, the project may reach shared or system
    files), nor a file with several hard links (writing a new file would split them, writing in place
    would change the other names' file, wherever they are)."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(os.path.realpath(root)):
        if real == Path(os.path.abspath(path)):
            return "it is outside the project"
        return f"it is a symbolic link to {real}, outside the project"
    try:
        links = real.stat().st_nlink
    except OSError:
        return None  # reading it fails next, with its own message
    if links > 1:
        return f"it has {links} hard links, and cachelint writes no file that has more than one name"
    return None


@dataclass
class _Staged:
    file: Replacement
    target: Path  # the real path
    temporary: Path | None = None
    backup: Path | None = None  # the old inode under a second name, while a set is replaced
    seen: tuple[int, int, int, int] | None = None  # inode, size, times, as checked
    replaced: bool = False


def replace_together(files: Sequence[Replacement], root: Path | None = None) -> None:
    """Replace every file of `files` with its data, or none of them (see the module). With `root`,
    a file cachelint must not write (`unwritable`) stops the set before anything is written. Raises
    WriteError naming the file and the reason; every file is then as it was."""
    staged: list[_Staged] = []
    seen: set[Path] = set()
    for file in files:
        target = Path(os.path.realpath(file.path))
        if target not in seen:  # a file named twice (a link inside the project) is written once
            seen.add(target)
            staged.append(_Staged(file, target))
    with interrupts.deferred():
        try:
            for item in staged:
                _prepare(item, root, keep_old=len(staged) > 1)
            for item in staged:
                _check_unchanged(item)
                item.seen = _signature(item.target)
            for item in staged:
                if _signature(item.target) != item.seen:
                    raise _failure(item, "it changed on disk since it was read")
                assert item.temporary is not None
                try:
                    os.replace(item.temporary, item.target)
                except OSError as error:
                    raise _failure(item, _reason(error)) from error
                item.replaced = True
        except BaseException as error:
            lost = _restore(staged)
            if lost and isinstance(error, WriteError):
                raise WriteError(f"{error}; {lost}", error.display) from error.__cause__
            raise
        finally:
            _clean(staged)


def write_file(path: Path, data: bytes) -> None:
    """Replace (or create) the file at `path` with `data` in one step; missing folders on the way are
    made, and removed again when the write fails. Raises OSError; the file is then as it was."""
    made = _make_folders(path.parent)
    try:
        if os.path.lexists(path):
            replace_together([Replacement(Path(os.path.abspath(path)), str(path), data)])
        else:
            create_file(path, data)
    except WriteError as error:
        _remove_folders(made)
        cause = error.__cause__
        raise OSError(getattr(cause, "errno", None) or errno.EIO, _reason_of(error)) from error
    except BaseException:
        _remove_folders(made)
        raise


def _reason_of(error: WriteError) -> str:
    cause = error.__cause__
    return _reason(cause) if isinstance(cause, OSError) else str(error)


def _prepare(item: _Staged, root: Path | None, keep_old: bool) -> None:
    file = item.file
    if root is not None:
        refusal = unwritable(file.path, root)
        if refusal is not None:
            raise WriteError(f"{file.display}: not written: {refusal}", file.display)
    try:
        old = item.target.stat()
        item.temporary = _temporary_copy(item.target, file.data, old)
        if keep_old:
            item.backup = _second_name(item.target, old)
    except OSError as error:
        raise _failure(item, _reason(error)) from error


def _check_unchanged(item: _Staged) -> None:
    if item.file.original is None:
        return
    try:
        with item.target.open("rb") as stream:
            current = stream.read()
    except OSError as error:
        raise _failure(item, f"cannot read it back ({_reason(error)})") from error
    if current != item.file.original:
        raise _failure(item, "it changed on disk since it was read")


def _failure(item: _Staged, reason: str) -> WriteError:
    return WriteError(f"{item.file.display}: not written: {reason}", item.file.display)


def _reason(error: BaseException) -> str:
    return (error.strerror if isinstance(error, OSError) else None) or str(error) or type(error).__name__


def _signature(path: Path) -> tuple[int, int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _written_beside(target: Path, data: bytes) -> Path:
    """`data` in a new file beside `target` (a hidden name of its own), flushed to disk; nothing is left
    behind when it fails."""
    import tempfile

    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".cachelint")
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb", buffering=0) as stream:
            _write_all(stream.fileno(), data)
            os.fsync(stream.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary


def _temporary_copy(target: Path, data: bytes, old: os.stat_result) -> Path:
    """`data` in a new file beside `target`, flushed to disk, with `old`'s mode, owner, group and
    extended attributes."""
    temporary = _written_beside(target, data)
    try:
        _keep_owner(temporary, old)
        temporary.chmod(old.st_mode & 0o7777)  # after chown, which clears the set-id bits
        _copy_xattrs(target, temporary)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary


def _second_name(target: Path, old: os.stat_result) -> Path:
    """Another name for `target`'s inode (or, where the file system has no hard links, a copy of it),
    to put back if a later file of the set cannot be replaced."""
    import secrets

    while True:
        name = target.with_name(f".{target.name}.{secrets.token_hex(6)}.cachelint-old")
        try:
            os.link(target, name)
        except FileExistsError:
            continue
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            return _temporary_copy(target, target.read_bytes(), old)
        return name


def _restore(staged: list[_Staged]) -> str:
    """Give each replaced file its old inode back, last replaced first; what could not be put back
    (its old text is then kept beside it), or ""."""
    lost = []
    for item in reversed(staged):
        if item.replaced and item.backup is not None:
            try:
                os.replace(item.backup, item.target)
            except OSError as error:
                lost.append(
                    f"{item.file.display} could not be put back ({_reason(error)}): its old text is in {item.backup}"
                )
            item.backup = None
    return "; ".join(lost)


def _clean(staged: list[_Staged]) -> None:
    for item in staged:
        for leftover in (item.temporary, item.backup):
            if leftover is not None:
                with contextlib.suppress(OSError):
                    os.unlink(leftover)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


def create_file(path: Path, data: bytes) -> None:
    """A new file at `path` holding `data`, whole, with the mode a new file gets: written beside it,
    then given its name by a hard link, which fails with FileExistsError when anything (a link too) is
    there already. Raises OSError; nothing is then left behind."""
    umask = os.umask(0)
    os.umask(umask)
    temporary = _written_beside(path, data)
    try:
        temporary.chmod(0o666 & ~umask)
        try:
            os.link(temporary, path)
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK):
                raise
            if os.path.lexists(path):  # a file system without hard links: a rename, unless taken
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path)) from error
            os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _make_folders(folder: Path) -> list[Path]:
    """Make the missing folders down to `folder`; returns those it made, deepest last."""
    missing: list[Path] = []
    current = Path(os.path.abspath(folder))
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    made = []
    try:
        for path in reversed(missing):
            path.mkdir()
            made.append(path)
    except BaseException:
        _remove_folders(made)
        raise
    return made


def _remove_folders(made: list[Path]) -> None:
    for path in reversed(made):
        with contextlib.suppress(OSError):
            path.rmdir()


def _keep_owner(path: Path, original: os.stat_result) -> None:
    """Give `path` the owner and group of `original` (root may; others may set a group of theirs)."""
    if not hasattr(os, "chown"):
        return
    current = path.stat()
    if (current.st_uid, current.st_gid) == (original.st_uid, original.st_gid):
        return
    try:
        os.chown(path, original.st_uid, original.st_gid)
    except PermissionError:
        with contextlib.suppress(PermissionError):
            os.chown(path, -1, original.st_gid)


def _copy_xattrs(source: Path, target: Path) -> None:
    """The extended attributes of `source` on `target` (Linux); one that cannot be set for lack of
    rights or support is left out, any other failure (a full disk) raises."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError as error:
        if error.errno in _XATTR_SKIPPED:
            return
        raise
    for name in names:
        try:
            os.setxattr(target, name, os.getxattr(source, name))
        except OSError as error:
            if error.errno not in _XATTR_SKIPPED:
                raise
