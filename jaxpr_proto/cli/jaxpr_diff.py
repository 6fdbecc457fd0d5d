"""A structural diff of two jaxprs: which eqns were added, removed or changed.

Eqns are aligned (difflib) on a key that ignores variable names: the
primitive, the types of operands and results, and the params. Variables are
then matched along the alignment (inputs by position, results of aligned
eqns), so an eqn whose params are equal but whose operands now come from
elsewhere is reported as changed, too. Params that hold sub-jaxprs (the body
of a scan, the branches of a cond, ...) are diffed recursively.

Eqns, binders, outvars and param values are printed as the jaxpr text of the
files (`jp.format(m, debug_info=False)`, by cli.program_text), each side with
the names its text gives its variables: what a diff shows can be pasted
into a `.jaxpr` file. Where a side has no text for a jaxpr (a Module the
text cannot hold, or a jaxpr whose decoded eqns are not the file's, as an
upgrade from an older JAX may make them), it is printed as JAX prints it.
For two jp.Functions the lines of their signatures (cli.signature) that
differ come first.
"""
from __future__ import annotations

import dataclasses
import difflib
import re

import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.cli.printing import aval_str, without_addresses
from jaxpr_proto.cli.program_text import ProgramText
from jaxpr_proto.errors import EncodeError


# --- printing -------------------------------------------------------------------

# Where a jaxpr's text is: the program's text and the m.jaxprs index (or None).
Text = tuple[ProgramText, int] | None


def text_of(m) -> Text:
  """The text of a Module's root jaxpr, for `diff`; None for a Module that
  has no jaxpr text."""
  try:
    return ProgramText.of(m), m.closed_jaxprs[m.root].jaxpr
  except (EncodeError, IndexError):
    return None


class _Printer:
  """JAX's printout of each eqn, with the names a full print gives."""

  def __init__(self, jaxpr):
    self.jaxpr = jaxpr
    self.ctx = compat.JaxprPpContext()
    self.settings = compat.JaxprPpSettings()
    try:
      # Names are handed out in printing order: constvars, invars, then eqns.
      self.binders = [str(compat.pp_vars(vs, self.ctx, print_shapes=True, is_binder=True))
                      for vs in (jaxpr.constvars, jaxpr.invars)]
      self.eqns = [str(compat.pp_eqn(e, self.ctx, self.settings)).rstrip()
                   for e in jaxpr.eqns]
    except Exception:  # JAX internals moved: fall back to each eqn's own repr
      self.binders = [" ".join(map(str, jaxpr.constvars)), " ".join(map(str, jaxpr.invars))]
      self.eqns = [repr(e) for e in jaxpr.eqns]

  def name(self, v) -> str:
    try:
      return str(compat.pp_var(v, self.ctx))
    except Exception:
      return str(v)

  def typed(self, v) -> str:
    return f"{self.name(v)}:{aval_str(v.aval)}"

  def head(self, k: int) -> str:
    """One line for eqn k, params left out: `c:f32[3] = scan[...] a b`."""
    e = self.jaxpr.eqns[k]
    outs = " ".join(self.typed(v) for v in e.outvars)
    ins = " ".join(self.name(x) for x in e.invars)
    return f"{outs} = {e.primitive.name}[...] {ins}".rstrip()

  def outvars(self) -> str:
    return "(" + ", ".join(self.name(v) for v in self.jaxpr.outvars) + ")"

  def param(self, k: int, name: str) -> str | None:
    return None

  def sub(self, k: int, name: str, index: int, count: int) -> Text:
    return None


