"""Module -> jaxpr text (see docs/text_syntax.md).

The body reads as JAX prints the jaxpr: eqn lines `c:f32[3] = mul a b`,
params in brackets (sorted by name, as JAX sorts them; `params` lines give
the order the file holds them in), sub-jaxprs as nested `{ lambda ... }`
blocks, and a jaxpr used more than once defined on top (`let f = ... in`)
and named where used. What JAX's printout lacks is added so that it parses
back: constants' values, a readable literal for each param, the registered
names of records, enums and the like (`record GatherDimensionNumbers =
jax::lax.slicing.GatherDimensionNumbers`), and source locations, name
stacks and contexts as annotations after an eqn (`loc(#loc3)`, whose
frames are listed at the end, as MLIR lists its locations).
"""
from __future__ import annotations

import base64
import collections

import numpy as np
from google.protobuf import text_format

from jaxpr_proto.errors import EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns, walk
from jaxpr_proto.wire.jaxpr_text import arrays, names
from jaxpr_proto.wire.jaxpr_text.arrays import INLINE_MAX
from jaxpr_proto.wire.jaxpr_text.names import quote, word

WIDTH = 80  # a line up to this long stays one line, as in JAX's printout

ARRAY_KINDS = {pb.ARRAY_KIND_NUMPY_SCALAR: "numpy_scalar", pb.ARRAY_KIND_JAX: "jax",
               pb.ARRAY_KIND_TYPED_NDARRAY: "typed", pb.ARRAY_KIND_TYPED_INT: "py_int",
               pb.ARRAY_KIND_TYPED_FLOAT: "py_float", pb.ARRAY_KIND_TYPED_COMPLEX: "py_complex"}
AXIS_TYPES = {pb.AXIS_TYPE_EXPLICIT: "Explicit", pb.AXIS_TYPE_MANUAL: "Manual",
              pb.AXIS_TYPE_AUTO_UNSPECIFIED: "Auto"}
MEMORY_SPACES = {pb.MEMORY_SPACE_HOST: "host", pb.MEMORY_SPACE_ANY: "any"}
TREE_KINDS = {pb.TREE_NODE_KIND_NAMEDTUPLE: "namedtuple", pb.TREE_NODE_KIND_CUSTOM: "custom_node"}
# Tables a text may give as protobuf text (`seed` lines), for a Module whose
# entries are not in the order that reading the body interns them in.
SEEDABLE = ("primitives", "avals", "params", "name_stacks")


class Unprintable(Exception):
  """Something the syntax has no form for (a hostile Module's)."""


def unknown_fields(m: pb.Module) -> bytes:
  """The bytes of the Module's own fields this schema does not know (a
  newer writer's), as the wire holds them."""
  rest = pb.Module()
  rest.CopyFrom(m)
  for f, _ in rest.ListFields():
    rest.ClearField(f.name)
  return rest.SerializeToString(deterministic=True)


def one_line(msg) -> str:
  return text_format.MessageToString(msg, as_utf8=True, as_one_line=True)


