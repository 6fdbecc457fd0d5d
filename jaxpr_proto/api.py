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


def decode(module: pb.Module):
  """jaxpr_proto.v1.Module message -> ClosedJaxpr (a jp.Function if it has one)."""
  if not isinstance(module, pb.Module):
    raise TypeError(f"expected a jaxpr_proto.v1.Module, got {type(module).__name__}")
  if module.HasField("function"):
    return function.decode_function(module)
  return decoder.decode(module)


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


def loads(data: bytes):
  """.jaxpb bytes -> ClosedJaxpr."""
  return decode(parse(data))


def save(closed_jaxpr, path, *, debug_info: bool = True) -> None:
  """Writes a .jaxpb file atomically: temp file in the same folder, fsync, rename."""
  data = dumps(closed_jaxpr, debug_info=debug_info)
  write_atomic(path, data)


def write_atomic(path, data: bytes) -> None:
  path = os.fspath(path)
  folder = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".jaxpb", dir=folder)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    try:
      os.unlink(tmp)
    except FileNotFoundError:
      pass
    raise
  try:  # make the rename itself durable
    dfd = os.open(folder, os.O_RDONLY)
    try:
      os.fsync(dfd)
    finally:
      os.close(dfd)
  except OSError:
    pass


def load(path):
  """Reads a .jaxpb file -> ClosedJaxpr."""
  with open(path, "rb") as f:
    return loads(f.read())
