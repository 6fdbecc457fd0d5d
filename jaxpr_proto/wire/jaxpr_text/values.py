"""Values, types and the rest of what a text spells in its own words, read
into the Module's messages: the half of `builder.Builder` that reads what
eqns and jaxprs hold (params, constants, literals, types, shardings,
pytrees, rules, a function's signature)."""
from __future__ import annotations

import base64
import binascii
import math
import re

import lark
from google.protobuf import text_format

from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire.jaxpr_text import arrays, names
from jaxpr_proto.wire.jaxpr_text.printer import ARRAY_KINDS, AXIS_TYPES, MEMORY_SPACES, TREE_KINDS
from jaxpr_proto.wire.jaxpr_text.syntax import error_at

Tree, Token = lark.Tree, lark.Token

_ARRAY_KIND = {v: k for k, v in ARRAY_KINDS.items()}
_AXIS_TYPE = {v: k for k, v in AXIS_TYPES.items()}
_MEMORY_SPACE = {v: k for k, v in MEMORY_SPACES.items()}
_TREE_KIND = {v: k for k, v in TREE_KINDS.items()}
_INT = re.compile(r"-?(?:0x[0-9a-fA-F]+|\d+)\Z")


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


class Values:
  """Reads values and types; the Builder it is part of gives the tables
  (`intern`), definitions (`defs`, `aliases`, `rules`) and jaxprs."""

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
                                       "out_tree", "res_tree", "input_fwds", "closed_over_inputs",
                                       "fwd", "bwd"})
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
      if "closed_over_inputs" in kw:
        msg.closed_over_inputs = self.int_(kw["closed_over_inputs"], 0, 1 << 32)
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


def _complex(b: "Values", node) -> pb.Value:
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


def _nan(b: "Values", node) -> pb.Value:
  bits = b.nan_bits(node)
  if bits >= 1 << 64:
    raise error_at(node, "nan bits of a float64 are 64")
  return pb.Value(float=_bits_to_float(bits))


def _array(b: "Values", node) -> pb.Value:
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


def _frozenset(b: "Values", node) -> pb.Value:
  args, _ = b.call_args(node, set())
  if not args:
    return pb.Value(frozenset=pb.ValueList())
  if len(args) == 1 and isinstance(args[0], Tree) and args[0].data == "set":
    return b.set_(args[0])
  raise error_at(node, "frozenset({...}) or frozenset()")


def _one(what):
  def get(b: "Values", node):
    args, _ = b.call_args(node, set())
    if len(args) != 1:
      raise error_at(node, f"{b.callee(node)}(...) takes one argument")
    return what(b, args[0])
  return get


def _traceback(b: "Values", x) -> pb.Value:
  if b.is_bare(x) and str(x.children[0]) == "None":
    return pb.Value(traceback=0)
  if isinstance(x, Token) and x.type == "LOCREF":
    k = int(str(x)[4:])
    if k >= len(b.m.tracebacks):
      raise error_at(x, f"#loc{k} is not given")
    return pb.Value(traceback=k)
  raise error_at(x, "traceback(#locN) or traceback(None)")


def _primitive(b: "Values", x) -> pb.Value:
  tok = x.children[0] if b.is_bare(x) else x
  if not isinstance(tok, Token) or tok.type not in ("NAME", "QNAME", "STRING"):
    raise error_at(x, "primitive(NAME)")
  ns, name = b.prim_key(tok)
  return pb.Value(primitive=pb.PrimitiveRef(index=b.intern("primitives", pb.PrimitiveName(
      namespace=ns, name=name))))


def _big_int(b: "Values", x) -> pb.Value:
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
    "dotted": Values.dotted,
    "tuple": Values.seq,
    "list": Values.seq,
    "dict": Values.dict_,
    "set": Values.set_,
    "call": Values.call,
    "shaped": Values.shaped_value,
    "bare_type": Values.bare_type_value,
    "ref_type": Values.shaped_value,
    "block": Values.block_value,
    "open_block": Values.open_value_node,
    "open_ref": Values.open_value_node,
}
