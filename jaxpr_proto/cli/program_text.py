"""A program's jaxpr text, and where each stored jaxpr and eqn is in it.

`ProgramText.of(m)` prints the Module `m` as `jp.format(m,
debug_info=False)` does (the same text, docs/text_syntax.md) and notes,
for each jaxpr `m.jaxprs[j]` and each of its eqns, the span of the text
that prints it, so that what `diff` and the viewer show of an eqn or a
jaxpr is the text a user can paste back into a `.jaxpr` file. It also
keeps what `diff` prints on its own: an eqn's one-line head (params left
out), its params' values, a jaxpr's binders and outvars, each with the
names the whole text gives its variables.

The spans are found by printing with jaxpr_text's own Printer, noting the
text of each jaxpr block and eqn as it is made; the printer lays out a
nested part as a piece of its parent's text, so each lies in the whole
text as it was made, and is found there in printing order.
"""
from __future__ import annotations

import dataclasses

from jaxpr_proto.errors import EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns, walk
from jaxpr_proto.wire.jaxpr_text import printer


@dataclasses.dataclass
class Part:
  """A jaxpr block or an eqn as the printer made it: its text, the indent
  its lines after the first were laid out at, the parts printed inside it
  (in order) and, once found, where it is in the whole text."""
  kind: str                      # "jaxpr" or "eqn"
  key: object                    # j, or (j, k)
  indent: int = 0
  text: str = ""
  parts: list = dataclasses.field(default_factory=list)
  start: int = -1
  # an eqn's: its head without params, and {param name: value text}
  head: str = ""
  params: dict = dataclasses.field(default_factory=dict)
  # a jaxpr's: (constvars, invars) as `a:f32[3] b:f32[]`, `(c,)`, and {var id: name}
  binders: tuple[str, str] = ("", "")
  outvars: str = ""
  names: dict = dataclasses.field(default_factory=dict)
  eqn_count: int = 0
  ref: object = dataclasses.field(default=None, repr=False)  # a block's names, while printing

  def dedented(self) -> str:
    """The part's text as if printed at the left margin."""
    first, *rest = self.text.split("\n")
    cut = self.indent
    return "\n".join([first, *(line[min(cut, len(line) - len(line.lstrip(" "))):]
                               for line in rest)])


class _Noting(printer.Printer):
  """jaxpr_text's Printer, noting the parts as it prints them."""

  def __init__(self, m: pb.Module):
    self.open_parts: list[Part] = []
    self.top: list[Part] = []
    self.jaxpr_parts: dict[int, Part] = {}
    self.eqn_parts: dict[tuple[int, int], Part] = {}
    super().__init__(m, debug_info=False)

  def _enter(self, part: Part) -> None:
    (self.open_parts[-1].parts if self.open_parts else self.top).append(part)
    self.open_parts.append(part)

  def block(self, j, closed, indent):
    part = Part("jaxpr", j, indent)
    self._enter(part)
    try:
      part.text = super().block(j, closed, indent)
    finally:
      self.open_parts.pop()
    msg, ref = self.m.jaxprs[j], part.ref
    if ref is not None:
      part.binders = tuple(" ".join(f"{ref(v.id)}:{self.type(v.aval)}" for v in vs)
                           for vs in (msg.constvars, msg.invars))
      outs = [self.atom(a, ref, 0) for a in msg.outvars]
      part.outvars = f"({outs[0]},)" if len(outs) == 1 else f"({', '.join(outs)})"
      defined = [v.id for v in (*msg.constvars, *msg.invars)]
      defined += [x - 1 for x in self.eqn_cols[j].results if x]
      part.names = {i: ref(i) for i in defined}
      part.ref = None
    self.jaxpr_parts.setdefault(j, part)
    return part.text

  def eqns(self, c, define, ref, indent):
    self.open_parts[-1].ref = ref  # (the block's names, once it has defined them all)
    return super().eqns(c, define, ref, indent)

  def eqn(self, binders, prim, params, operands, annots, indent):
    block = self.open_parts[-1]
    part = Part("eqn", (block.key, block.eqn_count), indent)
    block.eqn_count += 1
    lhs = " ".join(binders) + " = " if binders else ""
    part.head = f"{lhs}{self.prim(prim)}{'[...]' if params else ''}" + "".join(
        " " + s for s in operands)
    self._enter(part)
    try:
      part.text = super().eqn(binders, prim, params, operands, annots, indent)
    finally:
      self.open_parts.pop()
    self.eqn_parts.setdefault(part.key, part)
    return part.text

  def param(self, i, indent):
    text = super().param(i, indent)
    if self.open_parts and self.open_parts[-1].kind == "eqn":
      name, value = text.split("=", 1)
      self.open_parts[-1].params[name] = value
    return text


