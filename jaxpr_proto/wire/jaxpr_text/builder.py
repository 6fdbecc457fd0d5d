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

import base64
import binascii
import collections
import math
import re

import lark
from google.protobuf import text_format

from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns
from jaxpr_proto.wire.jaxpr_text import arrays, names
from jaxpr_proto.wire.jaxpr_text.printer import (ARRAY_KINDS, AXIS_TYPES, MEMORY_SPACES,
                                                 SEEDABLE, TREE_KINDS)
from jaxpr_proto.wire.jaxpr_text.syntax import TextError, error_at

Tree, Token = lark.Tree, lark.Token

_ARRAY_KIND = {v: k for k, v in ARRAY_KINDS.items()}
_AXIS_TYPE = {v: k for k, v in AXIS_TYPES.items()}
_MEMORY_SPACE = {v: k for k, v in MEMORY_SPACES.items()}
_TREE_KIND = {v: k for k, v in TREE_KINDS.items()}
_INT = re.compile(r"-?(?:0x[0-9a-fA-F]+|\d+)\Z")
# Sub-jaxprs nested in one another: the decoder's own bound (codec.state.MAX_DEPTH).
MAX_DEPTH = 100


def kids(t: Tree) -> list:
  """A node's children, less lark's placeholders for what was left out."""
  return [c for c in t.children if c is not None]


def text_of(tok) -> str:
  """A NAME, QNAME or STRING token's text."""
  return names.unquote(tok) if tok.type == "STRING" else str(tok)


def number(tok) -> int | float:
  s = str(tok)
  try:
    if _INT.match(s):
      if "x" in s:
        return (-1 if s[0] == "-" else 1) * int(s.lstrip("-")[2:], 16)
      return int(s, 10)
    return float(s)
  except ValueError as e:  # (Python reads ints of up to 4,300 digits)
    raise error_at(tok, f"a number Python does not read: {e}") from None