class Printer:

  def __init__(self, m: pb.Module, *, debug_info: bool = True, inline_max: int = INLINE_MAX,
               seeds=()):
    self.m, self.debug, self.inline_max, self.seeds = m, debug_info, inline_max, set(seeds)
    self.vars = names.VarNames()
    self.aliases: dict[tuple[str, str], str] = {}  # (kind, registered name) -> alias
    self.taken: set[str] = set()  # definition and alias names
    self.bare: set[str] = set()  # strs written bare (an alias must not be spelled so)
    self.eqn_cols = [columns.of(j, f"jaxprs[{i}].") for i, j in enumerate(m.jaxprs)]
    self.strs = _params_strs(m)  # (so that `name=layer` stays a str: `jaxpr=layer_jaxpr`)
    self._references()
    self._param_orders()

  # --- what is shared, and named --------------------------------------------
  def _references(self):
    m = self.m
    closed_refs, open_refs = collections.Counter([m.root]), collections.Counter()
    self.rule_refs = collections.Counter()

    def count(v, times=1):
      for kind, i, _ in walk.value_refs(v, ""):
        if kind == "closed_jaxpr":
          closed_refs[i] += times
        elif kind == "jaxpr":
          open_refs[i] += times
        elif kind == "rule":
          self.rule_refs[i] += times

    uses = collections.Counter(i for c in self.eqn_cols for i in c.params)  # (a param is
    for i, p in enumerate(m.params):  # written once, however many eqns hold it)
      if uses[i]:
        count(p.value, uses[i])
    for c in m.closed_jaxprs:
      for v in c.consts:
        count(v)
    for j, cols in zip(m.jaxprs, self.eqn_cols):
      for lit in cols.literals:
        count(lit.value)
      for a in j.outvars:
        if a.HasField("literal"):
          count(a.literal.value)
      for e in j.effects:
        count(e.value)
      for effs in cols.effects.values():
        for e in effs:
          count(e.value)
    for _, _, _, c in walk.rule_jaxprs(m):
      closed_refs[c] += 1
    for r in m.rules:
      if r.HasField("vjp"):
        for t in (r.vjp.out_tree, r.vjp.res_tree):
          for kind, i, _ in walk.treedef_refs(t, ""):
            closed_refs[i] += kind == "closed_jaxpr"
            open_refs[i] += kind == "jaxpr"
    f = m.function
    for t in (f.in_tree, f.out_tree):
      for kind, i, _ in walk.treedef_refs(t, ""):
        closed_refs[i] += kind == "closed_jaxpr"
        open_refs[i] += kind == "jaxpr"
    for s in f.static_leaves:
      count(s.value)

    users = collections.defaultdict(list)  # jaxpr index -> closed entries over it
    for i, c in enumerate(m.closed_jaxprs):
      users[c.jaxpr].append(i)
    self.owner = {j: cs[0] for j, cs in users.items()}  # the entry whose block defines it
    self.closed_name: dict[int, str] = {}
    self.open_name: dict[int, str] = {}
    for i, c in enumerate(m.closed_jaxprs):
      if self.owner.get(c.jaxpr) == i:
        shared = closed_refs[i] != 1 or len(users[c.jaxpr]) > 1 or open_refs[c.jaxpr]
      else:
        shared = closed_refs[i] != 1
      if shared:
        self.closed_name[i] = self._define(self._jaxpr_label(c.jaxpr), "jaxpr")
    for j in range(len(m.jaxprs)):
      if j not in self.owner and open_refs[j] != 1:
        self.open_name[j] = self._define(self._jaxpr_label(j), "jaxpr")
    self.rule_name = {i: self._define(self._rule_label(r), "rule") for i, r in enumerate(m.rules)}

  def _define(self, label: str, kind: str) -> str:
    name, k = label, 1
    if name in self.strs:
      label = name = f"{label}_{kind}"
    while name in self.taken or name in names.RESERVED or name in self.strs:
      k += 1
      name = f"{label}_{k}"
    self.taken.add(name)
    return name

  def _jaxpr_label(self, j: int) -> str:
    if 0 <= j < len(self.m.jaxprs):
      src = self.m.jaxprs[j].debug_info.func_src_info
      if src:
        return names.identifier(src.split(" at ")[0], "jaxpr")
    return "jaxpr"

  @staticmethod
  def _rule_label(r: pb.CustomRule) -> str:
    kind = r.WhichOneof("kind")
    label = {"jvp": lambda: r.jvp.name, "vjp": lambda: r.vjp.bwd_name,
             "lin": lambda: r.lin.name}.get(kind, lambda: "rule")()
    return names.identifier(label, "rule")

  def _param_orders(self):
    """The param names' order of each primitive whose eqns all hold them in
    one order (as JAX's do), where that order is not the names' own."""
    seqs = collections.defaultdict(set)
    for c in self.eqn_cols:
      at = 0
      for k in range(c.n):
        n = c.param_count[k]
        seqs[c.primitive[k]].add(tuple(self.m.params[i].name if 0 <= i < len(self.m.params) else None
                                       for i in c.params[at:at + n]))
        at += n
    self.orders: dict[int, tuple[str, ...]] = {}
    for prim, ss in seqs.items():
      longest = max(ss, key=len)
      if None in longest or len(set(longest)) != len(longest) or list(longest) == sorted(longest):
        continue
      pos = {n: k for k, n in enumerate(longest)}
      if all(all(n in pos for n in s) and [pos[n] for n in s] == sorted(pos[n] for n in s)
             for s in ss):
        self.orders[prim] = longest

  # --- the whole text ---------------------------------------------------------
  def text(self) -> str:
    m = self.m
    body = []
    for j in sorted(self.open_name):
      body.append(f"let {self.open_name[j]} = open {self.block(j, None, 0)} in")
    for i in sorted(self.closed_name):
      if self.owner.get(m.closed_jaxprs[i].jaxpr) == i:
        body.append(f"let {self.closed_name[i]} = {self.block(m.closed_jaxprs[i].jaxpr, i, 0)} in")
    for i in sorted(self.closed_name):
      if self.owner.get(m.closed_jaxprs[i].jaxpr) != i:
        body.append(f"let {self.closed_name[i]} = {self.closed_copy(i, 0)} in")
    if m.root in self.closed_name or not 0 <= m.root < len(m.closed_jaxprs):
      body.append(f"root {self.closed_ref(m.root, 0)}")
    else:
      body.append(self.closed_ref(m.root, 0))
    for i, r in enumerate(m.rules):
      body.append(f"rule {self.rule_name[i]} = {self.rule(r)}")
    if m.HasField("function"):
      body.append(f"function {self.function(m.function)}")
    if self.debug:
      for k, tb in enumerate(m.tracebacks):
        if k or tb.frames:
          body.append(f"#loc{k} = loc({', '.join(self.frame(f) for f in tb.frames)})")
    for k, ctx in enumerate(m.contexts):
      body.append(f"context #ctx{k} = {quote(one_line(ctx))}")
    unknown = unknown_fields(m)
    if unknown:
      body.append(f"unknown_fields base64({quote(base64.b64encode(unknown).decode())})")
    for table in SEEDABLE:
      if table in self.seeds:
        seed = pb.Module()
        getattr(seed, table).extend(getattr(m, table))
        body.append(f"seed {table} {quote(one_line(seed))}")
    return "\n".join(self.header() + body) + "\n"

  def header(self) -> list[str]:
    m, out = self.m, ["// jaxpr-proto text (.jaxpr): docs/text_syntax.md"]
    if m.HasField("format_version"):
      out.append(f"format {m.format_version.major}.{m.format_version.minor}")
    if m.HasField("producer"):
      p = m.producer
      kv = [f"{k}={quote(v)}" for k, v in (("jaxpr_proto", p.jaxpr_proto_version),
                                             ("jax", p.jax_version), ("jaxlib", p.jaxlib_version)) if v]
      out.append(" ".join(["producer", *kv]))
    for ns in m.namespaces:
      out.append(f"namespace {word(ns.namespace)} {quote(ns.version)}")
    if m.required_features:
      out.append(" ".join(["features", *(word(f) for f in m.required_features)]))
    if m.HasField("symbolic_scope"):
      out.append(" ".join(["symbolic_scope", *(quote(c) for c in m.symbolic_scope.constraints)]))
    for (kind, full), alias in self.aliases.items():
      out.append(f"{kind} {alias} = {full if names.QNAME.match(full) else quote(full)}")
    for prim, order in sorted(self.orders.items()):
      out.append(f"params {self.prim(prim)}({', '.join(order)})")
    return out

  # --- jaxprs -------------------------------------------------------------------
  def closed_ref(self, i: int, indent: int) -> str:
    m = self.m
    if i in self.closed_name:
      return self.closed_name[i]
    if not 0 <= i < len(m.closed_jaxprs):
      raise Unprintable(f"closed jaxpr {i} is out of range")
    if self.owner.get(m.closed_jaxprs[i].jaxpr) == i:
      return self.block(m.closed_jaxprs[i].jaxpr, i, indent)
    return self.closed_copy(i, indent)

  def closed_copy(self, i: int, indent: int) -> str:
    """An entry over the jaxpr of another (its owner), which has a name."""
    c = self.m.closed_jaxprs[i]
    first = self.owner[c.jaxpr]
    args = [self.closed_name[first]]
    if list(c.consts) != list(self.m.closed_jaxprs[first].consts):
      args.append(f"consts={self.seq('(', ')', c.consts, indent)}")
    if c.own_jaxpr:
      args.append("own_jaxpr=True")
    if c.same_vars:
      args.append("same_vars=True")
    return f"closed({', '.join(args)})"

  def open_ref(self, j: int, indent: int) -> str:
    if j in self.open_name:
      return self.open_name[j]
    if j in self.owner:
      return f"open({self.closed_name[self.owner[j]]})"
    if not 0 <= j < len(self.m.jaxprs):
      raise Unprintable(f"jaxpr {j} is out of range")
    return "open " + self.block(j, None, indent)

  def block(self, j: int, closed: int | None, indent: int) -> str:
    m = self.m
    msg, c = m.jaxprs[j], self.eqn_cols[j]
    defined = [v.id for v in (*msg.constvars, *msg.invars)] + [x - 1 for x in c.results if x]
    canonical = defined == list(range(len(defined)))
    env: dict[int, str] = {}

    def define(var_id: int) -> str:
      if not canonical:
        return f"%{var_id}"
      env[var_id] = self.vars.next()
      return env[var_id]

    consts = m.closed_jaxprs[closed].consts if closed is not None else None
    if consts is not None and len(consts) != len(msg.constvars):
      raise Unprintable(f"{len(consts)} consts for {len(msg.constvars)} constvars")
    cvs = []
    for k, v in enumerate(msg.constvars):
      s = f"{define(v.id)}:{self.type(v.aval)}"
      if consts is not None:
        s += " = " + self.const(consts[k], v.aval, indent + 4)
      cvs.append(s)
    ivs = [f"{define(v.id)}:{self.type(v.aval)}" for v in msg.invars]
    ref = lambda x: env.get(x, f"%{x}")
    eqns = self.eqns(c, define, ref, indent + 4)
    outs = [self.atom(a, ref, indent + 4) for a in msg.outvars]
    tail = f"in ({outs[0]},)" if len(outs) == 1 else f"in ({', '.join(outs)})"
    annots = []
    if msg.effects:
      annots.append(self.effects(msg.effects, ref, indent + 2))
    if msg.HasField("debug_info") and self.debug:
      annots.append("debug" + self.debug_args(msg.debug_info))
    if msg.is_high:
      annots.append("high")
    in_columns = msg.HasField("columns")
    if in_columns != (c.n >= columns.COLUMNS_FROM):
      annots.append("columns" if in_columns else "messages")
    tail = " ".join([tail, *annots])
    head = "{ lambda " + (" ".join(cvs) + "; " if cvs else "; ") + " ".join(ivs) + ". let"
    if len(eqns) <= 1 and not any("\n" in s for s in (head, tail, *eqns)):
      line = f"{head} {eqns[0] if eqns else ''} {tail} }}"
      if indent + len(line) <= WIDTH or not eqns:
        return line
    pad = " " * (indent + 4)
    lines = [head, *(pad + e for e in eqns), " " * (indent + 2) + tail + " }"]
    return "\n".join(lines)

  def eqns(self, c: columns.Columns, define, ref, indent: int) -> list[str]:
    m, out = self.m, []
    ops = res = pars = lits = 0
    effects = c.effects
    for k in range(c.n):
      nres = c.result_count[k]
      binders = []
      for x, a in zip(c.results[res:res + nres], c.result_avals[res:res + nres]):
        binders.append(f"{define(x - 1) if x else '_'}:{self.type(a)}")
      res += nres
      prim = c.primitive[k]
      params = c.params[pars:pars + c.param_count[k]]
      pars += c.param_count[k]
      operands = []
      for x in c.operands[ops:ops + c.operand_count[k]]:
        if x:
          operands.append(ref(x - 1))
        else:
          operands.append(self.literal(c.literals[lits], indent))
          lits += 1
      ops += c.operand_count[k]
      annots = []
      if self.debug and c.traceback[k]:
        annots.append(f"loc(#loc{c.traceback[k]})")
      if self.debug and c.name_stack[k]:
        annots.append(self.scope(c.name_stack[k]))
      if c.context[k]:
        annots.append(f"ctx(#ctx{c.context[k]})")
      if k in effects:
        annots.append(self.effects(effects[k], ref, indent))
      out.append(self.eqn(binders, prim, params, operands, annots, indent))
    return out

  def eqn(self, binders, prim: int, params, operands, annots, indent: int) -> str:
    head = self.prim(prim)
    lhs = " ".join(binders) + " = " if binders else ""
    args = "".join(" " + s for s in operands)
    notes = "".join(" " + s for s in annots)
    rest = args + notes
    if not params:
      return lhs + head + rest
    if prim in self.orders:
      params = sorted(params, key=lambda i: self.m.params[i].name)
    kv = [self.param(i, indent + 2) for i in params]
    one = f"{lhs}{head}[{' '.join(kv)}]"
    if indent + len(one + args) <= WIDTH and "\n" not in one:  # (as JAX's, less the annotations)
      return one + rest
    pad = " " * (indent + 2)
    return f"{lhs}{head}[\n" + "\n".join(pad + s for s in kv) + "\n" + " " * indent + "]" + rest

  def param(self, i: int, indent: int) -> str:
    if not 0 <= i < len(self.m.params):
      raise Unprintable(f"param {i} is out of range")
    p = self.m.params[i]
    if not names.PLAIN_NAME.match(p.name):
      raise Unprintable(f"param name {p.name!r}")
    return f"{p.name}={self.value(p.value, indent)}"

  def prim(self, i: int) -> str:
    if not 0 <= i < len(self.m.primitives):
      raise Unprintable(f"primitive {i} is out of range")
    p = self.m.primitives[i]
    if p.namespace == "jax" and names.IDENT.match(p.name) and p.name not in names.KEYWORDS:
      return p.name
    full = f"{p.namespace}::{p.name}"
    if names.QNAME.match(full):
      return full
    if p.namespace == "jax" and "::" not in p.name:
      return quote(p.name)
    if "::" in p.namespace:
      raise Unprintable(f"primitive namespace {p.namespace!r}")
    return quote(full)

  def atom(self, a: pb.Atom, ref, indent: int) -> str:
    kind = a.WhichOneof("kind")
    if kind == "var":
      return ref(a.var)
    if kind == "literal":
      return self.literal(a.literal, indent)
    raise Unprintable("an empty operand")

  def literal(self, lit: pb.Literal, indent: int) -> str:
    t = self.type(lit.aval)
    v = lit.value
    if v.HasField("array") and 0 <= lit.aval < len(self.m.avals):
      a, aval = v.array, self.m.avals[lit.aval]
      if (aval.HasField("shaped_array") and not a.shape and not aval.shaped_array.shape
          and a.dtype == aval.shaped_array.dtype and not a.key_impl and not a.HasField("external")):
        if a.kind == pb.ARRAY_KIND_TYPED_NDARRAY and a.dtype in arrays.NUMERIC:
          els = arrays.format_elements(a.data, arrays.NUMERIC[a.dtype], 1)
          if els is not None:
            return f"{els[0]}:{t}"
        if a.kind in arrays.PYTHON_SCALAR:
          s = arrays.python_scalar_text(a.data, a.kind)
          if s is not None:
            return f"py({s}):{t}"
    return f"value({self.value(v, indent)}):{t}"

  def const(self, v: pb.Value, aval_index: int, indent: int) -> str:
    """A constvar's value: its data alone where it is the typed array its
    aval says (as JAX makes consts), else `value(...)`."""
    if v.HasField("array") and 0 <= aval_index < len(self.m.avals):
      a, aval = v.array, self.m.avals[aval_index]
      sa = aval.shaped_array if aval.HasField("shaped_array") else None
      if (sa is not None and a.kind == pb.ARRAY_KIND_TYPED_NDARRAY and a.dtype == sa.dtype
          and a.dtype != pb.DTYPE_KEY and not a.key_impl
          and all(d.HasField("constant") for d in sa.shape)
          and list(a.shape) == [d.constant for d in sa.shape]):
        return self.array_data(a)
    return f"value({self.value(v, indent)})"

  # --- annotations ------------------------------------------------------------
  def frame(self, i: int) -> str:
    m = self.m
    if not 0 <= i < len(m.frames):
      raise Unprintable(f"frame {i} is out of range")
    f = m.frames[i]
    if not (0 <= f.file < len(m.strings) and 0 <= f.function < len(m.strings)):
      raise Unprintable(f"frame {i} names a string out of range")
    return (f"{quote(m.strings[f.file])}:{f.line}:{f.column} to {f.end_line}:{f.end_column}"
            f" in {quote(m.strings[f.function])}")

  def scope(self, i: int) -> str:
    if not 0 <= i < len(self.m.name_stacks):
      raise Unprintable(f"name stack {i} is out of range")
    items = []
    for s in self.m.name_stacks[i].scopes:
      w = s.name if names.IDENT.match(s.name) and s.name not in names.KEYWORDS else quote(s.name)
      items.append(w + "()" if s.transform else w)
    return f"scope({' / '.join(items)})"

  def effects(self, effs, ref, indent: int) -> str:
    out = []
    for e in effs:
      name = e.name if (names.QNAME.match(e.name) or names.IDENT.match(e.name)) \
          and e.name not in names.RESERVED else quote(e.name)
      kw = []
      if e.HasField("input_var"):
        kw.append(f"input={ref(e.input_var)}")
      if e.axis_name:
        kw.append(f"axis={quote(e.axis_name)}")
      if e.HasField("value"):
        kw.append(f"value={self.value(e.value, indent)}")
      out.append(f"{name}({', '.join(kw)})" if kw else name)
    return f"effects({', '.join(out)})"

  def debug_args(self, d: pb.DebugInfo) -> str:
    args = [quote(d.traced_for), quote(d.func_src_info)]
    for key, field in (("args", "arg_names"), ("results", "result_paths")):
      if d.HasField(field):
        o = getattr(d, field)
        missing = set(o.missing)
        if any(o.values[k] for k in missing if k < len(o.values)) or any(k >= len(o.values) for k in missing):
          raise Unprintable("a missing debug name with a value")
        items = ["None" if k in missing else quote(s) for k, s in enumerate(o.values)]
        args.append(f"{key}=({items[0]},)" if len(items) == 1 else f"{key}=({', '.join(items)})")
    return f"({', '.join(args)})"

  # --- types -------------------------------------------------------------------
  def type(self, i: int) -> str:
    if not 0 <= i < len(self.m.avals):
      raise Unprintable(f"aval {i} is out of range")
    return self.aval(self.m.avals[i])

  def aval(self, a: pb.Aval) -> str:
    kind = a.WhichOneof("kind")
    if kind == "token":
      return "Tok"
    if kind == "ref":
      r = a.ref
      inner = self.type(r.inner)
      none = lambda f: r.HasField(f) and getattr(r, f).WhichOneof("kind") == "none"
      if none("memory_space") and none("kind"):
        return f"Ref{{{inner}}}"
      kw = [f"{f}={self.value(getattr(r, f), 0)}" for f in ("memory_space", "kind") if r.HasField(f)]
      return f"Ref({', '.join([inner, *kw])})"
    if kind != "shaped_array":
      raise Unprintable("an empty aval")
    s = a.shaped_array
    head = self.dtype_head(s.dtype, s.key_impl)
    if s.memory_space:
      head += f"<{MEMORY_SPACES.get(s.memory_space, s.memory_space)}>"
    dims = ",".join(str(d.constant) if d.HasField("constant") else
                    word(d.symbolic) if d.HasField("symbolic") else "?" for d in s.shape)
    if "?" in dims.split(","):
      raise Unprintable("an empty dim")
    annots = []
    if s.weak_type:
      annots.append("weak")
    for key, axes in (("V", s.varying), ("U", s.unreduced), ("R", s.reduced)):
      if axes:
        annots.append(f"{key}:{self.axes(axes)}")
    if s.HasField("sharding"):
      annots.append(f"sharding={self.named_sharding(s.sharding)}")
    return f"{head}[{dims}]" + (f"{{{', '.join(annots)}}}" if annots else "")

  def dtype_head(self, dtype: int, key_impl: str) -> str:
    if dtype == pb.DTYPE_KEY:
      return f"key<{word(key_impl) if key_impl else quote('')}>"
    short = names.short_dtype(dtype)
    if short is None or key_impl:
      raise Unprintable(f"dtype {dtype}")
    return short

  def type_value(self, i: int) -> str:
    """A type where a value is read: `aval(Tok)` for one that is not an
    array's (a bare word there is a str)."""
    t = self.type(i)
    return t if self.m.avals[i].HasField("shaped_array") else f"aval({t})"

  @staticmethod
  def axes(axes) -> str:
    ws = [word(a) for a in axes]
    return ws[0] if len(ws) == 1 else f"({', '.join(ws)})"

  # --- values ------------------------------------------------------------------
  def seq(self, open_: str, close: str, items, indent: int, one_comma: bool = False) -> str:
    parts = [self.value(v, indent + 2) for v in items]
    if one_comma and len(parts) == 1:
      return f"{open_}{parts[0]},{close}"
    if any("\n" in p for p in parts):
      pad = " " * (indent + 2)
      return open_ + "\n" + ",\n".join(pad + p for p in parts) + "\n" + " " * indent + close
    return open_ + ", ".join(parts) + close

  def value(self, v: pb.Value, indent: int) -> str:
    kind = v.WhichOneof("kind")
    try:
      return _VALUES[kind](self, v, indent) if kind is not None else f"proto({quote('')})"
    except Unprintable:
      if kind in ("jaxpr", "closed_jaxpr", "rule"):
        raise
      return f"proto({quote(one_line(v))})"

  def alias(self, kind: str, full: str) -> str:
    key = (kind, full)
    if key not in self.aliases:
      label = full.split("::")[-1].split(".")[-1]
      label = label if names.PLAIN_NAME.match(label) else names.identifier(label, kind)
      name, k = label, 1
      while name in self.taken or name in names.RESERVED or name in self.bare:
        k += 1
        name = f"{label}_{k}"
      self.taken.add(name)
      self.aliases[key] = name
    return self.aliases[key]

  def str_(self, s: str) -> str:
    w = word(s, self.taken)
    if w == s:
      self.bare.add(s)
    return w

  def array_data(self, a: pb.Array) -> str:
    if a.HasField("external"):
      if a.data:
        raise Unprintable("an array with data both inside and outside")
      x = a.external
      return (f"external({quote(x.location)}, offset={x.offset}, length={x.length}, "
              f"sha256={quote(x.sha256.hex())})")
    n = 1
    for d in a.shape:
      n *= d
    els = None
    if a.kind in arrays.PYTHON_SCALAR:
      s = arrays.python_scalar_text(a.data, a.kind)
      els = None if s is None else [s]
    elif a.dtype in arrays.NUMERIC and 0 <= n <= self.inline_max:
      els = arrays.format_elements(a.data, arrays.NUMERIC[a.dtype], n)
    if els is not None:
      return f"[{', '.join(els)}]"
    return f"base64({quote(base64.b64encode(a.data).decode())})"

  def array(self, v, indent):
    a = v.array
    if (a.kind == pb.ARRAY_KIND_NUMPY_SCALAR and not a.shape and a.dtype in arrays.NUMERIC
        and not a.key_impl and not a.HasField("external")):
      els = arrays.format_elements(a.data, arrays.NUMERIC[a.dtype], 1)
      if els is not None:
        return f"np.{names.DTYPE_BY_NUM[a.dtype]}({els[0]})"
    t = f"{self.dtype_head(a.dtype, a.key_impl)}[{','.join(str(d) for d in a.shape)}]"
    kind = "" if a.kind == pb.ARRAY_KIND_NUMPY_UNSPECIFIED else f", kind={ARRAY_KINDS.get(a.kind, a.kind)}"
    return f"array({t}, {self.array_data(a)}{kind})"

  def dtype(self, v, indent):
    d = v.dtype
    if d.dtype == pb.DTYPE_KEY:
      head = self.dtype_head(d.dtype, d.key_impl)
    else:
      head = names.DTYPE_BY_NUM.get(d.dtype)
      if head is None or d.key_impl:
        raise Unprintable(f"dtype {d.dtype}")
    if d.jnp_scalar_type and d.numpy_scalar_type:
      raise Unprintable("a dtype both jnp's and numpy's scalar type")
    if d.jnp_scalar_type or d.numpy_scalar_type:
      if d.dtype == pb.DTYPE_KEY:
        raise Unprintable("a key scalar type")
      return ("jnp." if d.jnp_scalar_type else "np.") + head
    return head

  def treedef(self, t: pb.TreeDef, indent: int) -> str:
    if not t.HasField("root"):
      return "PyTreeDef()"
    return f"PyTreeDef({self.tree_node(t.root, indent, 0)})"

  def tree_node(self, n: pb.TreeNode, indent: int, depth: int) -> str:
    if depth > walk.MAX_VALUE_DEPTH:
      raise Unprintable("a pytree nested too deeply")
    kids = [self.tree_node(c, indent, depth + 1) for c in n.children]
    kind = n.kind
    plain = not n.keys and not n.type and not n.HasField("aux")
    if kind == pb.TREE_NODE_KIND_LEAF_UNSPECIFIED and plain and not kids:
      return "*"
    if kind == pb.TREE_NODE_KIND_NONE and plain and not kids:
      return "None"
    if kind == pb.TREE_NODE_KIND_TUPLE and plain:
      return f"({kids[0]},)" if len(kids) == 1 else f"({', '.join(kids)})"
    if kind == pb.TREE_NODE_KIND_LIST and plain:
      return f"[{', '.join(kids)}]"
    if kind == pb.TREE_NODE_KIND_DICT and not n.type and not n.HasField("aux") \
        and len(n.keys) == len(kids):
      items = [f"{self.value(k, indent)}: {c}" for k, c in zip(n.keys, kids)]
      return f"{{{', '.join(items)}}}"
    if kind in TREE_KINDS and not n.keys and (kind == pb.TREE_NODE_KIND_CUSTOM or not n.HasField("aux")):
      args = list(kids)
      if n.HasField("aux"):
        args.append(f"aux={self.value(n.aux, indent)}")
      return f"{self.alias(TREE_KINDS[kind], n.type)}({', '.join(args)})"
    raise Unprintable("a pytree node of fields its kind does not have")

  def mesh(self, m: pb.Mesh) -> str:
    args = []
    for a in m.axes:
      t = "" if a.type == pb.AXIS_TYPE_AUTO_UNSPECIFIED else f", {AXIS_TYPES.get(a.type, a.type)}"
      args.append(f"({quote(a.name)}, {a.size}{t})")
    if m.concrete:
      args.append("concrete=True")
    if m.device_ids:
      ids = [str(i) for i in m.device_ids]
      args.append(f"device_ids=({ids[0]},)" if len(ids) == 1 else f"device_ids=({', '.join(ids)})")
    if m.HasField("abstract_device"):
      d = m.abstract_device
      kw = [quote(d.device_kind)]
      if d.HasField("num_cores"):
        kw.append(f"num_cores={d.num_cores}")
      if d.platform:
        kw.append(f"platform={quote(d.platform)}")
      args.append(f"device=AbstractDevice({', '.join(kw)})")
    return f"Mesh({', '.join(args)})"

  def spec(self, p: pb.PartitionSpec) -> str:
    args = []
    for e in p.entries:
      kind = e.WhichOneof("kind")
      if kind == "none" and e.none:
        args.append("None")
      elif kind == "unconstrained" and e.unconstrained:
        args.append("UNCONSTRAINED")
      elif kind == "axes":
        ns = [quote(n) for n in e.axes.names]
        args.append(ns[0] if len(ns) == 1 else f"({', '.join(ns)})")
      else:
        raise Unprintable("a partition spec entry of no kind")
    for key in ("unreduced", "reduced"):
      xs = getattr(p, key)
      if xs:
        ns = [quote(n) for n in xs]
        args.append(f"{key}=({ns[0]},)" if len(ns) == 1 else f"{key}=({', '.join(ns)})")
    if p.unreduced_kind:
      args.append(f"unreduced_kind={quote(p.unreduced_kind)}")
    return f"P({', '.join(args)})"

  def named_sharding(self, s: pb.NamedSharding) -> str:
    args = []
    if s.HasField("mesh"):
      args.append(f"mesh={self.mesh(s.mesh)}")
    if s.HasField("spec"):
      args.append(f"spec={self.spec(s.spec)}")
    if s.HasField("memory_kind"):
      args.append(f"memory_kind={quote(s.memory_kind)}")
    return f"NamedSharding({', '.join(args)})"

  def fields(self, fields, indent: int) -> list[str]:
    out = []
    for f in fields:
      if not names.PLAIN_NAME.match(f.name) or f.name == "open":  # (a value may start with open)
        raise Unprintable(f"a field named {f.name!r}")
      out.append(f"{f.name}={self.value(f.value, indent)}")
    return out

  def call(self, callee: str, args: list[str], indent: int) -> str:
    one = f"{callee}({', '.join(args)})"
    if "\n" not in one:
      return one
    pad = " " * (indent + 2)
    return f"{callee}(\n" + ",\n".join(pad + a for a in args) + "\n" + " " * indent + ")"

  # --- rules and the function's signature ------------------------------------
  def rule(self, r: pb.CustomRule) -> str:
    kind = r.WhichOneof("kind")
    if kind is None:
      return "empty_rule()"
    msg = getattr(r, kind)
    args = []
    if kind == "jvp":
      args.append(f"name={quote(msg.name)}")
      if msg.HasField("debug_info"):
        args.append("debug=debug" + self.debug_args(msg.debug_info))
      if msg.trace_error:
        args.append(f"trace_error={quote(msg.trace_error)}")
      if msg.out_zeros:
        zs = [str(z) for z in msg.out_zeros]
        args.append(f"out_zeros=({zs[0]},)" if len(zs) == 1 else f"out_zeros=({', '.join(zs)})")
      if not msg.trace_error or msg.jvp:
        args.append(f"jvp={self.closed_ref(msg.jvp, 2)}")
      return self.call("custom_jvp", args, 0)
    if kind == "vjp":
      args.append(f"fwd_name={quote(msg.fwd_name)}")
      args.append(f"bwd_name={quote(msg.bwd_name)}")
      for key in ("fwd_debug_info", "bwd_debug_info"):
        if msg.HasField(key):
          args.append(f"{key[:3]}_debug=debug" + self.debug_args(getattr(msg, key)))
      if msg.trace_error:
        args.append(f"trace_error={quote(msg.trace_error)}")
      for key in ("out_tree", "res_tree"):
        if msg.HasField(key):
          args.append(f"{key}={self.treedef(getattr(msg, key), 2)}")
      if msg.input_fwds:
        fs = [str(f) for f in msg.input_fwds]
        args.append(f"input_fwds=({fs[0]},)" if len(fs) == 1 else f"input_fwds=({', '.join(fs)})")
      if msg.closed_over_inputs:
        args.append(f"closed_over_inputs={msg.closed_over_inputs}")
      for key in ("fwd", "bwd"):
        if not msg.trace_error or getattr(msg, key):
          args.append(f"{key}={self.closed_ref(getattr(msg, key), 2)}")
      return self.call("custom_vjp", args, 0)
    args.append(f"name={quote(msg.name)}")
    if msg.HasField("debug_info"):
      args.append("debug=debug" + self.debug_args(msg.debug_info))
    args.append(f"bwd={self.closed_ref(msg.bwd, 2)}")
    return self.call("custom_lin", args, 0)

  def function(self, f: pb.FunctionSignature) -> str:
    args = []
    for key in ("in_tree", "out_tree"):
      if f.HasField(key):
        args.append(f"{key}={self.treedef(getattr(f, key), 2)}")
    for key in ("in_avals", "out_avals"):
      ts = [self.type_value(a) for a in getattr(f, key)]
      args.append(f"{key}=({ts[0]},)" if len(ts) == 1 else f"{key}=({', '.join(ts)})")
    if f.static_leaves:
      items = [f"{s.index}: {self.value(s.value, 2)}" for s in f.static_leaves]
      args.append(f"static_leaves={{{', '.join(items)}}}")
    callee = f.name if names.PLAIN_NAME.match(f.name) and f.name not in names.RESERVED else quote(f.name)
    return self.call(callee, args, 0)


