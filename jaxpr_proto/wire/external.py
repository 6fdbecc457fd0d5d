"""Array bytes stored outside the message (`Array.external`).

A protobuf message cannot pass 2 GiB, and copying a big array into one costs
its size two or three times over. So `jp.save` writes each array of at least
`MIN_BYTES` to one data file beside the `.jaxpb` (`model.jaxpb.data`), 64-byte
aligned, and the message keeps only where it is (an `ExternalData`: location,
offset, length, SHA-256), as ONNX's external data does. Stock protobuf
readers still parse the message. A pickle carries the same arrays as
out-of-band buffers, named "pickle-buffer:<k>".

Writing: a `Sink` (`DataFile`, `PickleBuffers`) takes each big array's bytes
and returns its `ExternalData`. Reading: a `Source` (`Folder`, `Buffers`)
returns the bytes an `ExternalData` names, as a uint8 numpy view (of a
read-only mapping of the file: no copy), after checking that the location stays in
the folder, that the range is in the file, and (unless told not to) the
checksum. Every refusal is a DecodeError with the path of the array.
"""
from __future__ import annotations

import errno
import hashlib
import mmap
import os
import re
import stat

import numpy as np

from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

ALIGN = 64  # of each array in a data file: what XLA needs to use it in place
MIN_BYTES = 1 << 20  # jp.save's default: arrays this big or bigger go outside
DATA_SUFFIX = ".data"  # model.jaxpb -> model.jaxpb.data
PICKLE_PREFIX = "pickle-buffer:"
FEATURE = "external_data"  # Module.required_features of a file that uses it


def _sha256(view) -> bytes:
  return hashlib.sha256(view).digest()


# --- writing ------------------------------------------------------------------

# Bytes are passed around as 1-D uint8 numpy arrays, not memoryviews: CPython
# 3.11 can crash collecting a memoryview of a memoryview that sits in a
# reference cycle (a traceback's frames), which numpy views never are.

class Sink:
  """Where an encoder puts the bytes of arrays of at least `min_bytes` (and
  of one byte at least). An array that is put again (the same memory, as a
  constant used by several eqns) is stored once."""

  def __init__(self, min_bytes: int = MIN_BYTES):
    self.min_bytes = min_bytes
    self._seen: dict[tuple[int, int], tuple] = {}  # (address, size) -> (where, the data)

  def takes(self, nbytes: int) -> bool:
    return nbytes >= max(self.min_bytes, 1)

  def put(self, data: np.ndarray) -> pb.ExternalData:
    """Takes `data` (1-D uint8, the array's own memory) -> where it went."""
    key = (data.__array_interface__["data"][0], data.nbytes)
    if key not in self._seen:
      self._seen[key] = (self._store(data), data)  # data kept: its address stays its own
    return self._seen[key][0]

  def _store(self, data) -> pb.ExternalData:
    raise NotImplementedError


class DataFile(Sink):
  """Appends arrays to a data file, written under a hidden temp name in the
  same folder, made at the first array; `commit` renames it into place
  (`api.save` writes the .jaxpb after it), `discard` removes it."""

  def __init__(self, path, min_bytes: int = MIN_BYTES):
    super().__init__(min_bytes)
    self.path = os.fspath(path)
    self.location = os.path.basename(self.path)
    check_location(self.location, "", error=EncodeError)
    self.tmp = os.path.join(os.path.dirname(self.path) or ".", f".tmp-{os.urandom(8).hex()}.data")
    self._f = None
    self._size = 0

  def _store(self, data):
    if self._f is None:
      self._f = open(self.tmp, "wb")
    pad = -self._size % ALIGN
    if pad:
      self._f.write(b"\0" * pad)
      self._size += pad
    offset = self._size
    self._f.write(data)
    self._size += data.nbytes
    return pb.ExternalData(location=self.location, offset=offset, length=data.nbytes,
                           sha256=_sha256(data))

  @property
  def used(self) -> bool:
    return self._f is not None

  def commit(self) -> None:
    try:
      self._f.flush()
      os.fsync(self._f.fileno())
      self._f.close()
      os.replace(self.tmp, self.path)
    except BaseException:
      self.discard()
      raise

  def discard(self) -> None:
    if self._f is None:
      return
    self._f.close()
    try:
      os.unlink(self.tmp)
    except FileNotFoundError:
      pass


class PickleBuffers(Sink):
  """Keeps the arrays' bytes as they are, for a pickle to carry out of band."""

  def __init__(self, min_bytes: int = MIN_BYTES):
    super().__init__(min_bytes)
    self.buffers: list[np.ndarray] = []

  def _store(self, data):
    self.buffers.append(data)
    # No checksum: the buffers travel with the message, in one stream.
    return pb.ExternalData(location=f"{PICKLE_PREFIX}{len(self.buffers) - 1}",
                           length=data.nbytes)


class Parts:
  """What a pickle holds for a program with external arrays: the message's
  bytes and the arrays' buffers (out of band with protocol 5)."""

  def __init__(self, message: bytes, *buffers):
    self.message, self.buffers = message, buffers

  def digest(self) -> bytes:
    h = hashlib.sha256(self.message)
    for b in self.buffers:
      h.update(b)
    return h.digest()


def message_and_source(data) -> tuple[bytes, "Source | None"]:
  """The message bytes of a pickled program (bytes or Parts), and where its
  external arrays are."""
  if isinstance(data, Parts):
    return data.message, Buffers(data.buffers)
  return data, None


# --- reading ------------------------------------------------------------------

