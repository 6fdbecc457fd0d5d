"""Files: parsing `.jaxpb` bytes, atomic writes, and the four file forms of a
Module: binary `.jaxpb`, text `.txtpb`, JSON `.json`, and the jaxpr text
`.jaxpr` (`wire.jaxpr_text`, docs/text_syntax.md).

The text forms are protobuf's own: `google.protobuf.text_format` and
`google.protobuf.json_format` (the proto3 JSON mapping, camelCase field names,
int64 as strings, bytes as base64, enums by name). Both are deterministic and
exact: converting binary -> text -> binary gives back the identical message,
hence identical bytes under deterministic serialization.

Only the Module message is converted here; nothing is decoded into a jaxpr, so
these functions also work for files whose primitives are not registered.

The one loss: a NaN in a `double` field (Value.float, Complex) is written as
`nan`, losing its sign and payload. NaNs inside arrays are exact (array data
is bytes). The jaxpr text holds every field exactly (its printer checks that
the text reads back as the Module, byte for byte).
"""
from __future__ import annotations

import os
import pathlib
import tempfile

from google.protobuf import json_format, text_format
from google.protobuf.message import DecodeError as _PbDecodeError

from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import jaxpr_text
from jaxpr_proto.wire.versions import check_version

BINARY, TEXT, JSON, JAXPR = "jaxpb", "txtpb", "json", jaxpr_text.FORM
EXTENSIONS = {".jaxpb": BINARY, ".txtpb": TEXT, ".json": JSON, jaxpr_text.EXTENSION: JAXPR}

# The conventional header of a text-format file (see protobuf's "txtpb" spec);
# it is a comment, so parsers skip it.
TEXT_HEADER = ("# proto-file: jaxpr_proto/v1/jaxpr.proto\n"
               "# proto-message: jaxpr_proto.v1.Module\n")


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


def form_of(path, default: str | None = BINARY) -> str | None:
  """The form a path's extension names; `default` for other extensions."""
  return EXTENSIONS.get(pathlib.Path(os.fspath(path)).suffix.lower(), default)


# --- text ---------------------------------------------------------------------

def to_text(m: pb.Module) -> str:
  """Module -> protobuf text format, with a header comment."""
  return TEXT_HEADER + text_format.MessageToString(m, as_utf8=True)


def from_text(text: str) -> pb.Module:
  """Protobuf text format -> Module, with a DecodeError for bad text."""
  m = pb.Module()
  try:
    text_format.Parse(text, m)
  except text_format.ParseError as e:
    raise DecodeError(f"not a valid .txtpb file: {e}") from None
  return m


# --- JSON ---------------------------------------------------------------------

def to_json(m: pb.Module, *, indent: int | None = 2) -> str:
  """Module -> proto3 JSON (camelCase names, as every protobuf runtime writes)."""
  return json_format.MessageToJson(m, indent=indent, ensure_ascii=False) + "\n"


def from_json(text: str) -> pb.Module:
  """proto3 JSON -> Module; unknown fields are an error."""
  m = pb.Module()
  try:
    json_format.Parse(text, m)
  except json_format.ParseError as e:
    raise DecodeError(f"not a valid jaxpr-proto JSON file: {e}") from None
  return m


# --- bytes and files ------------------------------------------------------------

def to_bytes(m: pb.Module, form: str) -> bytes:
  """Module -> the bytes of a file in `form`."""
  if form == BINARY:
    return m.SerializeToString(deterministic=True)
  if form == TEXT:
    return to_text(m).encode("utf-8")
  if form == JSON:
    return to_json(m).encode("utf-8")
  if form == JAXPR:
    return jaxpr_text.to_bytes(m)
  raise ValueError(f"unknown form {form!r}")


def from_bytes(data: bytes, form: str) -> pb.Module:
  """The bytes of a file in `form` -> Module (not yet checked; see `check_header`).
  A .jaxpr text that does not parse is a jaxpr_text.TextError (a
  DecodeError), with its line and column."""
  if form == BINARY:
    return parse(data)
  if form == JAXPR:
    return jaxpr_text.from_bytes(data)
  try:
    text = bytes(data).decode("utf-8")
  except UnicodeDecodeError as e:
    raise DecodeError(f"not a valid .{form} file: not UTF-8 ({e})") from None
  return from_text(text) if form == TEXT else from_json(text)


def check_header(m: pb.Module) -> None:
  """Refuses a message that is not a jaxpr-proto Module this reader can read.

  Almost any bytes parse as *some* protobuf message, so a Module without a
  format version is reported as "not a jaxpr-proto file".
  """
  if not m.HasField("format_version"):
    raise DecodeError("not a jaxpr-proto file (it has no format_version)", "format_version")
  check_version(m)


def read_module(path, form: str | None = None) -> pb.Module:
  """Reads a file in any form (by extension; binary by default) -> Module."""
  form = form or form_of(path)
  with open(path, "rb") as f:
    data = f.read()
  m = from_bytes(data, form)
  check_header(m)
  return m


def write_module(m: pb.Module, path, form: str | None = None) -> int:
  """Writes `m` atomically in the form its extension names; returns the size."""
  data = to_bytes(m, form or form_of(path))
  write_atomic(path, data)
  return len(data)


# --- atomic writes ------------------------------------------------------------

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


__all__ = ["parse", "write_atomic", "BINARY", "TEXT", "JSON", "JAXPR", "EXTENSIONS", "form_of", "to_text",
           "from_text", "to_json", "from_json", "to_bytes", "from_bytes",
           "check_header", "read_module", "write_module"]
