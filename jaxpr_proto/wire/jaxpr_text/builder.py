"""jaxpr text -> Module: lark's tree, walked in the order the encoder writes.

Each table of the Module gets its entries in the order the encoder interns
them: a sub-jaxpr when the walk first meets it (a named one at its first
use, not where it is defined), an aval after what it refers to, an eqn's
primitive, literals, params, name stack and result types in that order. So
the text of an encoded program reads back to the same Module, byte for
byte; `seed` lines give a table's entries outright where a Module's are in
another order. Every name the text uses must be defined in it: a mistake
is a TextError at its line and column, and the Module then goes through the
same checks as a .jaxpb's.
"""
from __future__ import annotations

import collections

from google.protobuf import text_format

from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns
from jaxpr_proto.wire.jaxpr_text import names
from jaxpr_proto.wire.jaxpr_text.printer import SEEDABLE
from jaxpr_proto.wire.jaxpr_text.syntax import TextError, error_at
from jaxpr_proto.wire.jaxpr_text.values import Token, Tree, Values, kids, number, text_of

# Sub-jaxprs nested in one another: the decoder's own bound (codec.state.MAX_DEPTH).
MAX_DEPTH = 100


class Builder(Values):
  """One text's Module: its items (`_ITEMS`), definitions and tables, and
  the walk from the root (`build`)."""

  def __init__(self, tree: Tree):
    self.m = pb.Module()
    self.keys: dict[str, dict[bytes, int]] = collections.defaultdict(dict)
    self.defs: dict[str, tuple[str, Tree]] = {}  # name -> ("closed" | "open" | "copy", node)
    self.aliases: dict[str, tuple[str, str]] = {}  # alias -> (kind, registered name)
    self.rules: dict[str, Tree] = {}
    self.rule_index: dict[str, int] = {}
    self.orders: dict[tuple[str, str], list[str]] = {}
    self.jaxpr_index: dict[int, int] = {}  # id(block node) -> index in m.jaxprs
    self.def_index: dict[str, int] = {}  # closed definition -> index in m.closed_jaxprs
    self.depth = 0
    self.root = self.function = None
    self.locs: dict[int, tuple[Token, list]] = {}
    self.contexts: dict[int, tuple[Token, Token]] = {}
    self.seeds: list[tuple[Token, Token]] = []
    self.unknown = None
    for item in kids(tree):
      _ITEMS[item.data](self, item)

  # --- the whole Module ---------------------------------------------------------
  def build(self) -> pb.Module:
    m = self.m
    for table_tok, text in self.seeds:
      self.seed(table_tok, text)
    self.tables()
    if self.root is None:
      raise TextError("the text has no program: a `{ lambda ... }` at the top level")
    if isinstance(self.root, Token):
      m.root = self.closed_name(self.root)
    else:
      m.root = self.closed(self.root)
    if self.function is not None:
      self.signature(self.function)
    for name, (kind, node) in self.defs.items():  # definitions nothing refers to
      if kind == "open":
        self.jaxpr(node)
      elif name not in self.def_index:
        self.closed_name(name)
    for name in self.rules:
      self.rule(name)
    if self.unknown is not None:
      a = pb.Array()
      self.data(self.unknown, a)
      rest = pb.Module()
      try:
        rest.MergeFromString(a.data)
      except Exception as e:  # (protobuf's DecodeError)
        raise error_at(self.unknown, f"bad unknown fields: {e}") from None
      if rest.ListFields():  # (the text itself says what the known fields hold)
        raise error_at(self.unknown, "unknown_fields holds fields of the schema: "
                                     f"{', '.join(f.name for f, _ in rest.ListFields())}")
      m.MergeFrom(rest)
    return m

  def seed(self, table_tok, text_tok):
    table = str(table_tok)
    if table not in SEEDABLE:
      raise error_at(table_tok, f"no table {table!r} can be seeded (only {', '.join(SEEDABLE)})")
    msg = pb.Module()
    try:
      text_format.Parse(names.unquote(text_tok), msg)
    except (text_format.ParseError, RecursionError) as e:
      raise error_at(text_tok, f"a bad seed of {table}: {e}") from None
    entries = getattr(self.m, table)
    if len(entries):
      raise error_at(table_tok, f"{table} seeded twice")
    for e in getattr(msg, table):
      self.keys[table].setdefault(e.SerializeToString(deterministic=True), len(entries))
      entries.append(e)

  def tables(self):
    """Tracebacks (their frames and strings after them), name stack 0 and
    contexts, from the `#loc` and `context` lines."""
    m = self.m
    if not m.name_stacks:
      self.intern("name_stacks", pb.NameStack())
    n = max(self.locs, default=0) + 1
    for k in range(n):
      if k not in self.locs:
        if k:
          raise TextError(f"#loc{k} is not given (#loc1 to #loc{n - 1} are listed in order)")
        m.tracebacks.add()
        continue
      tb = m.tracebacks.add()
      for f in self.locs[k][1]:
        file, line, col, eline, ecol, func = kids(f)
        frame = pb.Frame(file=self.intern("strings", names.unquote(file)),
                         function=self.intern("strings", names.unquote(func)),
                         line=self.int32(line), column=self.int32(col),
                         end_line=self.int32(eline), end_column=self.int32(ecol))
        tb.frames.append(self.intern("frames", frame))
    for k in range(max(self.contexts, default=-1) + 1):
      if k not in self.contexts:
        raise TextError(f"context #ctx{k} is not given (contexts are listed from #ctx0, in order)")
      tok, text = self.contexts[k]
      ctx = m.contexts.add()
      try:
        text_format.Parse(names.unquote(text), ctx)
      except (text_format.ParseError, RecursionError) as e:
        raise error_at(text, f"a bad context: {e}") from None
    if not m.contexts:
      m.contexts.add()

  def intern(self, table: str, x) -> int:
    """The index of `x` (a message, or a str for `strings`) in Module.<table>."""
    key = x.encode() if isinstance(x, str) else x.SerializeToString(deterministic=True)
    seen = self.keys[table]
    i = seen.get(key)
    if i is None:
      i = seen[key] = len(getattr(self.m, table))
      getattr(self.m, table).append(x)
    return i

  @staticmethod
  def int32(tok) -> int:
    v = number(tok)
    if type(v) is not int or not -(1 << 31) <= v < (1 << 31):
      raise error_at(tok, "expected an int32")
    return v

  # --- items --------------------------------------------------------------------
  def _format(self, item):
    tok = item.children[0]
    major, _, minor = str(tok).partition(".")
    if not (major.isdigit() and minor.isdigit() and int(major) < 1 << 32 and int(minor) < 1 << 32):
      raise error_at(tok, "the format is major.minor, such as 1.4")
    self.m.format_version.major, self.m.format_version.minor = int(major), int(minor)

  def _producer(self, item):
    p = self.m.producer
    p.SetInParent()
    fields = {"jaxpr_proto": "jaxpr_proto_version", "jax": "jax_version", "jaxlib": "jaxlib_version"}
    ch = kids(item)
    for k, v in zip(ch[::2], ch[1::2]):
      if str(k) not in fields:
        raise error_at(k, f"producer has {', '.join(fields)}, not {k}")
      setattr(p, fields[str(k)], names.unquote(v))

  def _namespace(self, item):
    ns, version = kids(item)
    self.m.namespaces.add(namespace=text_of(ns), version=names.unquote(version))

  def _features(self, item):
    self.m.required_features.extend(text_of(t) for t in kids(item))

  def _scope(self, item):
    self.m.symbolic_scope.SetInParent()
    self.m.symbolic_scope.constraints.extend(names.unquote(t) for t in kids(item))

  def _alias(self, item):
    kind, name, full = kids(item)
    self.name_free(name)
    self.aliases[str(name)] = (str(kind), text_of(full))

  def _order(self, item):
    prim, *ns = kids(item)
    key = self.prim_key(prim)
    if key in self.orders:
      raise error_at(prim, "the order of this primitive's params is given twice")
    self.orders[key] = [str(n) for n in ns]

  def _let(self, item):
    name, node = kids(item)
    self.name_free(name)
    if node.data == "open_block":
      self.defs[str(name)] = ("open", node.children[0])
    elif node.data == "block":
      self.defs[str(name)] = ("closed", node)
    else:
      self.defs[str(name)] = ("copy", node)

  def _root(self, item):
    if self.root is not None:
      raise error_at(item, "a second program at the top level")
    node = item.children[0]
    if node.data == "open_block":
      raise error_at(node, "the program is a closed jaxpr (no `open`)")
    self.root = node

  def _root_name(self, item):
    if self.root is not None:
      raise error_at(item, "a second program at the top level")
    self.root = item.children[0]

  def _rule(self, item):
    name, node = kids(item)
    self.name_free(name)
    self.rules[str(name)] = node

  def _function(self, item):
    if self.function is not None:
      raise error_at(item, "a second function signature")
    self.function = item.children[0]

  def _loc(self, item):
    ref, *frames = kids(item)
    _define(self.locs, ref, frames)

  def _context(self, item):
    ref, text = kids(item)
    _define(self.contexts, ref, text)

  def _seed(self, item):
    table, text = kids(item)
    self.seeds.append((table, text))

  def _unknown(self, item):
    if self.unknown is not None:
      raise error_at(item, "unknown_fields given twice")
    self.unknown = item.children[0]

  def name_free(self, tok):
    n = str(tok)
    if n in self.defs or n in self.aliases or n in self.rules:
      raise error_at(tok, f"{n} is defined twice")
    if n in names.RESERVED:
      raise error_at(tok, f"{n} is a word of the syntax; choose another name")

  # --- jaxprs -------------------------------------------------------------------
  def closed(self, node, name: str | None = None) -> int:
    """The index in Module.closed_jaxprs of a closed-jaxpr expression: a
    block (a new entry), a definition's name, or `closed(...)`. A new entry
    is numbered before what it holds (as the encoder does), and a definition
    `name` by then: a rule in it may refer back to it."""
    if isinstance(node, Token):
      return self.closed_name(node)
    if node.data == "block":
      i = len(self.m.closed_jaxprs)
      c = self.m.closed_jaxprs.add()
      if name is not None:
        self.def_index[name] = i
      c.jaxpr = self.jaxpr(node)
      c.consts.extend(self.consts(node))
      return i
    if node.data == "bare":
      return self.closed_name(node.children[0])
    if node.data == "call" and self.callee(node) == "closed":
      return self.closed_copy(node, name)
    raise error_at(node, "expected a closed jaxpr: `{ lambda ... }`, a name or closed(...)")

  def closed_name(self, tok) -> int:
    name = str(tok)
    if name in self.def_index:
      return self.def_index[name]
    kind, node = self.defs.get(name, (None, None))
    if kind is None:
      raise error_at(tok, f"{name} is not a defined jaxpr")
    if kind == "open":
      raise error_at(tok, f"{name} is an open jaxpr; a closed one is needed here")
    return self.closed(node, name)

  def closed_copy(self, node, name: str | None = None) -> int:
    args, kw = self.call_args(node, {"consts", "own_jaxpr", "same_vars"})
    if len(args) != 1 or not self.is_bare(args[0]):
      raise error_at(node, "closed(NAME, ...) names the jaxpr it shares")
    i = len(self.m.closed_jaxprs)
    c = self.m.closed_jaxprs.add()
    if name is not None:
      self.def_index[name] = i
    c.jaxpr = self.jaxpr_of(args[0].children[0])
    if "consts" in kw:
      c.consts.extend(self.value(x) for x in self.items(kw["consts"], "tuple"))
    else:
      c.consts.extend(self.consts(self.block_of(args[0].children[0])))
    c.own_jaxpr = self.flag(kw.get("own_jaxpr"))
    c.same_vars = self.flag(kw.get("same_vars"))
    return i

  def block_of(self, tok) -> Tree:
    kind, node = self.defs.get(str(tok), (None, None))
    if kind is None:
      raise error_at(tok, f"{tok} is not a defined jaxpr")
    if kind == "copy":
      args, _ = self.call_args(node, {"consts", "own_jaxpr", "same_vars"})
      if not args or not self.is_bare(args[0]):
        raise error_at(node, "closed(NAME, ...) names the jaxpr it shares")
      if str(args[0].children[0]) == str(tok):
        raise error_at(node, f"{tok} refers to itself")
      return self.block_of(args[0].children[0])
    return node

  def jaxpr_of(self, tok) -> int:
    return self.jaxpr(self.block_of(tok))

  def open_value(self, node) -> int:
    if node.data == "open_block":
      return self.jaxpr(node.children[0])
    if node.data == "open_ref":
      return self.jaxpr_of(node.children[0])
    raise error_at(node, "expected an open jaxpr")

  def consts(self, block: Tree) -> list:
    out = []
    jaxpr = self.m.jaxprs[self.jaxpr_index[id(block)]]
    for k, cv in enumerate(c for c in kids(block) if isinstance(c, Tree) and c.data == "constvar"):
      node = cv.children[2]
      if node is None:
        raise error_at(cv, "a constvar of a closed jaxpr has a value: `a:f32[3] = [1.0, 2.0, 3.0]`")
      out.append(self.const(node, jaxpr.constvars[k].aval))
    return out

  def jaxpr(self, block: Tree) -> int:
    if block.data != "block":
      raise error_at(block, "expected `{ lambda ... }`")
    if id(block) in self.jaxpr_index:
      return self.jaxpr_index[id(block)]
    if self.depth >= MAX_DEPTH:
      raise error_at(block, f"jaxprs nested deeper than {MAX_DEPTH}")
    i = self.jaxpr_index[id(block)] = len(self.m.jaxprs)
    msg = self.m.jaxprs.add()
    self.depth += 1
    try:
      JaxprBuilder(self, msg).build(block)
    finally:
      self.depth -= 1
    return i

