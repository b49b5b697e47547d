"""Files that users name: read only when they are regular files, written atomically.

A device (`/dev/full`, `/dev/zero`), a pipe or a directory given where a file is expected would
otherwise be read without end or fail deep inside a parser; `read_file` refuses them in one line.
`check_output` refuses, before a long run, an output path whose directory is missing, that is a
directory, or that names something other than a regular file. `atomic_path` gives a temporary
file beside the target that replaces it only when the write succeeded, so a failed write leaves
nothing half-written. `kernel_paths` numbers one file per kernel before the file's extension.

    >>> read_file("/dev/zero", "--device")
    Traceback (most recent call last):
    fuseflow.errors.UserError: --device: /dev/zero is not a regular file (fix: give the path of a file)
    >>> kernel_paths("out.d/my graph.svg", 2)
    ['out.d/my graph.k0.svg', 'out.d/my graph.k1.svg']
    >>> kernel_paths("./g.svg", 1), kernel_paths("g", 2)
    (['./g.svg'], ['g.k0', 'g.k1'])
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile

from .errors import UserError


def _kind(path, where: str, verb: str) -> str | None:
    """'file', 'directory' or 'other' (a device, a pipe, ...) for what `path` names; None if
    nothing is there."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as err:
        raise UserError(f"cannot {verb} {os.fspath(path)}: {err.strerror}", where) from None
    return "file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "other"


def check_regular(path, where: str) -> None:
    """Refuse a missing path, a directory, or anything but a regular file."""
    kind = _kind(path, where, "read")
    if kind is None:
        raise UserError(f"cannot read {os.fspath(path)}: no such file", where, "check the path")
    if kind != "file":
        raise UserError(f"{os.fspath(path)} is {'a directory' if kind == 'directory' else 'not a regular file'}",
                        where, "give the path of a file")


def read_file(path, where: str) -> bytes:
    """The bytes of a regular file; every problem is a one-line UserError naming `where`."""
    check_regular(path, where)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as err:
        raise UserError(f"cannot read {os.fspath(path)}: {err.strerror}", where) from None


def kernel_paths(path: str, count: int) -> list[str]:
    """`path` itself for one kernel, else `<stem>.k<N><ext>` in the same directory."""
    if count == 1:
        return [path]
    directory, name = os.path.split(path)
    stem, ext = os.path.splitext(name)
    return [os.path.join(directory, f"{stem}.k{k}{ext}") for k in range(count)]


def check_output(path: str, flag: str, suffixes: tuple[str, ...] = ()) -> str:
    """`path` if fuseflow can write it there; else a one-line UserError naming `flag`."""
    if not path:
        raise UserError("empty output path", flag)
    if suffixes and not path.lower().endswith(suffixes):
        raise UserError(f"{path} does not end in {' or '.join(suffixes)}", flag,
                        f"name the file e.g. out{suffixes[0]}")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise UserError(f"directory {directory} does not exist", flag, f"create it first (mkdir -p {directory})")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UserError(f"directory {directory} is not writable", flag)
    kind = _kind(path, flag, "write")
    if kind == "directory":
        raise UserError(f"{path} is a directory", flag, "give a file name inside it")
    if kind == "other":
        raise UserError(f"{path} is not a regular file", flag, "give the path of a file to create or replace")
    return path


def _created_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temporary_beside(path: str, flag: str) -> str:
    """A new empty file in `path`'s directory, with its extension, to be renamed over `path`."""
    check_output(path, flag)
    directory, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".part{ext}", dir=directory)
        os.fchmod(handle, _created_mode())  # as open() would create it (mkstemp's is 0600)
        os.close(handle)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}", flag) from None
    return temp


@contextlib.contextmanager
def atomic_path(path: str, flag: str):
    """Yields a temporary path beside `path` (same extension); on success the temporary file
    replaces `path`, on any failure it is removed. OS errors become one-line UserErrors."""
    temp = temporary_beside(path, flag)
    try:
        yield temp
        os.replace(temp, path)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}", flag) from None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def write_text(path: str, text: str, flag: str) -> None:
    """Write `text` to `path` atomically."""
    with atomic_path(path, flag) as temp:
        with open(temp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