class Builder:

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
    k = int(str(ref)[4:])
    if k in self.locs:
      raise error_at(ref, f"#loc{k} given twice")
    self.locs[k] = (ref, frames)

  def _context(self, item):
    ref, text = kids(item)
    k = int(str(ref)[4:])
    if k in self.contexts:
      raise error_at(ref, f"#ctx{k} given twice")
    self.contexts[k] = (ref, text)

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

  # --- types --------------------------------------------------------------------
  def type(self, node) -> int:
    return self.intern("avals", self.aval(node))

  def aval(self, node) -> pb.Aval:
    if isinstance(node, Token) or node.data in ("bare",):
      tok = node if isinstance(node, Token) else node.children[0]
      if str(tok) == "Tok":
        return pb.Aval(token=pb.AbstractToken())
      raise error_at(tok, f"{tok} is not a type")
    kind = node.data
    if kind == "bare_type":
      name, *angles = kids(node)
      if str(name) == "Tok" and not angles:
        return pb.Aval(token=pb.AbstractToken())
      raise error_at(node, f"{name}<...> is a dtype; a type has a shape: {name}<...>[...]")
    if kind == "ref_type":
      name, inner = kids(node)
      if str(name) != "Ref":
        raise error_at(name, "expected Ref{...}")
      return pb.Aval(ref=pb.AbstractRef(inner=self.type(inner), memory_space=pb.Value(none=pb.NoneValue()),
                                        kind=pb.Value(none=pb.NoneValue())))
    if kind == "call_type":
      return self.aval(node.children[0])
    if kind == "call":
      callee = self.callee(node)
      if callee == "proto":
        return self.proto(node, pb.Aval)
      if callee == "aval":
        args, _ = self.call_args(node, set())
        if len(args) != 1:
          raise error_at(node, "aval(TYPE)")
        return self.aval(args[0])
      if callee == "Ref":
        args, kw = self.call_args(node, {"memory_space", "kind"})
        if len(args) != 1:
          raise error_at(node, "Ref(TYPE, memory_space=..., kind=...)")
        r = pb.AbstractRef(inner=self.type(args[0]))
        for f in ("memory_space", "kind"):
          if f in kw:
            getattr(r, f).CopyFrom(self.value(kw[f]))
        return pb.Aval(ref=r)
      raise error_at(node, f"{callee}(...) is not a type")
    if kind != "shaped":
      raise error_at(node, "expected a type, such as f32[3]")
    name, *rest = node.children
    angles = [c for c in rest if isinstance(c, Tree) and c.data == "angle"]
    dims, annots = rest[len(angles)], rest[len(angles) + 1]
    s = pb.ShapedArray()
    s.dtype, s.key_impl, angles = self.dtype_head(name, angles)
    if angles:
      ms = text_of(angles[0].children[0])
      if ms not in _MEMORY_SPACE and not (ms.isdigit() and int(ms) < 1 << 31):
        raise error_at(angles[0], f"memory space {ms!r} (host or any)")
      s.memory_space = _MEMORY_SPACE[ms] if ms in _MEMORY_SPACE else int(ms)
      if len(angles) > 1:
        raise error_at(angles[1], "one memory space")
    for d in kids(dims) if dims is not None else ():
      if d.type == "NUMBER":
        v = number(d)
        if type(v) is not int or not -(1 << 63) <= v < (1 << 63):
          raise error_at(d, "a dimension is an int64 or a symbolic expression")
        s.shape.add(constant=v)
      else:
        s.shape.add(symbolic=text_of(d))
    for a in kids(annots) if annots is not None else ():
      key = str(a.children[0])
      if a.data == "flag" and key == "weak":
        s.weak_type = True
      elif a.data == "axes_annot" and key in ("V", "U", "R"):
        field = {"V": "varying", "U": "unreduced", "R": "reduced"}[key]
        ax = a.children[1]
        getattr(s, field).extend(text_of(t) for t in (kids(ax) if isinstance(ax, Tree) else [ax]))
      elif a.data == "keyed" and key == "sharding":
        s.sharding.CopyFrom(self.named_sharding(a.children[1]))
      else:
        raise error_at(a, "a type's annotations are weak, V:, U:, R: and sharding=")
    return pb.Aval(shaped_array=s)

  def dtype_head(self, name, angles) -> tuple[int, str, list]:
    """(dtype, key impl, the angles left) of `f32` or `key<impl>`."""
    n = str(name)
    if n == "key":
      if not angles:
        raise error_at(name, "key<impl>")
      return pb.DTYPE_KEY, text_of(angles[0].children[0]), angles[1:]
    if n not in names.SHORT_DTYPES:
      raise error_at(name, f"unknown dtype {n}")
    return names.SHORT_DTYPES[n], "", angles

  # --- values -------------------------------------------------------------------
  def value(self, node) -> pb.Value:
    if isinstance(node, Token):
      return self.token_value(node)
    kind = node.data
    f = _VALUE_NODES.get(kind)
    if f is None:
      raise error_at(node, "expected a value")
    return f(self, node)

  def token_value(self, tok) -> pb.Value:
    t = tok.type
    if t == "NUMBER":
      v = number(tok)
      if type(v) is int:
        return pb.Value(int=v) if -(1 << 63) <= v < (1 << 63) else pb.Value(big_int=str(v))
      return pb.Value(float=v)
    if t == "NEG_SPECIAL":
      return pb.Value(float=float(str(tok)))
    if t == "STRING":
      return pb.Value(str=names.unquote(tok))
    if t == "BYTES":
      return pb.Value(bytes=names.unquote(tok))
    if t == "NAME":
      return self.bare_value(tok)
    raise error_at(tok, "expected a value")

  def bare_value(self, tok) -> pb.Value:
    n = str(tok)
    if n in names.CONSTANTS:
      c = names.CONSTANTS[n]
      return pb.Value(none=pb.NoneValue()) if c is None else pb.Value(bool=c)
    if n in ("inf", "nan"):
      return pb.Value(float=float(n))
    if n in names.DTYPE_NAMES:
      return pb.Value(dtype=pb.DtypeValue(dtype=names.DTYPE_NAMES[n]))
    if n in self.aliases:
      kind, full = self.aliases[n]
      if kind != "singleton":
        raise error_at(tok, f"{n} is a {kind}; see docs/text_syntax.md for how to write one")
      return pb.Value(singleton=full)
    if n in self.defs:
      if self.defs[n][0] == "open":
        return pb.Value(jaxpr=self.jaxpr(self.defs[n][1]))
      return pb.Value(closed_jaxpr=self.closed_name(tok))
    if n in self.rules:
      return pb.Value(rule=self.rule(n))
    return pb.Value(str=n)

  def dotted(self, node) -> pb.Value:
    first, *rest = [str(t) for t in kids(node)]
    if first in ("np", "jnp") and len(rest) == 1 and rest[0] in names.DTYPE_NAMES:
      d = pb.DtypeValue(dtype=names.DTYPE_NAMES[rest[0]])
      if first == "np":
        d.numpy_scalar_type = True
      else:
        d.jnp_scalar_type = True
      return pb.Value(dtype=d)
    if first in self.aliases and self.aliases[first][0] == "enum" and len(rest) == 1:
      return pb.Value(enum=pb.EnumValue(type=self.aliases[first][1], member=rest[0]))
    raise error_at(node, f"{'.'.join([first, *rest])}: not an enum member (of a type named "
                         "by an `enum` line) or np./jnp. dtype")

  def items(self, node, kind: str) -> list:
    if not isinstance(node, Tree) or node.data != kind:
      raise error_at(node, f"expected a {kind}")
    return kids(node)

  def seq(self, node) -> pb.Value:
    out = pb.Value()
    getattr(out, node.data).SetInParent()
    getattr(out, node.data).items.extend(self.value(x) for x in kids(node))
    return out

  def dict_(self, node) -> pb.Value:
    out = pb.Value(dict=pb.Dict())
    for e in kids(node):
      k, v = e.children
      out.dict.entries.add(key=self.value(k), value=self.value(v))
    return out

  def set_(self, node) -> pb.Value:
    out = pb.Value(frozenset=pb.ValueList())
    out.frozenset.items.extend(self.value(x) for x in kids(node))
    return out

  def shaped_value(self, node) -> pb.Value:
    return pb.Value(aval=self.type(node))

  def bare_type_value(self, node) -> pb.Value:
    name, *angles = kids(node)
    dtype, impl, rest = self.dtype_head(name, angles)
    if rest or dtype != pb.DTYPE_KEY:
      raise error_at(node, "key<impl> is the one dtype written with <...>")
    return pb.Value(dtype=pb.DtypeValue(dtype=dtype, key_impl=impl))

  def block_value(self, node) -> pb.Value:
    return pb.Value(closed_jaxpr=self.closed(node))

  def open_value_node(self, node) -> pb.Value:
    return pb.Value(jaxpr=self.open_value(node))

  @staticmethod
  def is_bare(node) -> bool:
    return isinstance(node, Tree) and node.data == "bare"

  def callee(self, node) -> str:
    c = node.children[0]
    toks = kids(c)
    if not toks:
      return "debug"  # (a block's debug annotation, read as a call)
    return ".".join(str(t) for t in toks) if len(toks) > 1 else text_of(toks[0])

  def call_args(self, node, allowed) -> tuple[list, dict]:
    args, kw = [], {}
    for a in kids(node)[1:]:
      if isinstance(a, Tree) and a.data == "kwarg":
        k, v = a.children
        if str(k) not in allowed:
          raise error_at(k, f"{self.callee(node)}() takes no {k}=" +
                         (f" (it takes {', '.join(sorted(allowed))})" if allowed else ""))
        if str(k) in kw:
          raise error_at(k, f"{k}= given twice")
        kw[str(k)] = v
      else:
        if kw:
          raise error_at(a, "a positional argument after keyword arguments")
        args.append(a)
    return args, kw

  def call(self, node) -> pb.Value:
    callee = self.callee(node)
    f = _CALLS.get(callee)
    if f is not None:
      return f(self, node)
    if callee.startswith("np.") and callee[3:] in names.DTYPE_NAMES:
      return self.numpy_scalar(node, callee[3:])
    if callee in self.aliases:
      kind, full = self.aliases[callee]
      if kind in ("record", "extension"):
        args, kw = self.call_args(node, _Anything())
        if args:
          raise error_at(args[0], f"a {kind}'s fields are given by name")
        fields = [pb.RecordField(name=k, value=self.value(v)) for k, v in kw.items()]
        if kind == "record":
          return pb.Value(record=pb.Record(type=full, fields=fields))
        return pb.Value(extension=pb.Extension(codec=full, fields=fields))
      if kind == "enum":
        args, _ = self.call_args(node, set())
        if len(args) != 1 or not (isinstance(args[0], Token) and args[0].type == "STRING"):
          raise error_at(node, f"{callee}('MEMBER')")
        return pb.Value(enum=pb.EnumValue(type=full, member=names.unquote(args[0])))
    raise error_at(node.children[0], f"{callee}(...): not a call the syntax has, nor a "
                                     "record or extension named by a line above")

  def flag(self, node) -> bool:
    if node is None:
      return False
    if self.is_bare(node) and str(node.children[0]) in ("True", "False"):
      return str(node.children[0]) == "True"
    raise error_at(node, "expected True or False")

  def int_(self, node, lo=-(1 << 63), hi=1 << 63) -> int:
    """An int in [lo, hi) (an int64 by default)."""
    if isinstance(node, Token) and node.type == "NUMBER":
      v = number(node)
      if type(v) is int and lo <= v < hi:
        return v
    raise error_at(node, f"expected an int from {lo} to {hi - 1}")

  def str_(self, node) -> str:
    if isinstance(node, Token) and node.type == "STRING":
      return names.unquote(node)
    if self.is_bare(node):
      return str(node.children[0])
    raise error_at(node, "expected a string")

  def proto(self, node, cls):
    args, _ = self.call_args(node, set())
    if len(args) != 1 or not (isinstance(args[0], Token) and args[0].type == "STRING"):
      raise error_at(node, "proto('...') holds protobuf text")
    msg = cls()
    try:
      text_format.Parse(names.unquote(args[0]), msg)
    except (text_format.ParseError, RecursionError) as e:
      raise error_at(args[0], f"bad protobuf text: {e}") from None
    return msg

  # --- arrays -------------------------------------------------------------------
  def elements(self, node) -> list:
    """Python values of the elements of a list of numbers."""
    out = []
    for x in self.items(node, "list"):
      if isinstance(x, Token):
        if x.type == "NUMBER":
          out.append(number(x))
          continue
        if x.type == "NEG_SPECIAL":
          out.append(float(str(x)))
          continue
      elif self.is_bare(x):
        n = str(x.children[0])
        if n in ("True", "False"):
          out.append(n == "True")
          continue
        if n in ("inf", "nan"):
          out.append(float(n))
          continue
      elif x.data == "call" and self.callee(x) == "nan":
        out.append(("bits", self.nan_bits(x)))
        continue
      elif x.data == "call" and self.callee(x) == "complex":
        v = _complex(self, x).complex
        out.append(complex(v.real, v.imag))
        continue
      raise error_at(x, "an element is a number, True, False, inf, nan or complex(re, im)")
    return out

  def nan_bits(self, node) -> int:
    args, _ = self.call_args(node, set())
    if len(args) != 1:
      raise error_at(node, "nan(0xBITS)")
    return self.int_(args[0], 0, 1 << 64)

  def data(self, node, a: pb.Array) -> None:
    """Fills `a.data` (or `a.external`) from a list of numbers, base64(...)
    or external(...); `a` has its dtype, shape and kind."""
    if isinstance(node, Tree) and node.data == "list":
      dt = arrays.PYTHON_SCALAR.get(a.kind) or arrays.NUMERIC.get(a.dtype)
      if dt is None:
        raise error_at(node, f"elements of {names.DTYPE_BY_NUM.get(a.dtype, a.dtype)} are "
                             "written as base64(...)")
      els = self.elements(node)
      n = 1 if a.kind in arrays.PYTHON_SCALAR else math.prod(a.shape)
      if len(els) != n:
        raise error_at(node, f"{len(els)} elements for shape {list(a.shape)} ({n})")
      try:
        a.data = arrays.element_bytes(els, dt)
      except (ValueError, OverflowError) as e:
        raise error_at(node, str(e)) from None
      return
    if isinstance(node, Tree) and node.data == "call" and self.callee(node) == "base64":
      args, _ = self.call_args(node, set())
      if len(args) != 1 or not (isinstance(args[0], Token) and args[0].type == "STRING"):
        raise error_at(node, "base64('...')")
      try:
        a.data = base64.b64decode(names.unquote(args[0]), validate=True)
      except (binascii.Error, ValueError) as e:
        raise error_at(args[0], f"bad base64: {e}") from None
      return
    if isinstance(node, Tree) and node.data == "call" and self.callee(node) == "external":
      args, kw = self.call_args(node, {"offset", "length", "sha256"})
      if len(args) != 1:
        raise error_at(node, "external('FILE', offset=N, length=N, sha256='HEX')")
      x = a.external
      x.location = self.str_(args[0])
      x.offset = self.int_(kw["offset"], 0, 1 << 64) if "offset" in kw else 0
      x.length = self.int_(kw["length"], 0, 1 << 64) if "length" in kw else 0
      if "sha256" in kw:
        try:
          x.sha256 = bytes.fromhex(self.str_(kw["sha256"]))
        except ValueError:
          raise error_at(kw["sha256"], "sha256 is hex") from None
      return
    raise error_at(node, "an array's data: [numbers], base64('...') or external(...)")

  def array_type(self, node, a: pb.Array):
    if not (isinstance(node, Tree) and node.data == "shaped"):
      raise error_at(node, "an array's type, such as f32[2,3]")
    s = self.aval(node).shaped_array
    if s.weak_type or s.varying or s.unreduced or s.reduced or s.HasField("sharding") or s.memory_space:
      raise error_at(node, "an array's type has a dtype and shape only")
    if any(d.HasField("symbolic") for d in s.shape):
      raise error_at(node, "an array's shape is of ints")
    a.dtype, a.key_impl = s.dtype, s.key_impl
    a.shape.extend(d.constant for d in s.shape)

  def const(self, node, aval_index: int) -> pb.Value:
    """A constvar's value: its data alone, of the type its aval says, or a value."""
    if isinstance(node, Tree) and (node.data == "list" or (node.data == "call" and self.callee(node)
                                                             in ("base64", "external"))):
      aval = self.m.avals[aval_index]
      if not aval.HasField("shaped_array") or any(d.HasField("symbolic") for d in aval.shaped_array.shape):
        raise error_at(node, "a constant written as its data needs an array type of ints")
      s = aval.shaped_array
      a = pb.Array(dtype=s.dtype, key_impl=s.key_impl, kind=pb.ARRAY_KIND_TYPED_NDARRAY,
                   shape=[d.constant for d in s.shape])
      self.data(node, a)
      return pb.Value(array=a)
    if isinstance(node, Tree) and node.data == "call" and self.callee(node) == "value":
      return self.wrapped(node)
    return self.value(node)

  def wrapped(self, node) -> pb.Value:
    args, _ = self.call_args(node, set())
    if len(args) != 1:
      raise error_at(node, "value(VALUE)")
    return self.value(args[0])

  def literal(self, node) -> pb.Literal:
    val, typ = node.children
    scalar = isinstance(val, Token) and val.type in ("NUMBER", "NEG_SPECIAL") or (
        isinstance(val, Token) and val.type == "NAME" and str(val) in ("True", "False", "inf", "nan")) or (
        isinstance(val, Tree) and val.data == "call" and self.callee(val) in ("nan", "py", "complex"))
    if not scalar:
      if isinstance(val, Tree) and val.data == "call" and self.callee(val) == "value":
        v = self.wrapped(val)
      else:
        v = self.value(val if not (isinstance(val, Token) and val.type == "NAME") else Tree("bare", [val]))
      return pb.Literal(value=v, aval=self.type(typ))
    aval = self.aval(typ)
    s = aval.shaped_array
    if not aval.HasField("shaped_array") or s.shape or s.dtype == pb.DTYPE_KEY:
      raise error_at(typ, "a literal written as a number has a scalar type, such as f32[]")
    a = pb.Array(dtype=s.dtype)
    if isinstance(val, Tree) and self.callee(val) == "py":
      args, _ = self.call_args(val, set())
      if len(args) != 1:
        raise error_at(val, "py(NUMBER)")
      x = args[0]
      if isinstance(x, Tree) and x.data == "call" and self.callee(x) == "complex":
        a.kind = pb.ARRAY_KIND_TYPED_COMPLEX
      elif isinstance(x, Token) and x.type == "NUMBER" and type(number(x)) is int:
        a.kind = pb.ARRAY_KIND_TYPED_INT
      else:
        a.kind = pb.ARRAY_KIND_TYPED_FLOAT
      self.data(Tree("list", [x]), a)
    else:
      a.kind = pb.ARRAY_KIND_TYPED_NDARRAY
      self.data(Tree("list", [Tree("bare", [val]) if isinstance(val, Token) and val.type == "NAME"
                              else val]), a)
    return pb.Literal(value=pb.Value(array=a), aval=self.intern("avals", aval))

  def numpy_scalar(self, node, dtype_name: str) -> pb.Value:
    args, _ = self.call_args(node, set())
    if len(args) != 1:
      raise error_at(node, f"np.{dtype_name}(NUMBER)")
    a = pb.Array(dtype=names.DTYPE_NAMES[dtype_name], kind=pb.ARRAY_KIND_NUMPY_SCALAR)
    self.data(Tree("list", args), a)
    return pb.Value(array=a)

  # --- shardings ----------------------------------------------------------------
  def mesh(self, node) -> pb.Mesh:
    if not (isinstance(node, Tree) and node.data == "call" and self.callee(node) == "Mesh"):
      raise error_at(node, "expected Mesh(...)")
    args, kw = self.call_args(node, {"concrete", "device_ids", "device"})
    out = pb.Mesh()
    for a in args:
      parts = self.items(a, "tuple")
      if len(parts) not in (2, 3):
        raise error_at(a, "a mesh axis is ('name', size) or ('name', size, Explicit)")
      t = pb.AXIS_TYPE_AUTO_UNSPECIFIED
      if len(parts) == 3:
        p = parts[2]
        if self.is_bare(p) and str(p.children[0]) in _AXIS_TYPE:
          t = _AXIS_TYPE[str(p.children[0])]
        else:
          t = self.int_(p, 0, 1 << 31)
      out.axes.add(name=self.str_(parts[0]), size=self.int_(parts[1]), type=t)
    out.concrete = self.flag(kw.get("concrete"))
    if "device_ids" in kw:
      out.device_ids.extend(self.int_(x) for x in self.items(kw["device_ids"], "tuple"))
    if "device" in kw:
      d = kw["device"]
      if not (isinstance(d, Tree) and d.data == "call" and self.callee(d) == "AbstractDevice"):
        raise error_at(d, "device=AbstractDevice('kind', num_cores=N, platform='p')")
      dargs, dkw = self.call_args(d, {"num_cores", "platform"})
      if len(dargs) != 1:
        raise error_at(d, "AbstractDevice('kind', ...)")
      out.abstract_device.device_kind = self.str_(dargs[0])
      if "num_cores" in dkw:
        out.abstract_device.num_cores = self.int_(dkw["num_cores"])
      if "platform" in dkw:
        out.abstract_device.platform = self.str_(dkw["platform"])
    return out

  def spec(self, node) -> pb.PartitionSpec:
    if not (isinstance(node, Tree) and node.data == "call" and self.callee(node) == "P"):
      raise error_at(node, "expected P(...)")
    args, kw = self.call_args(node, {"unreduced", "reduced", "unreduced_kind"})
    out = pb.PartitionSpec()
    for a in args:
      if self.is_bare(a) and str(a.children[0]) == "None":
        out.entries.add(none=True)
      elif self.is_bare(a) and str(a.children[0]) == "UNCONSTRAINED":
        out.entries.add(unconstrained=True)
      elif isinstance(a, Tree) and a.data == "tuple":
        out.entries.add(axes=pb.AxisNames(names=[self.str_(x) for x in kids(a)]))
      else:
        out.entries.add(axes=pb.AxisNames(names=[self.str_(a)]))
    for key in ("unreduced", "reduced"):
      if key in kw:
        getattr(out, key).extend(self.str_(x) for x in self.items(kw[key], "tuple"))
    if "unreduced_kind" in kw:
      out.unreduced_kind = self.str_(kw["unreduced_kind"])
    return out

  def named_sharding(self, node) -> pb.NamedSharding:
    if not (isinstance(node, Tree) and node.data == "call" and self.callee(node) == "NamedSharding"):
      raise error_at(node, "expected NamedSharding(mesh=..., spec=...)")
    _, kw = self.call_args(node, {"mesh", "spec", "memory_kind"})
    out = pb.NamedSharding()
    if "mesh" in kw:
      out.mesh.CopyFrom(self.mesh(kw["mesh"]))
    if "spec" in kw:
      out.spec.CopyFrom(self.spec(kw["spec"]))
    if "memory_kind" in kw:
      out.memory_kind = self.str_(kw["memory_kind"])
    return out

  # --- pytrees ------------------------------------------------------------------
  def treedef(self, node) -> pb.TreeDef:
    if not (isinstance(node, Tree) and node.data == "call" and self.callee(node) == "PyTreeDef"):
      raise error_at(node, "expected PyTreeDef(...)")
    args, _ = self.call_args(node, set())
    if len(args) > 1:
      raise error_at(node, "PyTreeDef(NODE)")
    out = pb.TreeDef()
    if args:
      out.root.CopyFrom(self.tree_node(args[0]))
    return out

  def tree_node(self, node) -> pb.TreeNode:
    if isinstance(node, Tree):
      k = node.data
      if k == "star":
        return pb.TreeNode()
      if k == "bare" and str(node.children[0]) == "None":
        return pb.TreeNode(kind=pb.TREE_NODE_KIND_NONE)
      if k in ("tuple", "list"):
        kind = pb.TREE_NODE_KIND_TUPLE if k == "tuple" else pb.TREE_NODE_KIND_LIST
        return pb.TreeNode(kind=kind, children=[self.tree_node(c) for c in kids(node)])
      if k == "dict":
        out = pb.TreeNode(kind=pb.TREE_NODE_KIND_DICT)
        for e in kids(node):
          key, child = e.children
          out.keys.append(self.value(key))
          out.children.append(self.tree_node(child))
        return out
      if k == "call":
        callee = self.callee(node)
        kind, full = self.aliases.get(callee, (None, None))
        if kind in _TREE_KIND:
          args, kw = self.call_args(node, {"aux"} if kind == "custom_node" else set())
          out = pb.TreeNode(kind=_TREE_KIND[kind], type=full,
                            children=[self.tree_node(c) for c in args])
          if "aux" in kw:
            out.aux.CopyFrom(self.value(kw["aux"]))
          return out
    raise error_at(node, "a pytree node: *, None, (...), [...], {...} or a namedtuple or "
                         "custom node named by a line above")

  # --- rules and the function ---------------------------------------------------
  def rule(self, name: str) -> int:
    if name in self.rule_index:
      return self.rule_index[name]
    i = self.rule_index[name] = len(self.m.rules)
    r = self.m.rules.add()
    node = self.rules[name]
    callee = self.callee(node)
    if callee == "empty_rule":
      self.call_args(node, set())
      return i
    if callee == "custom_jvp":
      args, kw = self.call_args(node, {"name", "debug", "trace_error", "out_zeros", "jvp"})
      msg = r.jvp
      msg.SetInParent()
      msg.name = self.str_(kw["name"]) if "name" in kw else ""
      if "debug" in kw:
        msg.debug_info.CopyFrom(self.debug_info(kw["debug"]))
      if "trace_error" in kw:
        msg.trace_error = self.str_(kw["trace_error"])
      if "out_zeros" in kw:
        msg.out_zeros.extend(self.flag(x) for x in self.items(kw["out_zeros"], "tuple"))
      if "jvp" in kw:
        msg.jvp = self.closed(kw["jvp"])
    elif callee == "custom_vjp":
      args, kw = self.call_args(node, {"fwd_name", "bwd_name", "fwd_debug", "bwd_debug", "trace_error",
                                       "out_tree", "res_tree", "input_fwds", "fwd", "bwd"})
      msg = r.vjp
      msg.SetInParent()
      for key in ("fwd_name", "bwd_name", "trace_error"):
        if key in kw:
          setattr(msg, key, self.str_(kw[key]))
      for key in ("fwd", "bwd"):
        if f"{key}_debug" in kw:
          getattr(msg, f"{key}_debug_info").CopyFrom(self.debug_info(kw[f"{key}_debug"]))
      for key in ("out_tree", "res_tree"):
        if key in kw:
          getattr(msg, key).CopyFrom(self.treedef(kw[key]))
      if "input_fwds" in kw:
        msg.input_fwds.extend(self.int_(x, -(1 << 31), 1 << 31) for x in self.items(kw["input_fwds"], "tuple"))
      for key in ("fwd", "bwd"):
        if key in kw:
          setattr(msg, key, self.closed(kw[key]))
    elif callee == "custom_lin":
      args, kw = self.call_args(node, {"name", "debug", "bwd"})
      msg = r.lin
      msg.SetInParent()
      msg.name = self.str_(kw["name"]) if "name" in kw else ""
      if "debug" in kw:
        msg.debug_info.CopyFrom(self.debug_info(kw["debug"]))
      if "bwd" in kw:
        msg.bwd = self.closed(kw["bwd"])
    else:
      raise error_at(node, "a rule is custom_jvp(...), custom_vjp(...) or custom_lin(...)")
    if args:
      raise error_at(args[0], "a rule's fields are given by name")
    return i

  def debug_info(self, node) -> pb.DebugInfo:
    if not (isinstance(node, Tree) and node.data == "call" and self.callee(node) == "debug"):
      raise error_at(node, "expected debug(...)")
    return self.debug_fields(node)

  def debug_fields(self, node) -> pb.DebugInfo:
    args, kw = self.call_args(node, {"args", "results"})
    if len(args) != 2:
      raise error_at(node, "debug('traced for', 'function and source', args=(...), results=(...))")
    out = pb.DebugInfo(traced_for=self.str_(args[0]), func_src_info=self.str_(args[1]))
    for key, field in (("args", "arg_names"), ("results", "result_paths")):
      if key in kw:
        o = getattr(out, field)
        o.SetInParent()
        for k, x in enumerate(self.items(kw[key], "tuple")):
          if self.is_bare(x) and str(x.children[0]) == "None":
            o.values.append("")
            o.missing.append(k)
          else:
            o.values.append(self.str_(x))
    return out

  def signature(self, node):
    f = self.m.function
    f.SetInParent()
    f.name = self.callee(node)
    args, kw = self.call_args(node, {"in_tree", "out_tree", "in_avals", "out_avals", "static_leaves"})
    if args:
      raise error_at(args[0], "a function's signature is given by name")
    for key in ("in_tree", "out_tree"):
      if key in kw:
        getattr(f, key).CopyFrom(self.treedef(kw[key]))
    for key in ("in_avals", "out_avals"):
      if key in kw:
        getattr(f, key).extend(self.type(x) for x in self.items(kw[key], "tuple"))
    if "static_leaves" in kw:
      for e in self.items(kw["static_leaves"], "dict"):
        k, v = e.children
        f.static_leaves.add(index=self.int_(k, 0, 1 << 32), value=self.value(v))

  # --- eqns' names ----------------------------------------------------------------
  def prim_key(self, tok) -> tuple[str, str]:
    s = text_of(tok)
    if tok.type == "NAME":
      return "jax", s
    ns, sep, name = s.partition("::")
    return (ns, name) if sep else ("jax", s)