class Source:
  """Where a decoder finds the bytes of external arrays."""

  def view(self, ext: pb.ExternalData, path: str) -> np.ndarray:
    """The bytes `ext` names, as a 1-D uint8 array."""
    raise NotImplementedError


class Nowhere(Source):
  """A message read from bytes alone: it has no folder to look in."""

  def view(self, ext, path):
    raise DecodeError(
        f"the array's bytes are in the data file {ext.location!r} beside the .jaxpb; "
        "load the file with jp.load(path) (jp.loads reads a message alone)", path)


class Buffers(Source):
  """The out-of-band buffers of a pickle."""

  def __init__(self, buffers):
    self.buffers = buffers

  def view(self, ext, path):
    loc = ext.location
    k = loc[len(PICKLE_PREFIX):] if loc.startswith(PICKLE_PREFIX) else ""
    if not re.fullmatch(r"[0-9]{1,9}", k) or int(k) >= len(self.buffers):
      raise DecodeError(f"no pickle buffer {loc!r}", path)
    b = np.frombuffer(self.buffers[int(k)], np.uint8)
    if ext.offset != 0 or ext.length != b.nbytes:
      raise DecodeError(f"pickle buffer {loc!r} has {b.nbytes} bytes, not {ext.length}", path)
    return b


class Folder(Source):
  """The data files in the folder of a .jaxpb, mapped read-only once each.

  A location must be a relative path of plain names that stays inside the
  folder: no "..", no absolute path, no symlink on the way (each component
  is opened with O_NOFOLLOW relative to the one before), and a regular file
  (not a FIFO or a device, which could hang or never end). `verify=False`
  skips the checksums (`jp.check` of the file checks them later)."""

  def __init__(self, folder, verify: bool = True):
    self.folder = os.fspath(folder) or "."
    self.verify = verify
    self._maps: dict[str, mmap.mmap | None] = {}
    self._verified: set[tuple[str, int, int, bytes]] = set()

  @classmethod
  def beside(cls, path, verify: bool = True) -> "Folder":
    """The folder of the file at `path` (of the file itself, where `path` is a symlink)."""
    return cls(os.path.dirname(os.path.realpath(path)), verify)

  def view(self, ext, path):
    mm = self._map(ext.location, path)
    size = len(mm) if mm is not None else 0
    if ext.offset > size or ext.length > size - ext.offset:
      raise DecodeError(f"bytes {ext.offset}..{ext.offset + ext.length} are beyond the end of "
                        f"{ext.location!r} ({size} bytes)", path)
    if ext.length == 0:
      return np.zeros(0, np.uint8)
    view = np.frombuffer(mm, np.uint8, ext.length, ext.offset)
    key = (ext.location, ext.offset, ext.length, ext.sha256)
    if self.verify and key not in self._verified:
      if _sha256(view) != ext.sha256:
        raise DecodeError(f"the bytes in {ext.location!r} at {ext.offset} do not match their "
                          "SHA-256: the data file is damaged or not this program's", path)
      self._verified.add(key)
    return view

  def _map(self, location: str, path: str):
    if location not in self._maps:
      self._maps[location] = _map_file(self.folder, location, path)
    return self._maps[location]


def as_source(x) -> "Source | None":
  """A Source from what a caller names: None, a Source, or a folder's path."""
  return Folder(x) if isinstance(x, (str, os.PathLike)) else x


def check_location(location: str, path: str, error=DecodeError) -> list[str]:
  """The plain names of a location, or an error saying why it is not one (a
  drive letter or a pickle buffer's name is not a file's)."""
  parts = location.split("/")
  if (not location or "\\" in location or "\0" in location or location.startswith("/")
      or any(p in ("", ".", "..") for p in parts) or re.match(r"[A-Za-z]:", location)
      or location.startswith(PICKLE_PREFIX)):
    raise error(f"external data location {location!r} is not a relative path "
                "inside the folder of the .jaxpb", path)
  return parts


def _map_file(folder: str, location: str, path: str):
  """A read-only mapping of folder/location (None for an empty file)."""
  parts = check_location(location, path)
  if os.open not in os.supports_dir_fd or not hasattr(os, "O_NOFOLLOW"):
    raise DecodeError("external data needs a system whose open() takes a folder and refuses "
                      "symlinks (POSIX); this one cannot read it safely", path)
  nofollow = os.O_NOFOLLOW
  cloexec = getattr(os, "O_CLOEXEC", 0)
  fd = None
  try:
    dir_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | cloexec)
    try:
      for p in parts[:-1]:
        nxt = os.open(p, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow | cloexec,
                      dir_fd=dir_fd)
        os.close(dir_fd)
        dir_fd = nxt
      st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
      if stat.S_ISLNK(st.st_mode):
        raise DecodeError(f"external data {location!r} is a symlink", path)
      if not stat.S_ISREG(st.st_mode):  # never open a device or a FIFO
        raise DecodeError(f"external data {location!r} is not a regular file", path)
      # O_NONBLOCK: opening a FIFO swapped in meanwhile must not wait for a writer.
      fd = os.open(parts[-1], os.O_RDONLY | nofollow | cloexec | getattr(os, "O_NONBLOCK", 0),
                   dir_fd=dir_fd)
    finally:
      os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
      raise DecodeError(f"external data {location!r} is not a regular file", path)
    return mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ) if st.st_size else None
  except (OSError, ValueError) as e:  # ValueError: the file shrank under mmap
    why = "it is a symlink" if getattr(e, "errno", None) == errno.ELOOP else getattr(e, "strerror", str(e))
    raise DecodeError(f"cannot open external data {location!r} in {folder!r}: {why}", path) from None
  finally:
    if fd is not None:
      os.close(fd)

