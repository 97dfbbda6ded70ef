"""Reading the members of an ``.npz`` archive, bounded: sizes and headers checked before
anything inflates.

An ``.npz`` is a zip archive of ``.npy`` members. A damaged or forged one can declare, in its
zip directory or its ``.npy`` headers, arrays far larger than its bytes; numpy would allocate
whatever is declared. Every dataset reader (:mod:`grb_dist.datasets.npz`,
:mod:`grb_dist.datasets.grb`, Pro-GNN's files) therefore goes through these functions: a file
is a regular file (never a FIFO or a device) and a zip archive before numpy sees it, opened
with pickle disabled (:func:`open_npz`) or read whole within a limit (:func:`read_bounded`);
a member's zip sizes are ones its compressed bytes can hold (:func:`check_member_sizes`), its
``.npy`` header is read first (:func:`member_header`) and must fit the member
(:func:`check_header_fits`) and this machine's memory (:func:`check_allocation`) before the
member is unpacked (:func:`read_array`). Each defect is one line naming the file and member.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from grb_dist.core.errors import DatasetError

#: The first bytes of every ``.npz`` (a zip archive).
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
#: What reading a damaged zip archive or member raises (a corrupted deflate stream: zlib.error;
#: an unknown compression method: NotImplementedError; an encrypted member: RuntimeError).
ARCHIVE_ERRORS = (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError, RuntimeError,
                  OverflowError)
#: Deflate inflates at most about 1,032 bytes per compressed byte: a member declaring more is
#: damaged (its sizes are forged), whatever its arrays declare.
MAX_DEFLATE_RATIO = 1032


def open_npz(path: Path, data: bytes | None = None) -> "np.lib.npyio.NpzFile":
    """``np.load`` with pickle disabled and file errors turned into :class:`DatasetError`;
    ``data``: the file's bytes, already read (what is parsed is then exactly what was read,
    e.g. hashed), ``path`` naming it in messages.

    A file that is not a zip archive is refused before numpy sees it (numpy would try to
    unpickle it and suggest ``allow_pickle``, which a dataset never needs).
    """
    path = Path(path)
    if data is None:
        check_regular_file(path)
        try:
            with open(path, "rb") as fh:
                head = fh.read(4)
        except OSError as exc:
            raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
    else:
        head = data[:4]
    if head not in ZIP_MAGIC:
        what = ("empty" if not head else "an HTML page" if head.lstrip()[:1] == b"<"
                else "a Python pickle (never loaded)" if head[:1] == b"\x80"
                else "a single .npy array" if head == b"\x93NUM" else "not an .npz (zip) archive")
        raise DatasetError(f"{path} is {what}, not a valid .npz; it is not a dataset file: delete it and fetch it again")
    try:
        return np.load(path if data is None else io.BytesIO(data), allow_pickle=False)
    except (*ARCHIVE_ERRORS, ValueError) as exc:
        reason = type(exc).__name__ if "pickle" in str(exc) else str(exc)
        raise DatasetError(f"cannot read {path} ({reason}); the file is truncated or damaged: delete it and fetch it again") from None


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of regular file ``path``, at most ``limit`` of them: the size is checked before
    anything is read, and the read stops past the limit (a file growing meanwhile)."""
    check_regular_file(path)
    try:
        size = os.stat(path).st_size
        if size <= limit:
            with open(path, "rb") as fh:
                data = fh.read(limit + 1)
            size = len(data)
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size > limit:
        raise DatasetError(f"{path} has {size:,} bytes, more than the {limit:,} of {what}; it is not such a file")
    return data


def check_regular_file(path: Path) -> None:
    """``path`` exists and is a regular file (a symlink to one is fine): a FIFO would block
    the reader forever, a device (``/dev/urandom``) never end, a directory not be a file."""
    from grb_dist.core.paths import special_file_kind

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DatasetError(f"missing file {path}; check the path or download the dataset again") from None
    except OSError as exc:  # a symlink loop, a name too long, no permission
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}; a dataset file must be an .npz file") from None
    kind = special_file_kind(mode)
    if kind:
        raise DatasetError(f"{path} is {kind}, not a regular file; a dataset file must be an .npz file")


def check_allocation(path: Path, what: str, nbytes: int) -> None:
    """An array about to be allocated (``nbytes``) fits this machine's memory (half of it:
    the graph is copied on its way to tensors); otherwise one line saying how much it needs."""
    from grb_dist.core.resources import format_bytes, machine_memory

    limit = machine_memory() // 2
    if nbytes > limit:
        raise DatasetError(f"{path}: {what} would take {format_bytes(nbytes)}, more than half of this machine's "
                           f"{format_bytes(2 * limit)}; use a smaller graph or a machine with more memory")