class _Anything:
  def __contains__(self, x):
    return True


def _complex(b: Builder, node) -> pb.Value:
  args, _ = b.call_args(node, set())
  if len(args) != 2:
    raise error_at(node, "complex(REAL, IMAG)")
  parts = []
  for x in args:
    v = b.elements(Tree("list", [x]))[0]
    if isinstance(v, tuple):
      parts.append(_bits_to_float(v[1]))
    elif type(v) in (int, float):
      parts.append(float(v))
    else:
      raise error_at(x, "a part of a complex number is a number")
  return pb.Value(complex=pb.Complex(real=parts[0], imag=parts[1]))


def _bits_to_float(bits: int) -> float:
  return arrays.np.frombuffer(int(bits).to_bytes(8, "little"), "<f8")[0].item()


def _nan(b: Builder, node) -> pb.Value:
  bits = b.nan_bits(node)
  if bits >= 1 << 64:
    raise error_at(node, "nan bits of a float64 are 64")
  return pb.Value(float=_bits_to_float(bits))


def _array(b: Builder, node) -> pb.Value:
  args, kw = b.call_args(node, {"kind"})
  if len(args) != 2:
    raise error_at(node, "array(TYPE, DATA, kind=...)")
  a = pb.Array()
  b.array_type(args[0], a)
  if "kind" in kw:
    k = kw["kind"]
    if b.is_bare(k) and str(k.children[0]) in _ARRAY_KIND:
      a.kind = _ARRAY_KIND[str(k.children[0])]
    else:
      a.kind = b.int_(k, 0, 1 << 31)
  b.data(args[1], a)
  return pb.Value(array=a)


