"""The public entry points: encode/decode messages, dumps/loads bytes, save/load files."""
from __future__ import annotations

from jaxpr_proto import compat, function
from jaxpr_proto.check import checker, loading
from jaxpr_proto.codec import encoder
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire.files import parse, write_atomic


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
  return loading.decode(module, typecheck=typecheck)[1]


def dumps(closed_jaxpr, *, debug_info: bool = True) -> bytes:
  """ClosedJaxpr -> .jaxpb bytes (deterministic serialization)."""
  return encode(closed_jaxpr, debug_info=debug_info).SerializeToString(deterministic=True)


def loads(data: bytes, *, typecheck: bool = True):
  """.jaxpb bytes -> ClosedJaxpr (see `decode` for `typecheck`)."""
  return decode(parse(data), typecheck=typecheck)


def save(closed_jaxpr, path, *, debug_info: bool = True) -> None:
  """Writes a .jaxpb file atomically: temp file in the same folder, fsync, rename."""
  data = dumps(closed_jaxpr, debug_info=debug_info)
  write_atomic(path, data)


def load(path, *, typecheck: bool = True):
  """Reads a .jaxpb file -> ClosedJaxpr (see `decode` for `typecheck`)."""
  with open(path, "rb") as f:
    return loads(f.read(), typecheck=typecheck)


def check(x, *, raise_on_error: bool = False, max_errors: int = 200) -> checker.CheckReport:
  """Checks a .jaxpb: bytes, a Module, a file path, or a ClosedJaxpr /
  jp.Function (encoded first). Returns a CheckReport listing every problem as
  (path, message); with raise_on_error, raises a CheckError instead of
  returning a failed report. A file that cannot be read raises OSError."""
  if isinstance(x, (compat.ClosedJaxpr, function.Function)):
    x = encode(x)
  return checker.check(x, raise_on_error=raise_on_error, max_errors=max_errors)
