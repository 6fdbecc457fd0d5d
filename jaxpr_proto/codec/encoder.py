"""ClosedJaxpr -> jaxpr_proto.v1.Module.

The encoder walks the jaxpr once. Everything that repeats is interned in the
Module's tables (`_intern_*`); sub-jaxprs are interned by object identity, so
that a jaxpr JAX shares among eqns is stored once. Eqn params go through the
per-primitive param codecs (`param_codecs`) or else the generic value codec
(`Encoder.value`), whose type table is the allow-list of what can be written.
"""
from __future__ import annotations

import enum

import jax
import numpy as np

from jaxpr_proto._version import __version__
from jaxpr_proto import compat
from jaxpr_proto.codec import tracebacks
from jaxpr_proto.codec import param_codecs
from jaxpr_proto.codec import pytrees
from jaxpr_proto.codec import values
from jaxpr_proto.codec import dtypes
from jaxpr_proto.codec.dtypes import encode_dtype
from jaxpr_proto.compat.change import same_value
from jaxpr_proto.errors import EncodeError
from jaxpr_proto.codec.names import REGISTRY
from jaxpr_proto.codec.state import EncodeState
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire.versions import stamp

_MS = {compat.MemorySpace.Device: pb.MEMORY_SPACE_DEVICE_UNSPECIFIED,
       compat.MemorySpace.Host: pb.MEMORY_SPACE_HOST,
       compat.MemorySpace.Any: pb.MEMORY_SPACE_ANY}
_K = pb.ArrayKind