def _frozenset(b: Builder, node) -> pb.Value:
  args, _ = b.call_args(node, set())
  if not args:
    return pb.Value(frozenset=pb.ValueList())
  if len(args) == 1 and isinstance(args[0], Tree) and args[0].data == "set":
    return b.set_(args[0])
  raise error_at(node, "frozenset({...}) or frozenset()")


def _one(what):
  def get(b: Builder, node):
    args, _ = b.call_args(node, set())
    if len(args) != 1:
      raise error_at(node, f"{b.callee(node)}(...) takes one argument")
    return what(b, args[0])
  return get


def _traceback(b: Builder, x) -> pb.Value:
  if b.is_bare(x) and str(x.children[0]) == "None":
    return pb.Value(traceback=0)
  if isinstance(x, Token) and x.type == "LOCREF":
    k = int(str(x)[4:])
    if k >= len(b.m.tracebacks):
      raise error_at(x, f"#loc{k} is not given")
    return pb.Value(traceback=k)
  raise error_at(x, "traceback(#locN) or traceback(None)")


def _primitive(b: Builder, x) -> pb.Value:
  tok = x.children[0] if b.is_bare(x) else x
  if not isinstance(tok, Token) or tok.type not in ("NAME", "QNAME", "STRING"):
    raise error_at(x, "primitive(NAME)")
  ns, name = b.prim_key(tok)
  return pb.Value(primitive=pb.PrimitiveRef(index=b.intern("primitives", pb.PrimitiveName(
      namespace=ns, name=name))))


