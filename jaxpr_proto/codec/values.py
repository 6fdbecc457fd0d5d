"""The generic value codec: eqn params, constants and literals as Value
messages, encode and decode side by side for each kind of value.

What can be written is an allow-list: exact Python types first (`_BY_TYPE`),
then families of types (`_FAMILIES`), each with its encoder, then the
`extensions`; enums and
records only of the types in `names.ENUMS` / `names.RECORDS`, built from
JAX's own modules at import time (and `register_param_type`). Decoding only ever
constructs types found in these tables: a name read from a file is looked up
here and nowhere else.
"""
from __future__ import annotations

import dataclasses
import enum
import re

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.codec import arrays, extensions, names, pytrees, sharding, tracebacks
from jaxpr_proto.codec.dtypes import decode_dtype, encode_dtype, jnp_scalar_type
from jaxpr_proto.compat import standins, upgrade
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import external

_K = pb.ArrayKind
_BIG_INT = re.compile(r"-?[0-9]+")  # as str(int) writes it


def record_fields(x) -> list[tuple[str, object]]:
  if isinstance(x, tuple):
    return list(zip(x._fields, x))
  return [(f.name, getattr(x, f.name)) for f in dataclasses.fields(x)
          if f.init]


def make_record(cls, fields: dict, path: str):
  try:
    return cls(**fields)
  except Exception as e:  # a constructor's own validation error
    raise DecodeError(f"cannot build {cls.__qualname__}: {e}", path) from None


# --- the codec ----------------------------------------------------------------

def encode(enc, v, path: str) -> pb.Value:
  """The Value of `v`; `enc` (an Encoder) interns what the value refers to."""
  name = names.SINGLETONS.name(v)
  if name is not None:
    return pb.Value(singleton=name)
  encode_as = _BY_TYPE.get(type(v))
  if encode_as is not None:
    return encode_as(enc, v, path)
  for is_kind, encode_as in _FAMILIES:
    if is_kind(v):
      return encode_as(enc, v, path)
  ext = extensions.encode(enc, v, path)
  if ext is not None:
    return pb.Value(extension=ext)
  raise EncodeError(
      f"cannot encode a value of type {type(v).__module__}.{type(v).__qualname__}"
      f" ({_short_repr(v)}); it is not on the allow-list of param types", path)


def decode(dec, msg: pb.Value, path: str):
  """The value of a Value message; `dec` (a Decoder) resolves its references."""
  kind = msg.WhichOneof("kind")
  decode_as = _DECODERS.get(kind)
  if decode_as is None:
    raise DecodeError("empty value" if kind is None else f"unknown value kind {kind}", path)
  return decode_as(dec, getattr(msg, kind), path)


def _short_repr(v):
  r = repr(v)
  return r if len(r) < 80 else r[:77] + "..."


# --- each kind, encoded and decoded ----------------------------------------------

def _encode_int(enc, v, path):
  if -(1 << 63) <= v < (1 << 63):
    return pb.Value(int=v)
  return pb.Value(big_int=str(int(v)))


def _decode_big_int(dec, s, path):
  # ASCII digits only: str.isdigit() takes '²', which int() refuses, and
  # int() takes '1_0', ' 1' and other scripts' digits
  if len(s) > 4000 or not _BIG_INT.fullmatch(s):
    raise DecodeError(f"bad big int {s[:40]!r}", path)
  return int(s)


def _encode_seq(field):
  def f(enc, v, path):
    out = pb.Value()
    lst = getattr(out, field)
    lst.SetInParent()
    for i, x in enumerate(v):
      lst.items.append(enc.value(x, f"{path}[{i}]"))
    return out
  return f


def _decode_seq(make):
  def f(dec, msg, path):
    return make(dec.value(x, f"{path}[{i}]") for i, x in enumerate(msg.items))
  return f