class Encoder:
  """Writes one Module; `state` holds its tables (see codec.state)."""

  def __init__(self, debug_info: bool = True):
    self.state = st = EncodeState(pb.Module(), debug_info)
    st.module.tracebacks.add()  # entry 0 of both: none
    st.module.name_stacks.add()
    st.interned["tracebacks"][None] = 0
    st.interned["name_stacks"][()] = 0
    assert self._intern_context(compat.default_context()) == 0

  # --- module -------------------------------------------------------------
  def module(self, closed_jaxpr) -> pb.Module:
    st = self.state
    m = st.module
    m.producer.jaxpr_proto_version = __version__
    m.producer.jax_version = jax.__version__
    m.producer.jaxlib_version = jax.lib.__version__ if hasattr(jax.lib, "__version__") else jax.__version__
    m.root = self.closed_jaxpr(closed_jaxpr, "")
    for ns in sorted(st.namespaces):
      m.namespaces.add(namespace=ns, version=jax.__version__ if ns.startswith("jax") else "")
    if st.symbolic_scope is not None:
      m.symbolic_scope.constraints.extend(compat.symbolic_constraints(st.symbolic_scope))
    m.required_features.extend(sorted(st.features))
    stamp(m)  # the oldest format version that reads this file
    return m

  # --- interning ----------------------------------------------------------
  def string(self, s: str) -> int:
    return self.state.intern("strings", s, lambda: s)

  def aval(self, a, path: str) -> int:
    try:
      key = (type(a), a, getattr(a, "sharding", None))
      hash(key)
    except TypeError:
      key = id(a)
    return self.state.intern("avals", key, lambda: self._encode_aval(a, path), keep=a)

  def param(self, msg: pb.Param) -> int:
    return self.state.intern("params", msg.SerializeToString(deterministic=True), lambda: msg)

  def primitive(self, prim, path: str) -> int:
    def make():
      ns, name = REGISTRY.name_of(prim, path)
      self.state.namespaces.add(ns)
      return pb.PrimitiveName(namespace=ns, name=name)
    return self.state.intern("primitives", id(prim), make, keep=prim)

  def _intern_context(self, ctx) -> int:
    return self.state.intern("contexts", id(ctx), lambda: self._encode_context(ctx), keep=ctx)

  def _encode_context(self, ctx) -> pb.EqnContext:
    msg = pb.EqnContext(threefry_partitionable=ctx.threefry_partitionable,
                        remove_size_one_mesh_axis=ctx.remove_size_one_mesh_axis)
    if ctx.compute_type is not None:
      msg.compute_type = ctx.compute_type
    msg.cur_abstract_mesh.CopyFrom(values.encode_mesh(ctx.cur_abstract_mesh, "ctx"))
    if ctx.xla_metadata is not None:
      msg.xla_metadata.CopyFrom(self.value(dict(ctx.xla_metadata), "ctx.xla_metadata"))
    for name, unset in compat.CONTEXT_FIELDS.items():
      v = getattr(ctx, name, unset)
      if not same_value(v, unset):
        msg.fields.add(name=name, value=self.value(v, f"ctx.{name}"))
        self.state.features.add("eqn_context_fields")
    return msg

  def _intern_traceback(self, tb) -> int:
    st = self.state
    if tb is None or not st.debug_info:
      return 0
    seen = st.interned["tracebacks"]
    i = seen.get(tb)
    if i is None:
      frames = [st.intern("frames", f, lambda f=f: self._frame(f)) for f in tracebacks.frames_of(tb)]
      key = tuple(frames)  # equal frame lists share one entry
      i = st.intern("tracebacks", key, lambda: pb.Traceback(frames=frames)) if key else 0
      seen[tb] = i
      st.keep.append(tb)
    return i

  def _frame(self, f) -> pb.Frame:
    file, func, line, col, eline, ecol = f
    return pb.Frame(file=self.string(file), function=self.string(func),
                    line=line, column=col, end_line=eline, end_column=ecol)

  def _intern_name_stack(self, ns) -> int:
    if not self.state.debug_info:
      return 0
    key = tuple((type(s) is compat.Transform, s.name) for s in ns.stack)
    return self.state.intern("name_stacks", key, lambda: pb.NameStack(
        scopes=[pb.NameScope(name=n, transform=t) for t, n in key]))

  # --- jaxprs -------------------------------------------------------------
  def closed_jaxpr(self, cj, path: str) -> int:
    i, msg = self.state.reserve("closed_jaxprs", id(cj), cj)
    if msg is not None:
      msg.jaxpr = self.jaxpr(cj.jaxpr, path)
      for k, c in enumerate(cj.consts):
        msg.consts.append(self.value(c, f"{path}.consts[{k}]"))
    return i

  def jaxpr(self, jaxpr, path: str) -> int:
    i, msg = self.state.reserve("jaxprs", id(jaxpr), jaxpr)  # reserved first: params may refer back
    if msg is not None:
      self._encode_jaxpr(jaxpr, msg, path)
    return i

  def _encode_jaxpr(self, jaxpr, msg: pb.Jaxpr, path: str) -> None:
    ids: dict = {}

    def define(v, where):
      if v in ids:
        raise EncodeError(f"variable {v} is defined twice", where)
      ids[v] = n = len(ids)
      return pb.Var(id=n, aval=self.aval(v.aval, where))

    def atom(x, where):
      if isinstance(x, compat.Literal):
        return pb.Atom(literal=pb.Literal(value=self.value(x.val, where),
                                          aval=self.aval(x.aval, where)))
      try:
        return pb.Atom(var=ids[x])
      except KeyError:
        raise EncodeError(f"variable {x} is used before it is defined", where) from None

    msg.constvars.extend(define(v, f"{path}.constvars[{k}]") for k, v in enumerate(jaxpr.constvars))
    msg.invars.extend(define(v, f"{path}.invars[{k}]") for k, v in enumerate(jaxpr.invars))
    for k, e in enumerate(jaxpr.eqns):
      where = f"{path}.eqn[{k}]" if path else f"eqn[{k}]"
      out = msg.eqns.add()
      out.primitive = self.primitive(e.primitive, where)
      out.invars.extend(atom(x, f"{where}.invars[{j}]") for j, x in enumerate(e.invars))
      out.params.extend(param_codecs.encode_params(self, e, where))
      out.effects.extend(self.effect(eff, ids, f"{where}.effects") for eff in _sorted_effects(e.effects, ids))
      si = e.source_info
      out.traceback = self._intern_traceback(si.traceback)
      out.name_stack = self._intern_name_stack(si.name_stack)
      out.context = self._intern_context(e.ctx)
      for j, v in enumerate(e.outvars):
        if isinstance(v, compat.DropVar):
          out.outvars.add(drop=pb.DropVar(aval=self.aval(v.aval, f"{where}.outvars[{j}]")))
        else:
          out.outvars.add(var=define(v, f"{where}.outvars[{j}]"))
    msg.outvars.extend(atom(x, f"{path}.outvars[{k}]") for k, x in enumerate(jaxpr.outvars))
    msg.effects.extend(self.effect(eff, ids, f"{path}.effects") for eff in _sorted_effects(jaxpr.effects, ids))
    if jaxpr.debug_info is not None and self.state.debug_info:
      msg.debug_info.CopyFrom(self.debug_info_msg(jaxpr.debug_info))
    if getattr(jaxpr, "is_high", False):
      msg.is_high = True

  def debug_info_msg(self, d) -> pb.DebugInfo:
    out = pb.DebugInfo(traced_for=d.traced_for, func_src_info=d.func_src_info or "")
    if d.arg_names is not None:
      out.arg_names.CopyFrom(_optional_strings(d.arg_names))
    paths = d.result_paths
    if callable(paths):
      paths = paths()
    if isinstance(paths, tuple):
      out.result_paths.CopyFrom(_optional_strings(paths))
    return out

  def effect(self, eff, ids, path) -> pb.Effect:
    name, var = values.effect_name(eff)
    if name is None:
      raise EncodeError(f"unsupported effect {eff!r} ({type(eff).__qualname__})", path)
    out = pb.Effect(name=name)
    if name == "jax::named_axis":
      if not isinstance(eff.name, str):
        raise EncodeError(f"axis name {eff.name!r} is not a str", path)
      out.axis_name = eff.name
    if var is not None:
      if isinstance(var, int):
        raise EncodeError(f"effect {eff!r} refers to an input by position", path)
      try:
        out.input_var = ids[var]
      except KeyError:
        raise EncodeError(f"effect {eff!r} refers to an unknown variable", path) from None
    return out

  # --- avals --------------------------------------------------------------
  def _encode_aval(self, a, path) -> pb.Aval:
    if isinstance(a, compat.ShapedArray):
      return pb.Aval(shaped_array=self._shaped_array(a, path))
    if isinstance(a, compat.AbstractToken):
      return pb.Aval(token=pb.AbstractToken())
    if isinstance(a, compat.AbstractRef):
      return pb.Aval(ref=pb.AbstractRef(
          inner=self.aval(a.inner_aval, path), memory_space=self.value(a.memory_space, path),
          kind=self.value(a.kind, path)))
    raise EncodeError(f"unsupported abstract value {a} ({type(a).__qualname__})", path)

  def _shaped_array(self, a, path) -> pb.ShapedArray:
    out = pb.ShapedArray(weak_type=a.weak_type, memory_space=_MS[a.memory_space])
    out.dtype, out.key_impl = encode_dtype(a.dtype, path)
    for d in a.shape:
      if isinstance(d, (int, np.integer)):
        out.shape.add(constant=int(d))
      else:
        out.shape.add(symbolic=self.symbolic_dim(d, path))
    default = compat.ShapedArray(a.shape, a.dtype, a.weak_type)
    if a.sharding != default.sharding:
      out.sharding.CopyFrom(values.encode_named_sharding(a.sharding, path, self.state.features))
    mat = compat.manual_axis_type(a)
    out.varying.extend(sorted(mat.varying))
    out.unreduced.extend(sorted(mat.unreduced))
    out.reduced.extend(sorted(mat.reduced))
    return out

  def symbolic_dim(self, d, path) -> str:
    if not compat.is_symbolic_dim(d):
      raise EncodeError(f"unsupported dimension {d!r}", path)
    scope = d.scope
    st = self.state
    if st.symbolic_scope is None:
      st.symbolic_scope = scope
    elif scope is not st.symbolic_scope:
      raise EncodeError("symbolic dimensions from different scopes", path)
    return str(d)

  # --- values -------------------------------------------------------------
  def value(self, v, path: str) -> pb.Value:
    name = values.singleton_name(v)
    if name is not None:
      return pb.Value(singleton=name)
    enc = _VALUE_ENCODERS.get(type(v))
    if enc is not None:
      return enc(self, v, path)
    for pred, enc in _FAMILY_ENCODERS:
      if pred(v):
        return enc(self, v, path)
    raise EncodeError(
        f"cannot encode a value of type {type(v).__module__}.{type(v).__qualname__}"
        f" ({_short_repr(v)}); it is not on the allow-list of param types", path)