def _place(parts: list[Part], text: str, offset: int) -> None:
  """Sets each part's start: found in `text` (at `offset` in the whole),
  after the part before it; a part not found (printed, then not used) has none."""
  at = 0
  for p in parts:
    k = text.find(p.text, at)
    if k < 0:
      continue
    p.start, at = offset + k, k + len(p.text)
    _place(p.parts, p.text, p.start)


@dataclasses.dataclass
class ProgramText:
  """`text` (jp.format(m, debug_info=False)), and its jaxpr and eqn parts
  by `m.jaxprs` index and (jaxpr index, eqn index)."""
  module: pb.Module
  text: str
  jaxprs: dict[int, Part]
  eqns: dict[tuple[int, int], Part]

  @classmethod
  def of(cls, m: pb.Module) -> "ProgramText":
    """EncodeError for a Module that has no jaxpr text (jp.format's)."""
    p = _Noting(m)
    try:
      text = p.text()
    except printer.Unprintable as e:  # (as print_module says it)
      raise EncodeError(f"this Module has no jaxpr text: {e}") from None
    _place(p.top, text, 0)
    return cls(m, text, p.jaxpr_parts, p.eqn_parts)

  def eqn_count(self, j: int) -> int:
    part = self.jaxprs.get(j)
    return part.eqn_count if part is not None else -1

  def sub_jaxprs(self, j: int, k: int, name: str) -> list[int] | None:
    """The m.jaxprs indices of the jaxprs in param `name` of eqn k of jaxpr
    j, in order (a tuple of branches: each); None where it has no such param."""
    m = self.module
    c = columns.of(m.jaxprs[j])
    start = sum(c.param_count[:k])
    for i in c.params[start:start + c.param_count[k]]:
      if 0 <= i < len(m.params) and m.params[i].name == name:
        out = []
        for kind, x, _ in walk.value_refs(m.params[i].value, ""):
          if kind == "closed_jaxpr" and 0 <= x < len(m.closed_jaxprs):
            out.append(m.closed_jaxprs[x].jaxpr)
          elif kind == "jaxpr":
            out.append(x)
        return out
    return None

  def spans(self) -> dict:
    """Where each part is, for a page's script: {"jaxprs": {j: [start,
    end, indent]}, "eqns": {j: [[start, end, indent] or None per eqn]},
    "names": {j: {var id: name}}}, offsets in UTF-16 code units (as
    JavaScript indexes a string)."""
    units = _utf16_offsets(self.text)

    def span(p: Part):
      return None if p.start < 0 else [units(p.start), units(p.start + len(p.text)), p.indent]

    jaxprs = {str(j): span(p) for j, p in sorted(self.jaxprs.items()) if p.start >= 0}
    eqns: dict[str, list] = {}
    for (j, k), p in sorted(self.eqns.items()):
      row = eqns.setdefault(str(j), [])
      row.extend([None] * (k - len(row)))
      row.append(span(p))
    names = {str(j): {str(i): name for i, name in p.names.items()}
             for j, p in sorted(self.jaxprs.items()) if p.names}
    return {"jaxprs": jaxprs, "eqns": eqns, "names": names}


def _utf16_offsets(text: str):
  """index in `text` -> index in its UTF-16 form (chars past U+FFFF take two)."""
  if text.isascii():
    return lambda i: i
  import bisect
  wide = [i for i, ch in enumerate(text) if ord(ch) > 0xFFFF]
  return lambda i: i + bisect.bisect_left(wide, i)
