"""The jaxpr text syntax (.jaxpr files): a Module as JAX prints a jaxpr, with
what the printout lacks in forms that parse back (docs/text_syntax.md).

* `format_module(m)`: Module -> text; `parse_module(text)`: text -> Module,
  byte for byte the Module that was formatted (`format_module` checks it).
* `grammar.lark` is the grammar, read by lark's LALR parser (`syntax`,
  which bounds the text's size and nesting first); `builder` walks lark's
  tree into a Module in the order the encoder writes one, `values` reads
  what eqns hold (params, constants, types, ...); `printer` writes the
  text; `arrays` and `names` hold the numbers and words of both.

Like `wire.files`, this reads and writes only the message: a text names no
code, and what it parses to goes through the same decoder and checks as a
.jaxpb.
"""
from __future__ import annotations

from jaxpr_proto.errors import EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire.jaxpr_text.arrays import INLINE_MAX
from jaxpr_proto.wire.jaxpr_text.syntax import MAX_NESTING, MAX_TEXT_BYTES, TextError

# The printer, the builder and lark are imported at first use, not with
# jaxpr_proto: together they are a quarter of its import time.

EXTENSION = ".jaxpr"
FORM = "jaxpr"  # beside wire.files' forms (jaxpb, txtpb, json)


def parse_module(text: str) -> pb.Module:
  """A .jaxpr text -> its Module (not yet checked: decode it, or jp.check it).
  A TextError, with line and column, for a text that does not parse."""
  from jaxpr_proto.wire.jaxpr_text import builder, syntax
  return builder.build_module(syntax.tree(text))


def format_module(m: pb.Module, *, debug_info: bool = True, inline_max: int = INLINE_MAX,
                  check: bool = True) -> str:
  """The text of a Module. `debug_info=False` leaves out source locations,
  name stacks and jaxprs' debug info (as `jp.dumps(debug_info=False)`
  does). `inline_max`: arrays of up to this many elements are written as
  numbers, bigger ones as base64; arrays in a data file (jp.save's) as
  `external(...)`. With `check` (and debug info), the text is parsed back and
  must give `m` byte for byte: tables whose order reading would not give are
  written out (`seed` lines), and an EncodeError says what no text can hold."""
  from jaxpr_proto.wire.jaxpr_text import printer
  text = printer.print_module(m, debug_info=debug_info, inline_max=inline_max)
  if not check or not debug_info:
    return text
  want = m.SerializeToString(deterministic=True)
  got = parse_module(text)
  if got.SerializeToString(deterministic=True) == want:
    return text
  seeds = [t for t in printer.SEEDABLE if list(getattr(got, t)) != list(getattr(m, t))]
  if seeds:
    text = printer.print_module(m, debug_info=debug_info, inline_max=inline_max, seeds=seeds)
    got = parse_module(text)
    if got.SerializeToString(deterministic=True) == want:
      return text
  raise EncodeError(f"this Module's text does not read back as it: {first_difference(m, got)}")


def to_bytes(m: pb.Module, **kw) -> bytes:
  """The bytes of a .jaxpr file of `m` (UTF-8 text; see `format_module`)."""
  return format_module(m, **kw).encode("utf-8")


def from_bytes(data) -> pb.Module:
  """The Module of a .jaxpr file's bytes (not yet checked; see
  wire.files.check_header); a TextError for bad text."""
  try:
    text = bytes(data).decode("utf-8")
  except UnicodeDecodeError as e:
    raise TextError(f"not a .jaxpr file: not UTF-8 ({e})") from None
  return parse_module(text)


def is_text_path(path) -> bool:
  """Whether a path names a .jaxpr file (by its extension)."""
  return str(path).lower().endswith(EXTENSION)


def first_difference(a, b, path: str = "") -> str:
  """The path of the first field where two messages differ, and the values."""
  for f, _ in a.ListFields() + b.ListFields():
    x, y = getattr(a, f.name), getattr(b, f.name)
    where = f"{path}.{f.name}" if path else f.name
    if x == y:
      continue
    if f.is_repeated:
      for k, (u, v) in enumerate(zip(x, y)):
        if u != v:
          if f.message_type is not None and f.message_type.GetOptions().map_entry is False:
            return first_difference(u, v, f"{where}[{k}]")
          return f"{where}[{k}]: {u!r} != {v!r}"
      return f"{where}: {len(x)} entries != {len(y)}"
    if f.message_type is not None:
      if a.HasField(f.name) != b.HasField(f.name):
        return f"{where}: set in one only"
      return first_difference(x, y, where)
    return f"{where}: {x!r} != {y!r}"
  if a.SerializeToString(deterministic=True) != b.SerializeToString(deterministic=True):
    return f"{path}: equal fields of different bytes (-0.0 and 0.0?)"
  return "no difference"


__all__ = ["parse_module", "format_module", "to_bytes", "from_bytes", "is_text_path",
           "TextError", "EXTENSION", "FORM", "MAX_TEXT_BYTES", "MAX_NESTING", "INLINE_MAX"]
