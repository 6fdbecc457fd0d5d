"""The three file forms of a Module: binary `.jaxpb`, text `.txtpb`, JSON `.json`.

The text forms are protobuf's own: `google.protobuf.text_format` and
`google.protobuf.json_format` (the proto3 JSON mapping, camelCase field names,
int64 as strings, bytes as base64, enums by name). Both are deterministic and
exact: converting binary -> text -> binary gives back the identical message,
hence identical bytes under deterministic serialization.

Only the Module message is converted here; nothing is decoded into a jaxpr, so
these functions also work for files whose primitives are not registered.

The one loss: a NaN in a `double` field (Value.float, Complex) is written as
`nan`, losing its sign and payload. NaNs inside arrays are exact (array data
is bytes).
"""
from __future__ import annotations

import os
import pathlib

from google.protobuf import json_format, text_format

from jaxpr_proto import api
from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

BINARY, TEXT, JSON = "jaxpb", "txtpb", "json"
EXTENSIONS = {".jaxpb": BINARY, ".txtpb": TEXT, ".json": JSON}

# The conventional header of a text-format file (see protobuf's "txtpb" spec);
# it is a comment, so parsers skip it.
TEXT_HEADER = ("# proto-file: jaxpr_proto/v1/jaxpr.proto\n"
               "# proto-message: jaxpr_proto.v1.Module\n")


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
  raise ValueError(f"unknown form {form!r}")


def from_bytes(data: bytes, form: str) -> pb.Module:
  """The bytes of a file in `form` -> Module (not yet checked; see `check_header`)."""
  if form == BINARY:
    return api.parse(data)
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
  from jaxpr_proto.versions import check_version
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
  api.write_atomic(path, data)
  return len(data)


def convert(src, dst) -> tuple[str, str, int]:
  """Converts a file between forms, by extension; -> (from, to, bytes written)."""
  src_form, dst_form = form_of(src, None), form_of(dst, None)
  for p, f in ((src, src_form), (dst, dst_form)):
    if f is None:
      raise ValueError(f"{os.fspath(p)}: unknown extension (use one of "
                       f"{', '.join(EXTENSIONS)})")
  size = write_module(read_module(src, src_form), dst, dst_form)
  return src_form, dst_form, size


__all__ = ["BINARY", "TEXT", "JSON", "EXTENSIONS", "form_of", "to_text",
           "from_text", "to_json", "from_json", "to_bytes", "from_bytes",
           "check_header", "read_module", "write_module", "convert"]
