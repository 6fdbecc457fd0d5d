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
import stat

import numpy as np

from jaxpr_proto.errors import DecodeError
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
  """Where an encoder puts the bytes of arrays of at least `min_bytes`."""
  min_bytes = MIN_BYTES

  def put(self, data: np.ndarray) -> pb.ExternalData:
    """Takes `data` (1-D uint8, the array's own memory) -> where it went."""
    raise NotImplementedError


class DataFile(Sink):
  """Appends arrays to a data file, written under a temp name in the same
  folder; `commit` renames it into place (`files.write_atomic` does the
  .jaxpb after it), `discard` removes it."""

  def __init__(self, path, min_bytes: int = MIN_BYTES):
    self.path = os.fspath(path)
    self.location = os.path.basename(self.path)
    self.min_bytes = min_bytes
    self.tmp = f"{self.path}.tmp-{os.urandom(8).hex()}"
    self._f = open(self.tmp, "wb")
    self._size = 0

  def put(self, data):
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
    return self._size > 0

  def commit(self) -> None:
    self._f.flush()
    os.fsync(self._f.fileno())
    self._f.close()
    os.replace(self.tmp, self.path)

  def discard(self) -> None:
    self._f.close()
    try:
      os.unlink(self.tmp)
    except FileNotFoundError:
      pass


class PickleBuffers(Sink):
  """Keeps the arrays' bytes as they are, for a pickle to carry out of band."""

  def __init__(self, min_bytes: int = MIN_BYTES):
    self.min_bytes = min_bytes
    self.buffers: list[np.ndarray] = []

  def put(self, data):
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
    if not k.isdigit() or int(k) >= len(self.buffers):
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
    self._verified: set[tuple[str, int, int]] = set()

  def view(self, ext, path):
    mm = self._map(ext.location, path)
    size = len(mm) if mm is not None else 0
    if ext.offset > size or ext.length > size - ext.offset:
      raise DecodeError(f"bytes {ext.offset}..{ext.offset + ext.length} are beyond the end of "
                        f"{ext.location!r} ({size} bytes)", path)
    if ext.length == 0:
      return np.zeros(0, np.uint8)
    view = np.frombuffer(mm, np.uint8, ext.length, ext.offset)
    key = (ext.location, ext.offset, ext.length)
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


def check_location(location: str, path: str) -> list[str]:
  """The plain names of a location, or a DecodeError saying why it is not one."""
  parts = location.split("/")
  if (not location or "\\" in location or "\0" in location or location.startswith("/")
      or any(p in ("", ".", "..") for p in parts) or ":" in parts[0]):
    raise DecodeError(f"external data location {location!r} is not a relative path "
                      "inside the folder of the .jaxpb", path)
  return parts


def _map_file(folder: str, location: str, path: str):
  """A read-only mapping of folder/location (None for an empty file)."""
  parts = check_location(location, path)
  nofollow = getattr(os, "O_NOFOLLOW", 0)
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
      # O_NONBLOCK: opening a FIFO must not wait for a writer.
      fd = os.open(parts[-1], os.O_RDONLY | nofollow | cloexec | getattr(os, "O_NONBLOCK", 0),
                   dir_fd=dir_fd)
    finally:
      os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
      raise DecodeError(f"external data {location!r} is not a regular file", path)
    return mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if st.st_size else None
  except OSError as e:
    why = "it is a symlink" if e.errno == errno.ELOOP else e.strerror
    raise DecodeError(f"cannot open external data {location!r} in {folder!r}: {why}", path) from None
  finally:
    if fd is not None:
      os.close(fd)


def uses_external(m: pb.Module) -> bool:
  return FEATURE in m.required_features