class _TextPrinter:
  """The jaxpr text of each eqn (cli.program_text), as _Printer gives JAX's."""

  def __init__(self, pt: ProgramText, j: int):
    self.pt, self.j = pt, j
    part = pt.jaxprs[j]
    self.binders = list(part.binders)
    self._parts = [pt.eqns[(j, k)] for k in range(part.eqn_count)]
    self.eqns = [p.dedented() for p in self._parts]
    self._outvars = part.outvars

  def head(self, k: int) -> str:
    return self._parts[k].head

  def outvars(self) -> str:
    return self._outvars

  def param(self, k: int, name: str) -> str | None:
    return self._parts[k].params.get(name)

  def sub(self, k: int, name: str, index: int, count: int) -> Text:
    """The text of the `index`-th of the `count` jaxprs param `name` holds."""
    js = self.pt.sub_jaxprs(self.j, k, name)
    return (self.pt, js[index]) if js is not None and len(js) == count else None


def _printer(jaxpr, text: Text):
  """The text's printer where the text holds this jaxpr's eqns, else JAX's."""
  if text is not None:
    pt, j = text
    part = pt.jaxprs.get(j)
    if (part is not None and part.eqn_count == len(jaxpr.eqns)
        and all((j, k) in pt.eqns for k in range(part.eqn_count))):
      return _TextPrinter(pt, j)
  return _Printer(jaxpr)


# --- keys -----------------------------------------------------------------------

def _is_jaxpr(v) -> bool:
  return isinstance(v, (compat.Jaxpr, compat.ClosedJaxpr))


def canon(v):
  """A hashable, name-independent stand-in for a param value."""
  if _is_jaxpr(v):
    return ("jaxpr", str(v))
  if isinstance(v, (tuple, list)):
    return (type(v).__name__, tuple(canon(x) for x in v))
  if isinstance(v, dict):
    return ("dict", tuple(sorted(((repr(k), canon(x)) for k, x in v.items()))))
  if isinstance(v, (frozenset, set)):
    return ("set", tuple(sorted(repr(canon(x)) for x in v)))
  if isinstance(v, np.ndarray) or type(v).__name__ in ("ArrayImpl", "TypedNdArray"):
    a = np.asarray(v)
    return ("array", str(a.dtype), a.shape, a.tobytes())
  if callable(v) and not isinstance(v, type):
    name = getattr(v, "__qualname__", None) or getattr(v, "__name__", None)
    if name is not None:
      return ("callable", name)
  return ("repr", without_addresses(repr(v)))


def _eqn_key(e):
  return (e.primitive.name,
          tuple(aval_str(x.aval) for x in e.invars),
          tuple(aval_str(v.aval) for v in e.outvars),
          tuple(sorted((k, canon(v)) for k, v in e.params.items())))


def _short(v, limit: int = 80, text: str | None = None) -> str:
  """A param's value on one line: its jaxpr text where given."""
  if text is not None:
    s = text
  elif _is_jaxpr(v):
    s = str(v).replace("\n", " ")
  else:
    s = without_addresses(repr(v))
  s = re.sub(r"\s+", " ", s)
  return s if len(s) <= limit else s[:limit - 3] + "..."


# --- the diff -------------------------------------------------------------------

