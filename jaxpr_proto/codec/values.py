"""The allow-lists of the generic value codec, and the codecs of plain data
that need no module tables: arrays, meshes, partition specs, pytree structures.

Decoding only ever constructs types found in these tables, which are built
from JAX's own modules at import time; a name read from a file is looked up
here and nowhere else.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import sys

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.codec.dtypes import SUB_BYTE_BITS, decode_dtype, encode_dtype
from jaxpr_proto.errors import DecodeError, EncodeError, VersionError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

# Types that look like records but must not be built from file data.
_NOT_RECORDS = {"PRNGImpl"}


def _is_record_type(cls) -> bool:
  if cls.__name__ in _NOT_RECORDS:
    return False
  if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
    return True
  return dataclasses.is_dataclass(cls) and isinstance(cls, type)


def _scan_param_types():
  enums, records = {}, {}
  for mname in compat.PARAM_TYPE_MODULES:
    mod = sys.modules.get(mname)
    if mod is None:
      continue
    short = mname.removeprefix(compat.PARAM_TYPE_PREFIX)
    for attr, cls in sorted(vars(mod).items()):
      if not isinstance(cls, type) or cls.__module__ != mname:
        continue
      name = f"jax::{short}.{cls.__qualname__}"
      if issubclass(cls, enum.Enum):
        enums[name] = cls
      elif _is_record_type(cls):
        records[name] = cls
  return enums, records


ENUM_TYPES: dict[str, type]
RECORD_TYPES: dict[str, type]
ENUM_TYPES, RECORD_TYPES = _scan_param_types()
ENUM_TYPES.update(compat.extra_enum_types())
_ENUM_NAMES = {cls: name for name, cls in ENUM_TYPES.items()}
_RECORD_NAMES = {cls: name for name, cls in RECORD_TYPES.items()}


def enum_name(cls):
  return _ENUM_NAMES.get(cls)


def record_name(cls):
  return _RECORD_NAMES.get(cls)


def register_param_type(cls, name: str) -> None:
  """Allow-lists a user enum, NamedTuple or dataclass for eqn params."""
  if issubclass(cls, enum.Enum):
    ENUM_TYPES[name], _ENUM_NAMES[cls] = cls, name
  elif _is_record_type(cls):
    RECORD_TYPES[name], _RECORD_NAMES[cls] = cls, name
  else:
    raise TypeError(f"{cls} is neither an enum nor a NamedTuple/dataclass")


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


# Objects that are encoded by name: singletons of JAX, and remat policies.
SINGLETONS: dict[str, object] = {
    "jax::UNSPECIFIED": compat.UNSPECIFIED,
    "jax::UNCONSTRAINED": compat.UNCONSTRAINED,
    "jax::empty_concrete_mesh": compat.mesh_lib.empty_concrete_mesh,
    "jax::checkpoint_policies.everything_saveable":
        compat.checkpoint_policies.everything_saveable,
    "jax::checkpoint_policies.nothing_saveable":
        compat.checkpoint_policies.nothing_saveable,
    "jax::abstract_token": compat.abstract_token,
}
_SINGLETON_NAMES = {id(v): k for k, v in SINGLETONS.items()}


def singleton_name(x):
  name = _SINGLETON_NAMES.get(id(x))
  return name if name is not None and SINGLETONS[name] is x else None


# --- effects ---------------------------------------------------------------

def _effects_table():
  table = {}
  for name, (mod, attr) in compat.EFFECT_SINGLETONS.items():
    m = sys.modules.get(mod)
    if m is not None and hasattr(m, attr):
      table[name] = getattr(m, attr)
  return table


EFFECTS = _effects_table()
_EFFECT_NAMES = {id(v): k for k, v in EFFECTS.items()}
INPUT_EFFECTS = dict(compat.INPUT_EFFECTS)
_INPUT_EFFECT_NAMES = {v: k for k, v in INPUT_EFFECTS.items()}


def effect_name(eff):
  """(name, input var or None) of an effect; None if not allow-listed."""
  name = _EFFECT_NAMES.get(id(eff))
  if name is not None:
    return name, None
  name = _INPUT_EFFECT_NAMES.get(type(eff))
  if name is not None:
    return name, eff.input
  if type(eff) is compat.NamedAxisEffect:
    return "jax::named_axis", None
  return None, None


# --- arrays ----------------------------------------------------------------

_MAX_ELEMENTS = 1 << 40


def _num_elements(shape, path):
  n = 1
  for d in shape:
    if d < 0:
      raise DecodeError(f"negative dimension {d} in shape {list(shape)}", path)
    n *= d
    if n > _MAX_ELEMENTS:
      raise DecodeError(f"shape {list(shape)} is too large", path)
  return n


def _pack(a: np.ndarray, bits: int) -> bytes:
  u = a.reshape(-1).view(np.uint8) & ((1 << bits) - 1)
  per = 8 // bits
  u = np.concatenate([u, np.zeros((-len(u)) % per, np.uint8)]).reshape(-1, per)
  out = np.zeros(len(u), np.uint8)
  for i in range(per):
    out |= u[:, i] << (i * bits)
  return out.tobytes()


def _unpack(data: bytes, n: int, bits: int, dtype) -> np.ndarray:
  per = 8 // bits
  b = np.frombuffer(data, np.uint8)
  parts = [(b >> (i * bits)) & ((1 << bits) - 1) for i in range(per)]
  u = np.stack(parts, axis=1).reshape(-1)[:n]
  signed = np.dtype(dtype).name.startswith("int")
  if signed:  # sign-extend into the byte, so that view() gives the value
    u = np.where(u >= (1 << (bits - 1)), u | (0xFF << bits) & 0xFF, u).astype(np.uint8)
  return u.view(dtype)


# Typed Python scalars keep their Python value at full precision.
_TYPED_SCALAR_BUFFERS = {pb.ARRAY_KIND_TYPED_INT: np.dtype("<i8"),
                         pb.ARRAY_KIND_TYPED_FLOAT: np.dtype("<f8"),
                         pb.ARRAY_KIND_TYPED_COMPLEX: np.dtype("<c16")}


def encode_array(x, kind: int, path: str) -> pb.Array:
  out = pb.Array(kind=kind)
  buf = _TYPED_SCALAR_BUFFERS.get(kind)
  if buf is not None:
    out.dtype, out.key_impl = encode_dtype(x.dtype, path)
    try:
      out.data = np.array(x, buf).tobytes()
    except OverflowError:
      raise EncodeError(f"typed scalar {x!r} does not fit {buf}", path) from None
    return out
  if compat.is_key_array(x):
    out.dtype, out.key_impl = encode_dtype(x.dtype, path)
    out.shape.extend(x.shape)
    x = compat.key_data(x)
  else:
    x = np.asarray(x)
    out.dtype, out.key_impl = encode_dtype(x.dtype, path)
    out.shape.extend(x.shape)
  if out.dtype == pb.DTYPE_FLOAT0:
    return out
  bits = SUB_BYTE_BITS.get(out.dtype)
  if bits:
    out.data = _pack(np.ascontiguousarray(x), bits)
  else:
    x = np.ascontiguousarray(x)
    if x.dtype.byteorder == ">":
      x = x.byteswap().view(x.dtype.newbyteorder("<"))
    out.data = x.tobytes()
  return out


def decode_array_np(msg: pb.Array, path: str):
  """Returns the numpy value of an Array message (key data for key arrays)."""
  shape = tuple(msg.shape)
  n = _num_elements(shape, path)
  buf = _TYPED_SCALAR_BUFFERS.get(msg.kind)
  if buf is not None:
    if shape or len(msg.data) != buf.itemsize:
      raise DecodeError("a typed scalar needs shape () and one value", path)
    return np.frombuffer(msg.data, buf)[0], decode_dtype(msg.dtype, msg.key_impl, path)
  if msg.dtype == pb.DTYPE_KEY:
    impl = compat.key_impl(msg.key_impl, path)
    kshape = tuple(impl.key_shape)
    want = n * math.prod(kshape) * 4
    if len(msg.data) != want:
      raise DecodeError(f"key array data has {len(msg.data)} bytes, expected {want}", path)
    return np.frombuffer(msg.data, "<u4").reshape(shape + kshape)
  dtype = decode_dtype(msg.dtype, msg.key_impl, path)
  if msg.dtype == pb.DTYPE_FLOAT0:
    if msg.data:
      raise DecodeError("float0 array must carry no data", path)
    return np.zeros(shape, dtype)
  bits = SUB_BYTE_BITS.get(msg.dtype)
  if bits:
    want = -(-n * bits // 8)
    if len(msg.data) != want:
      raise DecodeError(f"array data has {len(msg.data)} bytes, expected {want}", path)
    return _unpack(msg.data, n, bits, dtype).reshape(shape)
  want = n * dtype.itemsize
  if len(msg.data) != want:
    raise DecodeError(
        f"array data has {len(msg.data)} bytes, expected {want} for "
        f"{dtype.name}{list(shape)}", path)
  return np.frombuffer(msg.data, dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(shape)


# --- meshes and shardings --------------------------------------------------

_AXIS_TYPES = {compat.AxisType.Auto: pb.AXIS_TYPE_AUTO_UNSPECIFIED,
               compat.AxisType.Explicit: pb.AXIS_TYPE_EXPLICIT,
               compat.AxisType.Manual: pb.AXIS_TYPE_MANUAL}
_AXIS_TYPES_INV = {v: k for k, v in _AXIS_TYPES.items()}


def encode_mesh(m, path: str) -> pb.Mesh:
  out = pb.Mesh(concrete=isinstance(m, compat.Mesh))
  sizes = m.axis_sizes
  for name, size, t in zip(m.axis_names, sizes, m.axis_types):
    if not isinstance(name, str):
      raise EncodeError(f"mesh axis name {name!r} is not a str", path)
    out.axes.add(name=name, size=size, type=_AXIS_TYPES[t])
  ad = getattr(m, "abstract_device", None)
  if not out.concrete and ad is not None:
    out.abstract_device.device_kind = ad.device_kind
    out.abstract_device.platform = getattr(ad, "platform", "")  # JAX 0.9: none
    if ad.num_cores is not None:
      out.abstract_device.num_cores = ad.num_cores
  if out.concrete and m.devices is not None:
    out.device_ids.extend(int(getattr(d, "id", -1)) for d in m.devices.flat)
  return out


def decode_mesh(msg: pb.Mesh, path: str):
  names = tuple(a.name for a in msg.axes)
  sizes = tuple(a.size for a in msg.axes)
  try:
    types = tuple(_AXIS_TYPES_INV[a.type] for a in msg.axes)
  except KeyError:
    raise DecodeError("unknown mesh axis type", path) from None
  if len(set(names)) != len(names):
    raise DecodeError(f"duplicate mesh axis names {names}", path)
  if not msg.concrete:
    ad = None
    if msg.HasField("abstract_device"):
      a = msg.abstract_device
      ad = compat.abstract_device(a.device_kind, a.num_cores if a.HasField("num_cores") else None,
                               a.platform)
    return compat.AbstractMesh(sizes, names, types, abstract_device=ad)
  if not names:
    return compat.mesh_lib.empty_concrete_mesh
  # A concrete mesh is bound to this process's local devices.
  n = _num_elements(sizes, path)
  devices = jax.local_devices()
  if n > len(devices):
    raise DecodeError(
        f"the program needs a mesh of {n} devices {dict(zip(names, sizes))}, "
        f"but only {len(devices)} local devices are available", path)
  return compat.Mesh(np.array(devices[:n]).reshape(sizes), names, types)


def encode_spec(spec, path: str, features: set | None = None) -> pb.PartitionSpec:
  """A PartitionSpec; `features` gets the Module.required_features it needs."""
  out = pb.PartitionSpec(unreduced=sorted(spec.unreduced),
                         reduced=sorted(spec.reduced))
  kind = getattr(spec, "unreduced_kind", None)  # JAX >= 0.11
  if kind is not None and kind.name != "sum":  # sum: the default, and all JAX 0.10 knows
    out.unreduced_kind = kind.name
    if features is not None:
      features.add("unreduced_kind")
  for p in spec._partitions:
    e = out.entries.add()
    if p is None:
      e.none = True
    elif p is compat.UNCONSTRAINED:
      e.unconstrained = True
    elif isinstance(p, str):
      e.axes.names.append(p)
    elif isinstance(p, tuple) and all(isinstance(n, str) for n in p):
      e.axes.names.extend(p)
      if len(p) == 1:  # keep ('x',) apart from 'x'
        e.axes.names.append("")
    else:
      raise EncodeError(f"unsupported PartitionSpec entry {p!r}", path)
  return out


def decode_spec(msg: pb.PartitionSpec, path: str):
  parts = []
  for e in msg.entries:
    kind = e.WhichOneof("kind")
    if kind == "none" or kind is None:
      parts.append(None)
    elif kind == "unconstrained":
      parts.append(compat.UNCONSTRAINED)
    else:
      names = list(e.axes.names)
      if len(names) == 2 and names[1] == "":
        parts.append((names[0],))
      elif len(names) == 1:
        parts.append(names[0])
      else:
        parts.append(tuple(names))
  kw = {}
  if msg.unreduced_kind:
    kinds = getattr(jax.sharding, "UnreducedKind", None)
    if kinds is None:
      raise VersionError(f"PartitionSpec.unreduced_kind={msg.unreduced_kind!r} needs JAX >= 0.11",
                         path)
    try:
      kw["unreduced_kind"] = kinds[msg.unreduced_kind]
    except KeyError:
      raise DecodeError(f"unknown unreduced_kind {msg.unreduced_kind!r}", path) from None
  try:
    return compat.PartitionSpec(*parts, unreduced=frozenset(msg.unreduced),
                              reduced=frozenset(msg.reduced), **kw)
  except Exception as e:
    raise DecodeError(f"bad PartitionSpec: {e}", path) from None


def encode_named_sharding(s, path: str, features: set | None = None) -> pb.NamedSharding:
  out = pb.NamedSharding(mesh=encode_mesh(s.mesh, path),
                         spec=encode_spec(s.spec, path, features))
  if s.memory_kind is not None:
    out.memory_kind = s.memory_kind
  return out


def decode_named_sharding(msg: pb.NamedSharding, path: str):
  mesh = decode_mesh(msg.mesh, path + ".mesh")
  spec = decode_spec(msg.spec, path + ".spec")
  kind = msg.memory_kind if msg.HasField("memory_kind") else None
  try:
    return compat.NamedSharding(mesh, spec, memory_kind=kind)
  except Exception as e:
    raise DecodeError(f"bad NamedSharding: {e}", path) from None