def _short_repr(v):
  r = repr(v)
  return r if len(r) < 80 else r[:77] + "..."


def _sorted_effects(effs, ids):
  def key(e):
    name, var = values.effect_name(e)
    return (name or "", ids.get(var, -1) if var is not None else -1, repr(e))
  return sorted(effs, key=key)


def _optional_strings(xs) -> pb.OptionalStrings:
  out = pb.OptionalStrings()
  for i, x in enumerate(xs):
    if x is None:
      out.missing.append(i)
      out.values.append("")
    else:
      out.values.append(str(x))
  return out


# --- the generic value codec: exact types first, then families -------------

def _int(enc, v, path):
  if -(1 << 63) <= v < (1 << 63):
    return pb.Value(int=v)
  return pb.Value(big_int=str(int(v)))


def _seq(field):
  def f(enc, v, path):
    out = pb.Value()
    lst = getattr(out, field)
    lst.SetInParent()
    for i, x in enumerate(v):
      lst.items.append(enc.value(x, f"{path}[{i}]"))
    return out
  return f


def _dict(enc, v, path):
  out = pb.Value()
  out.dict.SetInParent()
  for k, x in v.items():
    out.dict.entries.add(key=enc.value(k, f"{path}.key"), value=enc.value(x, f"{path}[{k!r}]"))
  return out