def _big_int(b: Builder, x) -> pb.Value:
  return pb.Value(big_int=b.str_(x))


_CALLS = {
    "array": _array,
    "complex": _complex,
    "nan": _nan,
    "frozenset": _frozenset,
    "big_int": _one(_big_int),
    "dim": _one(lambda b, x: pb.Value(symbolic_dim=b.str_(x))),
    "traceback": _one(_traceback),
    "function": _one(lambda b, x: pb.Value(function=b.str_(x))),
    "primitive": _one(_primitive),
    "aval": lambda b, node: pb.Value(aval=b.intern("avals", b.aval(node))),
    "closed": lambda b, node: pb.Value(closed_jaxpr=b.closed_copy(node)),
    "PyTreeDef": lambda b, node: pb.Value(treedef=b.treedef(node)),
    "Mesh": lambda b, node: pb.Value(mesh=b.mesh(node)),
    "P": lambda b, node: pb.Value(partition_spec=b.spec(node)),
    "NamedSharding": lambda b, node: pb.Value(named_sharding=b.named_sharding(node)),
    "proto": lambda b, node: b.proto(node, pb.Value),
    "value": lambda b, node: b.wrapped(node),
}

_VALUE_NODES = {
    "bare": lambda b, n: b.bare_value(n.children[0]),
    "dotted": Builder.dotted,
    "tuple": Builder.seq,
    "list": Builder.seq,
    "dict": Builder.dict_,
    "set": Builder.set_,
    "call": Builder.call,
    "shaped": Builder.shaped_value,
    "bare_type": Builder.bare_type_value,
    "ref_type": Builder.shaped_value,
    "block": Builder.block_value,
    "open_block": Builder.open_value_node,
    "open_ref": Builder.open_value_node,
}


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