class JaxprBuilder:
  """One jaxpr: its variables by name (ids in the order they are defined,
  as the encoder numbers them), its eqns as columns."""

  def __init__(self, b: Builder, msg: pb.Jaxpr):
    self.b, self.msg = b, msg
    self.ids: dict[str, int] = {}
    self.count = 0

  def define(self, tok, drop_ok: bool = False) -> int | None:
    s = str(tok)
    if tok.type == "VARID":
      i = int(s[1:])
      if i >= (1 << 32) - 1:  # (columns hold id + 1, a uint32)
        raise error_at(tok, "a variable id is below 2**32 - 1")
    elif s == "_":
      if not drop_ok:
        raise error_at(tok, "only an eqn's result may be dropped (_)")
      return None
    else:
      if s in self.ids:
        raise error_at(tok, f"{s} is defined twice (a jaxpr defines each variable once)")
      i = self.ids[s] = self.count
    self.count += 1
    return i

  def ref(self, tok) -> int:
    s = str(tok)
    if tok.type == "VARID":
      i = int(s[1:])
      if i >= (1 << 32) - 1:
        raise error_at(tok, "a variable id is below 2**32 - 1")
      return i
    if s not in self.ids:
      raise error_at(tok, f"{s} is not defined before it is used")
    return self.ids[s]

  def build(self, block: Tree):
    b, msg = self.b, self.msg
    parts = kids(block)[1:]
    for node in parts:
      if node.data == "constvar":
        tok, typ, _ = node.children
        i = self.define(tok)
        msg.constvars.add(id=i, aval=b.type(typ))
      elif node.data == "binder":
        tok, typ = node.children
        i = self.define(tok)
        msg.invars.add(id=i, aval=b.type(typ))
      elif node.data == "eqns":
        c = self.eqns(kids(node))
      elif node.data == "outs":
        for x in kids(node):
          self.atom(msg.outvars.add(), x)
      elif node.data == "effects_annot":
        msg.effects.extend(self.effects(node))
      elif node.data == "debug_annot":
        msg.debug_info.CopyFrom(b.debug_fields(Tree("call", [Tree("callee", []), *node.children])))
      elif node.data == "high_annot":
        msg.is_high = True
    form = {a.data for a in parts if a.data in ("columns_annot", "messages_annot")}
    if not form:
      columns.write(msg, c)
    elif form == {"columns_annot"}:  # (as columns.write does from COLUMNS_FROM eqns on)
      out = msg.columns
      out.SetInParent()
      for f in columns._LISTS:
        getattr(out, f).extend(getattr(c, f))
      for k in sorted(c.effects):
        out.effects.add(eqn=k, effects=c.effects[k])
    else:
      msg.eqns.extend(columns._eqn_messages(c))

  def atom(self, out: pb.Atom, node):
    if node.data == "var_ref":
      out.var = self.ref(node.children[0])
    else:
      out.literal.CopyFrom(self.b.literal(node))

  def eqns(self, nodes) -> columns.Columns:
    b = self.b
    c = columns.Columns()
    c.unset = False
    for f in columns._LISTS:
      setattr(c, f, [])
    c.effects = {}
    for k, e in enumerate(nodes):
      ch = kids(e)
      binders = [x for x in ch if isinstance(x, Tree) and x.data == "binder"]
      rest = ch[len(binders):]
      prim_tok, rest = rest[0], rest[1:]
      params = rest[0] if rest and isinstance(rest[0], Tree) and rest[0].data == "params" else None
      rest = rest[1:] if params is not None else rest
      key = b.prim_key(prim_tok)
      c.primitive.append(b.intern("primitives", pb.PrimitiveName(namespace=key[0], name=key[1])))
      ops = [x for x in rest if x.data in ("var_ref", "literal")]
      annots = rest[len(ops):]
      c.operand_count.append(len(ops))
      for x in ops:
        if x.data == "var_ref":
          c.operands.append(self.ref(x.children[0]) + 1)
        else:
          c.operands.append(0)
          c.literals.append(b.literal(x))
      plist = [p.children for p in kids(params)] if params is not None else []
      order = b.orders.get(key)
      if order is not None:
        pos = {n: i for i, n in enumerate(order)}
        plist.sort(key=lambda p: pos.get(str(p[0]), len(pos)))
      c.param_count.append(len(plist))
      for name, v in plist:
        value = b.value(v)
        c.params.append(b.intern("params", pb.Param(name=str(name), value=value)))
      tb = ns = ctx = 0
      for a in annots:
        if a.data == "loc_annot":
          tb = int(str(a.children[0])[4:])
          if tb >= len(b.m.tracebacks):
            raise error_at(a.children[0], f"#loc{tb} is not given")
        elif a.data == "scope_annot":
          stack = pb.NameStack()
          for s in kids(a):
            if isinstance(s, Tree):
              stack.scopes.add(name=text_of(s.children[0]), transform=True)
            else:
              stack.scopes.add(name=text_of(s))
          ns = b.intern("name_stacks", stack)
        elif a.data == "ctx_annot":
          ctx = int(str(a.children[0])[4:])
          if ctx >= len(b.m.contexts):
            raise error_at(a.children[0], f"#ctx{ctx} is not given")
        elif a.data == "effects_annot":
          c.effects[k] = self.effects(a)
      c.traceback.append(tb)
      c.name_stack.append(ns)
      c.context.append(ctx)
      c.result_count.append(len(binders))
      for bd in binders:
        tok, typ = bd.children
        i = self.define(tok, drop_ok=True)
        c.results.append(0 if i is None else i + 1)
        c.result_avals.append(b.type(typ))
    c.n = len(c.primitive)
    return c

  def effects(self, node) -> list:
    b, out = self.b, []
    for x in kids(node):
      if isinstance(x, Token):
        out.append(pb.Effect(name=text_of(x)))
        continue
      e = pb.Effect(name=b.callee(x))
      _, kw = b.call_args(x, {"input", "axis", "value"})
      if "input" in kw:
        v = kw["input"]
        tok = v.children[0] if b.is_bare(v) else v
        if not isinstance(tok, Token) or tok.type not in ("NAME", "VARID"):
          raise error_at(v, "input=VARIABLE")
        e.input_var = self.ref(tok)
      if "axis" in kw:
        e.axis_name = b.str_(kw["axis"])
      if "value" in kw:
        e.value.CopyFrom(b.value(kw["value"]))
      out.append(e)
    return out


_ITEMS = {
    "format_line": Builder._format, "producer_line": Builder._producer,
    "namespace_line": Builder._namespace, "features_line": Builder._features,
    "scope_line": Builder._scope, "alias_line": Builder._alias, "order_line": Builder._order,
    "let_line": Builder._let, "root_line": Builder._root, "root_name_line": Builder._root_name,
    "rule_line": Builder._rule, "function_line": Builder._function, "loc_line": Builder._loc,
    "context_line": Builder._context, "seed_line": Builder._seed,
    "unknown_line": Builder._unknown,
}


def build_module(tree: Tree) -> pb.Module:
  try:
    return Builder(tree).build()
  except RecursionError:
    raise TextError("the text nests too deeply to read") from None


def _define(table: dict, ref, value) -> None:
  """Enters a numbered definition (`#loc3 = ...`, `#ctx0 = ...`) once."""
  k = int(str(ref)[4:])  # (after "#loc" or "#ctx")
  if k in table:
    raise error_at(ref, f"{str(ref)[:4]}{k} given twice")
  table[k] = (ref, value)
