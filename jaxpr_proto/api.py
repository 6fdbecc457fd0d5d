"""The public entry points: encode/decode messages, dumps/loads bytes, save/load files."""
from __future__ import annotations

import os
import tempfile

from google.protobuf.message import DecodeError as _PbDecodeError

from jaxpr_proto import decoder, encoder, function
from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def encode(closed_jaxpr, *, debug_info: bool = True) -> pb.Module:
  """ClosedJaxpr (or jp.Function) -> jaxpr_proto.v1.Module message."""
  if isinstance(closed_jaxpr, function.Function):
    return function.encode_function(closed_jaxpr, debug_info=debug_info)
  return encoder.encode(closed_jaxpr, debug_info=debug_info)


def decode(module: pb.Module, *, typecheck: bool = True):
  """jaxpr_proto.v1.Module message -> ClosedJaxpr (a jp.Function if it has one).

  `typecheck=False` skips re-running JAX's type check of every eqn (about
  two thirds of the decoding time); use it only for files you trust.
  """
  if not isinstance(module, pb.Module):
    raise TypeError(f"expected a jaxpr_proto.v1.Module, got {type(module).__name__}")
  if module.HasField("function"):
    return function.decode_function(module, typecheck=typecheck)
  return decoder.decode(module, typecheck=typecheck)


def dumps(closed_jaxpr, *, debug_info: bool = True) -> bytes:
  """ClosedJaxpr -> .jaxpb bytes (deterministic serialization)."""
  return encode(closed_jaxpr, debug_info=debug_info).SerializeToString(deterministic=True)


def parse(data: bytes) -> pb.Module:
  """.jaxpb bytes -> Module message, with a DecodeError for bad bytes."""
  if not isinstance(data, (bytes, bytearray, memoryview)):
    raise TypeError(f"expected bytes, got {type(data).__name__}")
  m = pb.Module()
  try:
    m.ParseFromString(bytes(data))
  except (_PbDecodeError, RuntimeError, ValueError) as e:
    raise DecodeError(f"not a valid .jaxpb file: {e}") from None
  return m


def loads(data: bytes, *, typecheck: bool = True):
  """.jaxpb bytes -> ClosedJaxpr (see `decode` for `typecheck`)."""
  return decode(parse(data), typecheck=typecheck)


def save(closed_jaxpr, path, *, debug_info: bool = True) -> None:
  """Writes a .jaxpb file atomically: temp file in the same folder, fsync, rename."""
  data = dumps(closed_jaxpr, debug_info=debug_info)
  write_atomic(path, data)


def write_atomic(path, data: bytes) -> None:
  """Writes `data` to `path` so that readers see the old file or the new one,
  never a part: the data goes to a temp file in the same folder, is fsync'ed,
  and the temp file is renamed over `path`. On Linux the temp file is first
  unnamed (O_TMPFILE) and gets its temp name only once complete, so that a
  writer killed mid-save leaves no partial file behind."""
  path = os.fspath(path)
  folder = os.path.dirname(os.path.abspath(path))
  if not _write_unnamed(path, folder, data):
    _write_named(path, folder, data)
  _fsync_folder(folder)


def _write_named(path, folder, data) -> None:
  fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".jaxpb", dir=folder)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    _remove(tmp)
    raise


def _replace(tmp, path) -> None:
  """Renames the finished temp file over `path`; removes it if that fails."""
  try:
    os.replace(tmp, path)
  except BaseException:
    _remove(tmp)
    raise


def _remove(tmp) -> None:
  try:
    os.unlink(tmp)
  except FileNotFoundError:
    pass


def _write_unnamed(path, folder, data) -> bool:
  """The O_TMPFILE way; False where the OS or file system lacks it."""
  flag = getattr(os, "O_TMPFILE", None)
  if flag is None or not os.path.isdir("/proc/self/fd"):
    return False
  try:
    fd = os.open(folder, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o666)
  except OSError:  # EOPNOTSUPP, EISDIR, EINVAL: not on this file system
    return False
  try:
    view = memoryview(data)
    while view:
      view = view[os.write(fd, view):]
    os.fsync(fd)
    tmp = os.path.join(folder, f".tmp-{os.urandom(8).hex()}.jaxpb")
    if not _link_unnamed(fd, tmp):
      return False  # write a named temp file instead
    _replace(tmp, path)
  finally:
    os.close(fd)
  return True


def _link_unnamed(fd: int, name: str) -> bool:
  """Gives the O_TMPFILE file `fd` a name: linkat(2) of /proc/self/fd/N, else
  linkat(fd, "", AT_EMPTY_PATH) (which /proc links crossing mounts need)."""
  try:
    os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)
    return True
  except OSError:
    pass
  try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, at_empty_path = -100, 0x1000
    return libc.linkat(fd, b"", at_fdcwd, os.fsencode(name), at_empty_path) == 0
  except (OSError, AttributeError):
    return False


def _fsync_folder(folder) -> None:
  """Makes the rename itself durable."""
  try:
    dfd = os.open(folder, os.O_RDONLY)
    try:
      os.fsync(dfd)
    finally:
      os.close(dfd)
  except OSError:
    pass


def load(path, *, typecheck: bool = True):
  """Reads a .jaxpb file -> ClosedJaxpr (see `decode` for `typecheck`)."""
  with open(path, "rb") as f:
    return loads(f.read(), typecheck=typecheck)