@dataclasses.dataclass
class ParamChange:
  name: str
  old: str = ""
  new: str = ""
  sub: list[tuple[str, "JaxprDiff"]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class EqnChange:
  kind: str                 # "added", "removed" or "changed"
  a: int | None             # eqn index in A (None when added)
  b: int | None             # eqn index in B (None when removed)
  a_text: str = ""
  b_text: str = ""
  params: list[ParamChange] = dataclasses.field(default_factory=list)
  operands: bool = False    # the operands come from elsewhere
  a_head: str = ""          # one-line forms, params left out
  b_head: str = ""


@dataclasses.dataclass
class JaxprDiff:
  a_eqns: int
  b_eqns: int
  inputs: tuple[str, str] | None = None     # (A's binders, B's) when they differ
  outputs: tuple[str, str] | None = None    # (A's outvars, B's) when they differ
  changes: list[EqnChange] = dataclasses.field(default_factory=list)
  # Two jp.Functions' signatures: the lines only A has ("-") and only B has ("+")
  signature: list[tuple[str, str]] | None = None

  @property
  def same(self) -> bool:
    return (self.inputs is None and self.outputs is None and not self.changes
            and not self.signature)

  def counts(self) -> dict[str, int]:
    out = {"added": 0, "removed": 0, "changed": 0}
    for c in self.changes:
      out[c.kind] += 1
    return out


def _open(j):
  return j.jaxpr if isinstance(j, compat.ClosedJaxpr) else j


def diff(a, b, *, texts: tuple[Text, Text] = (None, None), _depth: int = 0) -> JaxprDiff:
  """Structural diff of two (closed) jaxprs; `texts`: where each one's
  jaxpr text is (`text_of` its Module), printed as JAX prints it without."""
  ca = a.consts if isinstance(a, compat.ClosedJaxpr) else None
  cb = b.consts if isinstance(b, compat.ClosedJaxpr) else None
  ja, jb = _open(a), _open(b)
  pa, pb_ = _printer(ja, texts[0]), _printer(jb, texts[1])
  out = JaxprDiff(len(ja.eqns), len(jb.eqns))

  # Inputs: matched by position.
  vmap: dict = {}
  same_inputs = (len(ja.constvars) == len(jb.constvars) and len(ja.invars) == len(jb.invars))
  for xs, ys in ((ja.constvars, jb.constvars), (ja.invars, jb.invars)):
    for x, y in zip(xs, ys):
      vmap[x] = y
      same_inputs &= aval_str(x.aval) == aval_str(y.aval)
  if ca is not None and cb is not None and same_inputs:
    same_inputs = [canon(x) for x in ca] == [canon(y) for y in cb]
  if not same_inputs:
    out.inputs = (" ; ".join(pa.binders), " ; ".join(pb_.binders))

  def same_atom(x, y) -> bool:
    lx, ly = isinstance(x, compat.Literal), isinstance(y, compat.Literal)
    if lx or ly:
      return lx and ly and canon(x.val) == canon(y.val) and aval_str(x.aval) == aval_str(y.aval)
    return vmap.get(x) is y

  def bind(i, j):
    for x, y in zip(ja.eqns[i].outvars, jb.eqns[j].outvars):
      if aval_str(x.aval) == aval_str(y.aval):
        vmap[x] = y

  def compare(i, j) -> EqnChange | None:
    ea, eb = ja.eqns[i], jb.eqns[j]
    operands = not (len(ea.invars) == len(eb.invars)
                    and all(map(same_atom, ea.invars, eb.invars)))
    if ea.primitive.name != eb.primitive.name:  # the params of different primitives don't compare
      return EqnChange("changed", i, j, pa.eqns[i], pb_.eqns[j],
                       [ParamChange("(primitive)", ea.primitive.name, eb.primitive.name)],
                       operands, pa.head(i), pb_.head(j))
    params = []
    for k in sorted(set(ea.params) | set(eb.params)):
      if k not in eb.params:
        params.append(ParamChange(k, _short(ea.params[k], text=pa.param(i, k)), "(none)"))
      elif k not in ea.params:
        params.append(ParamChange(k, "(none)", _short(eb.params[k], text=pb_.param(j, k))))
      else:
        va, vb = ea.params[k], eb.params[k]
        if canon(va) == canon(vb):
          continue
        subs = _sub_jaxprs(k, va, vb)
        if subs is not None and _depth < 20:
          n = len(va) if isinstance(va, (tuple, list)) else 1
          params.append(ParamChange(k, sub=[
              (where, diff(x, y, texts=(pa.sub(i, k, at, n), pb_.sub(j, k, at, n)),
                           _depth=_depth + 1))
              for where, at, x, y in subs]))
        else:
          params.append(ParamChange(k, _short(va, text=pa.param(i, k)),
                                    _short(vb, text=pb_.param(j, k))))
    if not operands and not params and _eqn_key(ea) == _eqn_key(eb):
      return None
    return EqnChange("changed", i, j, pa.eqns[i], pb_.eqns[j], params, operands,
                     pa.head(i), pb_.head(j))

  keys_a = [_eqn_key(e) for e in ja.eqns]
  keys_b = [_eqn_key(e) for e in jb.eqns]
  for tag, i0, i1, j0, j1 in _opcodes(keys_a, keys_b):
    if tag == "equal":
      for i, j in zip(range(i0, i1), range(j0, j1)):
        c = compare(i, j)
        if c is not None:
          out.changes.append(c)
        bind(i, j)
      continue
    # Within a replaced block, pair eqns of the same primitive.
    names_a = [ja.eqns[i].primitive.name for i in range(i0, i1)]
    names_b = [jb.eqns[j].primitive.name for j in range(j0, j1)]
    inner = difflib.SequenceMatcher(None, names_a, names_b, autojunk=False)
    for t, x0, x1, y0, y1 in inner.get_opcodes():
      if t == "equal":
        for i, j in zip(range(i0 + x0, i0 + x1), range(j0 + y0, j0 + y1)):
          c = compare(i, j)
          if c is not None:
            out.changes.append(c)
          bind(i, j)
        continue
      rest_a, rest_b = list(range(i0 + x0, i0 + x1)), list(range(j0 + y0, j0 + y1))
      if t == "replace":
        # Eqns in the same place with the same types: one eqn changed its
        # primitive (sin -> cos), rather than one removed and one added.
        while rest_a and rest_b and _same_types(ja.eqns[rest_a[0]], jb.eqns[rest_b[0]]):
          i, j = rest_a.pop(0), rest_b.pop(0)
          out.changes.append(compare(i, j))
          bind(i, j)
      for i in rest_a:
        out.changes.append(EqnChange("removed", i, None, a_text=pa.eqns[i]))
      for j in rest_b:
        out.changes.append(EqnChange("added", None, j, b_text=pb_.eqns[j]))

  if not (len(ja.outvars) == len(jb.outvars) and all(map(same_atom, ja.outvars, jb.outvars))):
    out.outputs = (pa.outvars(), pb_.outvars())
  return out


def diff_lines(a: list[str], b: list[str]) -> list[tuple[str, str]] | None:
  """[("-", line of A), ("+", line of B)] where the two lists of lines (two
  signatures) differ, in order; None where they are the same."""
  if a == b:
    return None
  out = []
  for tag, i0, i1, j0, j1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
    if tag != "equal":
      out += [("-", x) for x in a[i0:i1]] + [("+", y) for y in b[j0:j1]]
  return out


def _opcodes(a: list, b: list) -> list:
  """difflib's opcodes for the key lists `a` and `b`, their common prefix and
  suffix matched first: SequenceMatcher takes time quadratic in how often a
  key repeats (a chain of 100k sins, cosines and negations against itself
  took 9 minutes), and two versions of one program differ mostly in a part
  in the middle."""
  n = min(len(a), len(b))
  p = 0
  while p < n and a[p] == b[p]:
    p += 1
  q = 0
  while q < n - p and a[len(a) - 1 - q] == b[len(b) - 1 - q]:
    q += 1
  out = [("equal", 0, p, 0, p)] if p else []
  middle = difflib.SequenceMatcher(None, a[p:len(a) - q], b[p:len(b) - q], autojunk=False)
  out.extend((tag, i0 + p, i1 + p, j0 + p, j1 + p) for tag, i0, i1, j0, j1 in middle.get_opcodes())
  if q:
    out.append(("equal", len(a) - q, len(a), len(b) - q, len(b)))
  return out


def _same_types(ea, eb) -> bool:
  k1, k2 = _eqn_key(ea), _eqn_key(eb)
  return k1[1:3] == k2[1:3]


def _sub_jaxprs(name, va, vb):
  """[(label, place in the tuple, a, b)] when both params are (tuples of)
  jaxprs of the same shape."""
  if _is_jaxpr(va) and _is_jaxpr(vb):
    return [(name, 0, va, vb)]
  if (isinstance(va, (tuple, list)) and isinstance(vb, (tuple, list)) and len(va) == len(vb)
      and va and all(map(_is_jaxpr, va)) and all(map(_is_jaxpr, vb))):
    return [(f"{name}[{k}]", k, x, y) for k, (x, y) in enumerate(zip(va, vb))
            if str(x) != str(y)]
  return None


# --- output ---------------------------------------------------------------------

def _indent(text: str, prefix: str) -> list[str]:
  lines = text.splitlines() or [""]
  return [prefix + lines[0]] + [prefix.replace("-", " ").replace("+", " ") + l
                                for l in lines[1:]]


def format_diff(d: JaxprDiff, a_name: str = "a", b_name: str = "b", *,
                indent: str = "", header: bool = True) -> str:
  """The diff as text: `-` removed, `+` added, `~` changed, in the jaxpr text."""
  lines: list[str] = []
  add = lines.append
  if header:
    add(f"{indent}--- {a_name}  ({d.a_eqns} eqns)")
    add(f"{indent}+++ {b_name}  ({d.b_eqns} eqns)")
  if d.signature:
    add(f"{indent}~ signature")
    lines.extend(f"{indent}{sign}   {line}" for sign, line in d.signature)
  if d.inputs is not None:
    add(f"{indent}~ inputs")
    add(f"{indent}-   {d.inputs[0]}")
    add(f"{indent}+   {d.inputs[1]}")
  for c in d.changes:
    if c.kind == "removed":
      add(f"{indent}@@ -eqn {c.a}")
      lines.extend(_indent(c.a_text, f"{indent}-   "))
    elif c.kind == "added":
      add(f"{indent}@@ +eqn {c.b}")
      lines.extend(_indent(c.b_text, f"{indent}+   "))
    else:
      what = []
      if c.operands:
        what.append("operands")
      prim = [p for p in c.params if p.name == "(primitive)"]
      if prim:
        what.append(f"primitive {prim[0].old} -> {prim[0].new}")
      names = [p.name for p in c.params if p.name != "(primitive)"]
      if names:
        what.append("params " + ", ".join(names))
      add(f"{indent}@@ ~eqn {c.a} -> {c.b}: {'; '.join(what) or 'changed'}")
      has_sub = any(p.sub for p in c.params)
      if has_sub:  # the sub-jaxpr diffs say what changed; keep the eqn to one line
        add(f"{indent}-   {c.a_head}")
        add(f"{indent}+   {c.b_head}")
      else:
        lines.extend(_indent(c.a_text, f"{indent}-   "))
        lines.extend(_indent(c.b_text, f"{indent}+   "))
      for p in c.params:
        if p.sub:
          for where, sd in p.sub:
            add(f"{indent}    {where}: {_summary(sd)}")
            sub = format_diff(sd, indent=indent + "      ", header=False)
            if sub:
              add(sub)
        elif p.name != "(primitive)":
          add(f"{indent}    {p.name}: {p.old} -> {p.new}")
  if d.outputs is not None:
    add(f"{indent}~ outputs")
    add(f"{indent}-   {d.outputs[0]}")
    add(f"{indent}+   {d.outputs[1]}")
  if header:
    add(f"{indent}{_summary(d)}")
  return "\n".join(lines)


def _summary(d: JaxprDiff) -> str:
  if d.same:
    return "no differences"
  n = d.counts()
  parts = [f"{n['added']} added", f"{n['removed']} removed", f"{n['changed']} changed"]
  if d.signature:
    parts.append("signature changed")
  if d.inputs is not None:
    parts.append("inputs changed")
  if d.outputs is not None:
    parts.append("outputs changed")
  return "eqns: " + ", ".join(parts)