def _encode_dict(enc, v, path):
  out = pb.Value()
  out.dict.SetInParent()
  for k, x in v.items():
    out.dict.entries.add(key=enc.value(k, f"{path}.key"), value=enc.value(x, f"{path}[{k!r}]"))
  return out


def _decode_dict(dec, msg, path):
  out = {}
  for e in msg.entries:
    k = dec.value(e.key, f"{path}.key")
    try:
      out[k] = dec.value(e.value, f"{path}[{k!r}]")
    except TypeError:
      raise DecodeError(f"unhashable dict key {k!r}", path) from None
  return out


def _encode_frozenset(enc, v, path):
  try:
    items = sorted(v)
  except TypeError:
    items = sorted(v, key=repr)
  return _encode_seq("frozenset")(enc, items, path)


def _decode_frozenset(dec, msg, path):
  try:
    return frozenset(dec.value(x, f"{path}[{i}]") for i, x in enumerate(msg.items))
  except TypeError:
    raise DecodeError("unhashable frozenset item", path) from None


def _encode_array(kind):
  def encode(enc, v, path):
    st = enc.state
    msg = arrays.encode_array(v, kind, path, st.out_of_line)
    if msg.HasField("external"):
      st.features.add(external.FEATURE)
    st.inline_bytes += len(msg.data)
    if st.inline_bytes > arrays.MAX_INLINE_BYTES:
      raise arrays.too_big(st.inline_bytes, path, saving=st.out_of_line is not None)
    return pb.Value(array=msg)
  return encode


def _encode_dtype(enc, v, path):
  d, impl = encode_dtype(v, path)
  return pb.Value(dtype=pb.DtypeValue(dtype=d, key_impl=impl))


def _encode_jnp_scalar_type(enc, v, path):
  out = _encode_dtype(enc, v.dtype, path)
  if jnp_scalar_type(v.dtype) is not v:
    raise EncodeError(f"unsupported scalar type {v!r}", path)
  out.dtype.jnp_scalar_type = True
  return out


def _encode_numpy_scalar_type(enc, v, path):
  out = _encode_dtype(enc, np.dtype(v), path)
  if np.dtype(v).type is not v:
    raise EncodeError(f"unsupported scalar type {v!r}", path)
  out.dtype.numpy_scalar_type = True
  return out


def _decode_dtype(dec, msg, path):
  dtype = decode_dtype(msg.dtype, msg.key_impl, path)
  if msg.numpy_scalar_type:
    if msg.dtype == pb.DTYPE_KEY or msg.jnp_scalar_type:
      raise DecodeError(f"no NumPy scalar type for {dtype}", path)
    return dtype.type
  if msg.jnp_scalar_type:
    t = jnp_scalar_type(dtype) if msg.dtype != pb.DTYPE_KEY else None
    if t is None:
      raise DecodeError(f"no jax.numpy scalar type for {dtype}", path)
    return t
  return dtype


def _encode_enum(enc, v, path):
  name = names.ENUMS.name(type(v))
  if name is None:
    raise EncodeError(f"enum type {type(v).__module__}.{type(v).__qualname__} is not allow-listed", path)
  return pb.Value(enum=pb.EnumValue(type=name, member=v.name))


def _decode_enum(dec, msg: pb.EnumValue, path):
  cls = names.ENUMS.get(msg.type)
  if cls is None:  # a type that moved in another JAX release?
    cls = names.ENUMS.get(upgrade.type_alias(msg.type))
  if cls is None and msg.type in upgrade.FOREIGN_ENUMS:  # a newer JAX's: for the upgraders
    return standins.EnumStandIn(msg.type, msg.member)
  if cls is None:
    raise DecodeError(f"enum type {msg.type!r} is not allow-listed"
                      f"{names.optional_failure(msg.type)}", path)
  try:
    return cls[msg.member]
  except KeyError:
    raise DecodeError(f"{msg.type} has no member {msg.member!r}", path) from None