def _params_strs(m: pb.Module) -> set[str]:
  """The strs the params hold (the names of functions, mostly)."""
  out, stack = set(), [p.value for p in m.params]
  while stack:
    v = stack.pop()
    kind = v.WhichOneof("kind")
    if kind == "str":
      out.add(v.str)
    elif kind in ("tuple", "list", "frozenset"):
      stack.extend(getattr(v, kind).items)
    elif kind == "dict":
      stack.extend(x for e in v.dict.entries for x in (e.key, e.value))
    elif kind in ("record", "extension"):
      stack.extend(f.value for f in getattr(v, kind).fields)
  return out


def _float(p, v, indent):
  return arrays.element_text(np.float64(v.float), np.dtype("<f8"))


def _big_int(p, v, indent):
  s = v.big_int
  try:
    n = int(s)
  except ValueError:
    n = None
  if n is not None and str(n) == s and not -(1 << 63) <= n < (1 << 63):
    return s
  return f"big_int({quote(s)})"


def _enum(p, v, indent):
  alias = p.alias("enum", v.enum.type)
  m = v.enum.member
  return f"{alias}.{m}" if names.PLAIN_NAME.match(m) else f"{alias}({quote(m)})"


def _frozenset(p, v, indent):
  if not v.frozenset.items:
    return "frozenset()"
  return f"frozenset({p.seq('{', '}', v.frozenset.items, indent)})"


