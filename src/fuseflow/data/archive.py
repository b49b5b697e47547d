"""Reading `.npz` archives and `.npy` files that users give, sizes checked before allocating.

numpy allocates what an array's header declares before reading its data, so a 300-byte `.npy`
can ask for petabytes and a small compressed archive can inflate to gigabytes. `read_arrays`
reads every header first, refuses object, string, complex and date dtypes, checks that each
member's data can hold what its header declares (a truncated file says so), checks the total
against a memory budget, and only then loads the arrays (never with pickle).

    >>> import io, numpy as np
    >>> buf = io.BytesIO(); np.savez(buf, a=np.arange(3), b=np.eye(2)); _ = buf.seek(0)
    >>> {k: v.shape for k, v in read_arrays(buf, "--inputs").items()}
    {'a': (3,), 'b': (2, 2)}
"""
from __future__ import annotations

import io
import math
import zipfile
import zlib

import numpy as np

from ..errors import UserError
from ..files import check_regular
from ..memory import Budget

REAL_KINDS = "biuf"  # bool, signed, unsigned, floating
_MAGIC = b"\x93NUMPY"


def _header(handle, member: str, where: str) -> tuple[tuple, np.dtype]:
    try:
        version = np.lib.format.read_magic(handle)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(handle)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise UserError(f"{member} is not a readable numpy array ({_reason(err)})", where) from None
    return tuple(int(d) for d in shape), dtype


def _reason(err: BaseException) -> str:
    return " ".join(str(err).split())[:160] or type(err).__name__


def _check_dtype(dtype: np.dtype, member: str, where: str, kinds: str) -> None:
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in kinds:
        raise UserError(f"{member} has dtype {dtype}; fuseflow reads real numbers only "
                        "(bool, integer or floating point)", where,
                        "store its real part (x.real)" if dtype.kind == "c" else
                        "store bool, integer or floating-point arrays only")


def _nbytes(shape: tuple, dtype: np.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


def inspect_members(source, where: str, kinds: str = REAL_KINDS) -> dict[str, tuple[tuple, np.dtype]]:
    """(shape, dtype) of every array in an .npz (or of the one array of an .npy, keyed by its
    name), read from headers only; a member whose stored data is shorter than its header
    declares, or that is not an array of real numbers, is refused."""
    if not hasattr(source, "read"):
        check_regular(source, where)
    if _peek(source, where) == _MAGIC:
        return {_stem(source): _npy_member(source, where, kinds)}
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise UserError(f"not a readable .npz archive or .npy file ({_reason(err)})", where,
                        "write it with numpy.savez or numpy.save") from None
    members = {}
    with archive:
        for info in archive.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            try:
                with archive.open(info) as handle:
                    shape, dtype = _header(handle, f"member {name}", where)
                    start = handle.tell()
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as err:
                raise UserError(f"member {name} cannot be read ({_reason(err)})", where) from None
            _check_dtype(dtype, f"member {name}", where, kinds)
            if _nbytes(shape, dtype) > info.file_size - start:
                raise UserError(f"member {name} declares {shape} {dtype} but holds only "
                                f"{max(0, info.file_size - start)} bytes of data (truncated or corrupt)", where)
            members[name] = (shape, dtype)
    return members


def _peek(source, where: str) -> bytes:
    try:
        if hasattr(source, "read"):
            source.seek(0)
            head = source.read(len(_MAGIC))
            source.seek(0)
            return head
        with open(source, "rb") as handle:
            return handle.read(len(_MAGIC))
    except OSError as err:
        raise UserError(f"cannot read the file ({err.strerror or err})", where) from None


def _stem(source) -> str:
    name = getattr(source, "name", source)
    return str(name).rsplit("/", 1)[-1].removesuffix(".npy") if isinstance(name, str) else "array"


def _npy_member(source, where: str, kinds: str) -> tuple[tuple, np.dtype]:
    handle = source if hasattr(source, "read") else open(source, "rb")
    try:
        shape, dtype = _header(handle, "the array", where)
        start = handle.tell()
        handle.seek(0, io.SEEK_END)
        size = handle.tell() - start
    finally:
        if handle is not source:
            handle.close()
        else:
            source.seek(0)
    _check_dtype(dtype, "the array", where, kinds)
    if _nbytes(shape, dtype) > size:
        raise UserError(f"the array declares {shape} {dtype} but the file holds only {size} bytes of data "
                        "(truncated or corrupt)", where)
    return shape, dtype


def read_arrays(source, where: str, budget: Budget | None = None, *, kinds: str = REAL_KINDS,
                copies: float = 1.0, what: str | None = None) -> dict[str, np.ndarray]:
    """Every array of an .npz (or the array of an .npy, keyed by the file's stem), after
    `inspect_members` and a budget check of their total size times `copies` (the caller's
    conversions, e.g. 2 when each array is also copied to float64)."""
    members = inspect_members(source, where, kinds)
    total = sum(_nbytes(shape, dtype) for shape, dtype in members.values())
    (budget or Budget()).check(total * copies, what or f"reading {where}")
    try:
        if hasattr(source, "seek"):
            source.seek(0)
        loaded = np.load(source, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return {next(iter(members)): loaded}
        with loaded:
            return {name: loaded[name] for name in loaded.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as err:
        raise UserError(f"cannot read arrays ({_reason(err)})", where) from None
