"""Files the `fuseflow` command writes: checked before any work, written atomically.

`check_output` refuses, before a long run, a path whose directory is missing, that is a
directory, or that names something other than a regular file (a device such as /dev/full, a
pipe). `atomic_path` gives a temporary file beside the target that replaces it only when the
write succeeded, so a failed write leaves nothing half-written. `kernel_paths` numbers one file
per kernel before the file's extension.

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

from ..errors import UserError


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
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}", flag) from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{path} is a directory", flag, "give a file name inside it")
    if not stat.S_ISREG(mode):
        raise UserError(f"{path} is not a regular file", flag, "give the path of a file to create or replace")
    return path


def _created_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str, flag: str):
    """Yields a temporary path beside `path` (same extension); on success the temporary file
    replaces `path`, on any failure it is removed. OS errors become one-line UserErrors."""
    check_output(path, flag)
    directory, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".part{ext}", dir=directory)
        os.fchmod(handle, _created_mode())  # as open() would create it (mkstemp's is 0600)
        os.close(handle)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}", flag) from None
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