def _dict(p, v, indent):
  items = [f"{p.value(e.key, indent + 2)}: {p.value(e.value, indent + 2)}" for e in v.dict.entries]
  if any("\n" in s for s in items):
    pad = " " * (indent + 2)
    return "{\n" + ",\n".join(pad + s for s in items) + "\n" + " " * indent + "}"
  return "{" + ", ".join(items) + "}"


def _aval(p, v, indent):
  return p.type_value(v.aval)


def _traceback(p, v, indent):
  if not v.traceback or not p.debug:
    return "traceback(None)"
  return f"traceback(#loc{v.traceback})"


def _rule(p, v, indent):
  if v.rule not in p.rule_name:
    raise Unprintable(f"rule {v.rule} is out of range")
  return p.rule_name[v.rule]


_VALUES = {
    "none": lambda p, v, i: "None",
    "bool": lambda p, v, i: "True" if v.bool else "False",
    "int": lambda p, v, i: str(v.int),
    "float": _float,
    "complex": lambda p, v, i: f"complex({_float(p, pb.Value(float=v.complex.real), i)}, "
                               f"{_float(p, pb.Value(float=v.complex.imag), i)})",
    "str": lambda p, v, i: p.str_(v.str),
    "bytes": lambda p, v, i: repr(v.bytes),
    "dtype": Printer.dtype,
    "array": Printer.array,
    "tuple": lambda p, v, i: p.seq("(", ")", v.tuple.items, i, one_comma=True),
    "list": lambda p, v, i: p.seq("[", "]", v.list.items, i),
    "dict": _dict,
    "jaxpr": lambda p, v, i: p.open_ref(v.jaxpr, i),
    "closed_jaxpr": lambda p, v, i: p.closed_ref(v.closed_jaxpr, i),
    "enum": _enum,
    "record": lambda p, v, i: p.call(p.alias("record", v.record.type), p.fields(v.record.fields, i + 2), i),
    "treedef": lambda p, v, i: p.treedef(v.treedef, i),
    "mesh": lambda p, v, i: p.mesh(v.mesh),
    "partition_spec": lambda p, v, i: p.spec(v.partition_spec),
    "named_sharding": lambda p, v, i: p.named_sharding(v.named_sharding),
    "primitive": lambda p, v, i: f"primitive({p.prim(v.primitive.index)})",
    "rule": _rule,
    "aval": _aval,
    "frozenset": _frozenset,
    "big_int": _big_int,
    "extension": lambda p, v, i: p.call(p.alias("extension", v.extension.codec),
                                        p.fields(v.extension.fields, i + 2), i),
    "singleton": lambda p, v, i: p.alias("singleton", v.singleton),
    "symbolic_dim": lambda p, v, i: f"dim({quote(v.symbolic_dim)})",
    "traceback": _traceback,
    "function": lambda p, v, i: f"function({quote(v.function)})",
}


def print_module(m: pb.Module, *, debug_info: bool = True, inline_max: int = INLINE_MAX,
                 seeds=()) -> str:
  """The text of `m`; EncodeError for a Module the syntax has no form for."""
  try:
    return Printer(m, debug_info=debug_info, inline_max=inline_max, seeds=seeds).text()
  except Unprintable as e:
    raise EncodeError(f"this Module has no jaxpr text: {e}") from None