def _encode_record(enc, v, path):
  name = names.RECORDS.name(type(v))
  if name is None:
    raise EncodeError(f"type {type(v).__module__}.{type(v).__qualname__} is not allow-listed", path)
  return _encode_named_record(enc, name, dict(record_fields(v)), path)


def _encode_named_record(enc, name, fields, path):
  out = pb.Value(record=pb.Record(type=name))
  for f, x in fields.items():
    out.record.fields.add(name=f, value=enc.value(x, f"{path}.{f}"))
  return out


def _decode_record(dec, msg: pb.Record, path):
  cls = names.RECORDS.get(msg.type)
  if cls is None:  # a type that moved in another JAX release?
    cls = names.RECORDS.get(upgrade.type_alias(msg.type))
  build = None if cls is not None else upgrade.foreign_record(msg.type)
  if cls is None and build is None:
    raise DecodeError(f"record type {msg.type!r} is not allow-listed"
                      f"{names.optional_failure(msg.type)}", path)
  fields = {}
  for f in msg.fields:
    if f.name in fields:
      raise DecodeError(f"field {f.name!r} given twice", path)
    fields[f.name] = dec.value(f.value, f"{path}.{f.name}")
  if build is not None:
    try:
      return build(fields)
    except Exception as e:
      raise DecodeError(f"cannot build {msg.type}: {type(e).__name__}: {e}", path) from None
  return make_record(cls, fields, path)


def _encode_function(enc, v, path):
  enc.state.features.add("functions")
  return pb.Value(function=names.function_name(v))


def _decode_function(dec, name, path):
  fn = names.function(name)
  if fn is None:
    raise DecodeError(f"function {name!r} is not known in this process: register it with "
                      f"jaxpr_proto.register_function(fn, name={name!r})", path)
  return fn


def _decode_singleton(dec, name, path):
  obj = names.SINGLETONS.get(name)
  if obj is None:
    raise DecodeError(f"unknown singleton {name!r}", path)
  return obj


_BY_TYPE = {
    type(None): lambda enc, v, path: pb.Value(none=pb.NoneValue()),
    bool: lambda enc, v, path: pb.Value(bool=v),
    int: _encode_int,
    float: lambda enc, v, path: pb.Value(float=v),
    complex: lambda enc, v, path: pb.Value(complex=pb.Complex(real=v.real, imag=v.imag)),
    str: lambda enc, v, path: pb.Value(str=v),
    bytes: lambda enc, v, path: pb.Value(bytes=v),
    tuple: _encode_seq("tuple"),
    list: _encode_seq("list"),
    dict: _encode_dict,
    frozenset: _encode_frozenset,
    set: _encode_frozenset,
    np.ndarray: _encode_array(_K.ARRAY_KIND_NUMPY_UNSPECIFIED),
    compat.TypedNdArray: _encode_array(_K.ARRAY_KIND_TYPED_NDARRAY),
    compat.TypedInt: _encode_array(_K.ARRAY_KIND_TYPED_INT),
    compat.TypedFloat: _encode_array(_K.ARRAY_KIND_TYPED_FLOAT),
    compat.TypedComplex: _encode_array(_K.ARRAY_KIND_TYPED_COMPLEX),
    compat.Jaxpr: lambda enc, v, path: pb.Value(jaxpr=enc.jaxpr(v, path)),
    # After Jaxpr: from JAX 0.11 they are one class, and every jaxpr is closed.
    compat.ClosedJaxpr: lambda enc, v, path: pb.Value(closed_jaxpr=enc.closed_jaxpr(v, path)),
    compat.AbstractMesh: lambda enc, v, path: pb.Value(mesh=sharding.encode_mesh(v, path)),
    compat.Mesh: lambda enc, v, path: pb.Value(mesh=sharding.encode_mesh(v, path)),
    compat.PartitionSpec: lambda enc, v, path: pb.Value(
        partition_spec=sharding.encode_spec(v, path, enc.state.features)),
    compat.NamedSharding: lambda enc, v, path: pb.Value(
        named_sharding=sharding.encode_named_sharding(v, path, enc.state.features)),
    jax.tree_util.PyTreeDef: lambda enc, v, path: pb.Value(treedef=pytrees.encode_treedef(v, enc.value, path)),
    compat.Traceback: lambda enc, v, path: pb.Value(traceback=tracebacks.encode_traceback_value(enc, v)),
}