def _frozenset(enc, v, path):
  try:
    items = sorted(v)
  except TypeError:
    items = sorted(v, key=repr)
  return _seq("frozenset")(enc, items, path)


def _array(kind):
  return lambda enc, v, path: pb.Value(array=values.encode_array(v, kind, path))


def _dtype(enc, v, path):
  d, impl = encode_dtype(v, path)
  return pb.Value(dtype=pb.DtypeValue(dtype=d, key_impl=impl))


def _jnp_scalar_type(enc, v, path):
  out = _dtype(enc, v.dtype, path)
  if dtypes.jnp_scalar_type(v.dtype) is not v:
    raise EncodeError(f"unsupported scalar type {v!r}", path)
  out.dtype.jnp_scalar_type = True
  return out


def _enum(enc, v, path):
  name = values.enum_name(type(v))
  if name is None:
    raise EncodeError(f"enum type {type(v).__module__}.{type(v).__qualname__} is not allow-listed", path)
  return pb.Value(enum=pb.EnumValue(type=name, member=v.name))


def _record(enc, v, path):
  name = values.record_name(type(v))
  if name is None:
    raise EncodeError(f"type {type(v).__module__}.{type(v).__qualname__} is not allow-listed", path)
  return _named_record(enc, name, dict(values.record_fields(v)), path)


def _named_record(enc, name, fields, path):
  out = pb.Value(record=pb.Record(type=name))
  for f, x in fields.items():
    out.record.fields.add(name=f, value=enc.value(x, f"{path}.{f}"))
  return out


def _is_record(v):
  return values.record_name(type(v)) is not None