def check_kind(arr: np.ndarray, what: str, path: Path, need: str = "real numbers") -> np.ndarray:
    """``arr`` holds real numbers (booleans, integers or floats); complex numbers, strings
    and dates are refused, saying what was found."""
    if arr.dtype.kind not in "biuf":
        found = {"c": "complex numbers", "U": "strings", "S": "byte strings", "M": "dates", "m": "time spans",
                 "O": "Python objects", "V": "records"}.get(arr.dtype.kind, str(arr.dtype))
        raise DatasetError(f"{path}: {what} must hold {need}, found {found} ({arr.dtype})")
    return arr


def read_array(npz, key: str, path: Path) -> np.ndarray:
    if key not in npz.files:
        raise DatasetError(f"{path}: missing array {key!r} (found {', '.join(sorted(npz.files))})")
    check_member(npz, key, path)
    try:
        return npz[key]
    except ValueError as exc:
        reason = "it needs pickle" if "pickle" in str(exc) else str(exc)
        raise DatasetError(f"{path}: array {key!r} cannot be read ({reason}); fetch the file again") from None
    except zlib.error as exc:
        raise DatasetError(f"{path}: array {key!r} is damaged (its compressed data does not inflate: {exc}); fetch "
                           "the file again") from None
    except ARCHIVE_ERRORS as exc:
        raise DatasetError(f"{path}: array {key!r} is truncated or damaged ({type(exc).__name__}: "
                           f"{_first_line(exc)}); fetch the file again") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:160]


def member_header(npz, key: str, path: Path) -> tuple[tuple[int, ...], np.dtype, int] | None:
    """``(shape, dtype, data bytes)`` of the ``.npy`` member ``key``: the shape and dtype its
    ``.npy`` header declares and the bytes of array data the member holds (its unpacked size
    in the zip directory less that header), read from its headers alone (nothing is unpacked);
    ``None`` for a header version numpy checks itself. Sizes the zip entry cannot hold
    (:func:`check_member_sizes`) and a compressed stream that does not inflate are a damaged
    file, one line naming the member."""
    archive = getattr(npz, "zip", None)
    if archive is None:
        return None
    if key not in npz.files:
        raise DatasetError(f"{path}: missing array {key!r} (found {', '.join(sorted(npz.files))})")
    name = f"{key}.npy" if f"{key}.npy" in archive.namelist() else key
    try:
        info = archive.getinfo(name)
        check_member_sizes(info, key, path)
        with archive.open(name) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):  # 3.0 differs in the header's text encoding only
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                return None
            data_bytes = int(info.file_size) - fh.tell()
    except zlib.error as exc:
        raise DatasetError(f"{path}: array {key!r} is damaged (its compressed data does not inflate: {exc}); fetch "
                           "the file again") from None
    except (KeyError, ValueError, *ARCHIVE_ERRORS) as exc:
        raise DatasetError(f"{path}: array {key!r} has a damaged header ({type(exc).__name__}); fetch the file again") from None
    return tuple(int(s) for s in shape), dtype, data_bytes


def check_member_sizes(info: zipfile.ZipInfo, key: str, path: Path) -> None:
    """The sizes a zip member declares are ones its compressed bytes can hold: a stored member
    holds what it declares, a deflated one at most :data:`MAX_DEFLATE_RATIO` times its
    compressed size (anything more is a forged size, said as damage before the size is judged)."""
    if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
        raise DatasetError(f"{path}: array {key!r} is stored uncompressed in {info.compress_size:,} bytes but declares "
                           f"{info.file_size:,}; the file is damaged: fetch it again")
    if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > MAX_DEFLATE_RATIO * info.compress_size + 1024:
        raise DatasetError(f"{path}: array {key!r} declares {info.file_size:,} bytes inflated from "
                           f"{info.compress_size:,} compressed, more than deflate can hold (at most "
                           f"{MAX_DEFLATE_RATIO:,} to 1); the file is damaged: fetch it again")


def check_member(npz, key: str, path: Path) -> None:
    """Read the ``.npy`` header of one member before its data: object arrays are refused and
    the shape it declares must fit in the bytes the member holds (a damaged or forged header
    would otherwise make numpy allocate whatever it declares)."""
    header = member_header(npz, key, path)
    if header is None:
        return
    shape, dtype, file_size = header
    if dtype.hasobject:
        raise DatasetError(f"{path}: array {key!r} is an object array; datasets must hold numeric arrays")
    declared = check_header_fits(path, key, header)
    # a compressed member holds what it declares but may unpack to far more than its file
    check_allocation(path, f"array {key!r} of shape {tuple(shape)}", declared)


def check_header_fits(path: Path, key: str, header: tuple[tuple[int, ...], np.dtype, int]) -> int:
    """The bytes the ``.npy`` member ``key`` declares (its header's shape and dtype), which
    the member must hold: a header declaring more than its member's size is a damaged file,
    said as such before any size rule is applied to what it declares."""
    shape, dtype, file_size = header
    declared = math.prod(shape) * dtype.itemsize
    if declared > file_size:
        raise DatasetError(
            f"{path}: array {key!r} declares shape {tuple(shape)} ({declared:,} bytes) but holds {file_size:,}; "
            "the file is damaged: fetch it again"
        )
    return declared