# Families, tried in order when the exact type is not in the table.
_FAMILIES = [
    (lambda v: isinstance(v, np.dtype) or compat.is_key_dtype(v), _encode_dtype),
    (lambda v: isinstance(v, type) and issubclass(v, np.generic), _encode_numpy_scalar_type),
    # jnp.float32 and friends: scalar types that stand for their dtype.
    (lambda v: isinstance(v, type) and isinstance(getattr(v, "dtype", None), np.dtype),
     _encode_jnp_scalar_type),
    (lambda v: isinstance(v, np.generic), _encode_array(_K.ARRAY_KIND_NUMPY_SCALAR)),
    (lambda v: isinstance(v, jax.Array), _encode_array(_K.ARRAY_KIND_JAX)),
    (lambda v: isinstance(v, compat.Primitive),
     lambda enc, v, path: pb.Value(primitive=pb.PrimitiveRef(index=enc.primitive(v, path)))),
    (lambda v: isinstance(v, (compat.ShapedArray, compat.AbstractToken)),
     lambda enc, v, path: pb.Value(aval=enc.aval(v, path))),
    (lambda v: compat.is_symbolic_dim(v), lambda enc, v, path: pb.Value(symbolic_dim=enc.symbolic_dim(v, path))),
    (lambda v: isinstance(v, enum.Enum), _encode_enum),
    (lambda v: names.RECORDS.name(type(v)) is not None, _encode_record),
    (lambda v: compat.policy_record(v) is not None,
     lambda enc, v, path: _encode_named_record(enc, *compat.policy_record(v), path)),
    (lambda v: callable(v) and names.function_name(v) is not None, _encode_function),
]

# Value kind -> decoder.
_DECODERS = {
    "none": lambda dec, m, path: None,
    "bool": lambda dec, m, path: m,
    "int": lambda dec, m, path: m,
    "float": lambda dec, m, path: m,
    "complex": lambda dec, m, path: complex(m.real, m.imag),
    "str": lambda dec, m, path: m,
    "bytes": lambda dec, m, path: m,
    "dtype": _decode_dtype,
    "array": lambda dec, m, path: arrays.decode_array(m, path, dec.state.source),
    "tuple": _decode_seq(tuple),
    "list": _decode_seq(list),
    "dict": _decode_dict,
    "frozenset": _decode_frozenset,
    "jaxpr": lambda dec, m, path: dec.jaxpr(m, path),
    "closed_jaxpr": lambda dec, m, path: dec.closed_jaxpr(m, path),
    "enum": _decode_enum,
    "record": _decode_record,
    "treedef": lambda dec, m, path: dec.treedef(m, path),
    "mesh": lambda dec, m, path: sharding.decode_mesh(m, path),
    "partition_spec": lambda dec, m, path: sharding.decode_spec(m, path),
    "named_sharding": lambda dec, m, path: sharding.decode_named_sharding(m, path),
    "primitive": lambda dec, m, path: dec.primitive(m.index, path),
    "rule": lambda dec, m, path: dec.rule(m, path),
    "aval": lambda dec, m, path: dec.aval(m, path),
    "traceback": lambda dec, m, path: tracebacks.decode_traceback_value(dec, m, path),
    "function": _decode_function,
    "big_int": _decode_big_int,
    "extension": lambda dec, m, path: extensions.decode(dec, m, path),
    "singleton": _decode_singleton,
    "symbolic_dim": lambda dec, m, path: dec.symbolic_dim(m, path),
}