_VALUE_ENCODERS = {
    type(None): lambda enc, v, path: pb.Value(none=pb.NoneValue()),
    bool: lambda enc, v, path: pb.Value(bool=v),
    int: _int,
    float: lambda enc, v, path: pb.Value(float=v),
    complex: lambda enc, v, path: pb.Value(complex=pb.Complex(real=v.real, imag=v.imag)),
    str: lambda enc, v, path: pb.Value(str=v),
    bytes: lambda enc, v, path: pb.Value(bytes=v),
    tuple: _seq("tuple"),
    list: _seq("list"),
    dict: _dict,
    frozenset: _frozenset,
    set: _frozenset,
    np.ndarray: _array(_K.ARRAY_KIND_NUMPY_UNSPECIFIED),
    compat.TypedNdArray: _array(_K.ARRAY_KIND_TYPED_NDARRAY),
    compat.TypedInt: _array(_K.ARRAY_KIND_TYPED_INT),
    compat.TypedFloat: _array(_K.ARRAY_KIND_TYPED_FLOAT),
    compat.TypedComplex: _array(_K.ARRAY_KIND_TYPED_COMPLEX),
    compat.Jaxpr: lambda enc, v, path: pb.Value(jaxpr=enc.jaxpr(v, path)),
    # After Jaxpr: from JAX 0.11 they are one class, and every jaxpr is closed.
    compat.ClosedJaxpr: lambda enc, v, path: pb.Value(closed_jaxpr=enc.closed_jaxpr(v, path)),
    compat.AbstractMesh: lambda enc, v, path: pb.Value(mesh=values.encode_mesh(v, path)),
    compat.Mesh: lambda enc, v, path: pb.Value(mesh=values.encode_mesh(v, path)),
    compat.PartitionSpec: lambda enc, v, path: pb.Value(
        partition_spec=values.encode_spec(v, path, enc.state.features)),
    compat.NamedSharding: lambda enc, v, path: pb.Value(
        named_sharding=values.encode_named_sharding(v, path, enc.state.features)),
    jax.tree_util.PyTreeDef: lambda enc, v, path: pb.Value(treedef=pytrees.encode_treedef(v, enc.value, path)),
}

# Families, tried in order when the exact type is not in the table.
_FAMILY_ENCODERS = [
    (lambda v: isinstance(v, np.dtype) or compat.is_key_dtype(v), _dtype),
    (lambda v: isinstance(v, type) and issubclass(v, np.generic), lambda enc, v, path: _dtype(enc, np.dtype(v), path)),
    # jnp.float32 and friends: scalar types that stand for their dtype.
    (lambda v: isinstance(v, type) and isinstance(getattr(v, "dtype", None), np.dtype),
     lambda enc, v, path: _jnp_scalar_type(enc, v, path)),
    (lambda v: isinstance(v, np.generic), _array(_K.ARRAY_KIND_NUMPY_SCALAR)),
    (lambda v: isinstance(v, jax.Array), _array(_K.ARRAY_KIND_JAX)),
    (lambda v: isinstance(v, compat.Primitive), lambda enc, v, path: pb.Value(primitive=pb.PrimitiveRef(index=enc.primitive(v, path)))),
    (lambda v: isinstance(v, (compat.ShapedArray, compat.AbstractToken)), lambda enc, v, path: pb.Value(aval=enc.aval(v, path))),
    (lambda v: compat.is_symbolic_dim(v), lambda enc, v, path: pb.Value(symbolic_dim=enc.symbolic_dim(v, path))),
    (lambda v: isinstance(v, enum.Enum), _enum),
    (_is_record, _record),
    (lambda v: compat.policy_record(v) is not None, lambda enc, v, path: _named_record(enc, *compat.policy_record(v), path)),
    (lambda v: param_codecs.extension_for(v) is not None, lambda enc, v, path: pb.Value(extension=param_codecs.encode_extension(enc, v, path))),
]


def encode(closed_jaxpr, *, debug_info: bool = True) -> pb.Module:
  if not isinstance(closed_jaxpr, compat.ClosedJaxpr):
    raise EncodeError(f"expected a ClosedJaxpr, got {type(closed_jaxpr).__qualname__}")
  return Encoder(debug_info=debug_info).module(closed_jaxpr)
