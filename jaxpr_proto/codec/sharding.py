"""Meshes, partition specs and named shardings (in avals, params and eqn
contexts). A mesh is bound, on load, to this process's devices: a concrete
mesh to its local devices, an abstract mesh to their kind, so that a file
written on one backend opens on another (a CPU's shard_map on a TPU)."""
from __future__ import annotations

import functools

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.codec.arrays import num_elements
from jaxpr_proto.errors import DecodeError, EncodeError, VersionError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

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
  if any(n < 1 for n in sizes):  # a mesh of no devices aborts XLA (py_device_list.cc)
    raise DecodeError(f"mesh axis sizes must be positive, got {dict(zip(names, sizes))}", path)
  if not msg.concrete:
    # The writer's device kind is not ours: the abstract mesh describes this
    # process's devices, as the concrete meshes bound to them do (a kind of
    # another backend made the avals of a shard_map's body differ from its
    # operands' on a TPU).
    ad = _local_abstract_device() if msg.HasField("abstract_device") else None
    return compat.AbstractMesh(sizes, names, types, abstract_device=ad)
  if not names:
    return compat.mesh_lib.empty_concrete_mesh
  # A concrete mesh is bound to this process's local devices.
  n = num_elements(sizes, path)
  devices = jax.local_devices()
  if n > len(devices):
    raise DecodeError(
        f"the program needs a mesh of {n} devices {dict(zip(names, sizes))}, "
        f"but only {len(devices)} local devices are available", path)
  return compat.Mesh(np.array(devices[:n]).reshape(sizes), names, types)


@functools.cache
def _local_abstract_device():
  """The abstract device of a mesh of this process's local devices, as JAX
  derives it (`Mesh.abstract_mesh`)."""
  return compat.Mesh(np.array(jax.local_devices()[:1]), ("_",)).abstract_mesh.abstract_device


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
  named = [n for e in msg.entries for n in e.axes.names if n]
  if len(set(named)) != len(named):  # JAX's DuplicateSpecError, raised only at jit
    raise DecodeError(f"the spec maps a mesh axis to more than one dimension: {named}", path)
  kw = {}
  if msg.unreduced_kind:
    kinds = compat.UNREDUCED_KINDS
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
  # NamedSharding leaves this to lowering, where an empty mesh aborts XLA.
  named = {n for e in msg.spec.entries for n in e.axes.names if n}
  named |= set(msg.spec.unreduced) | set(msg.spec.reduced)
  unknown = sorted(named - {a.name for a in msg.mesh.axes})
  if unknown:
    raise DecodeError(f"the spec names axes {unknown} that the mesh lacks", path + ".spec")
  if kind is not None and msg.mesh.concrete and not msg.mesh.axes:
    # A memory kind is checked against the mesh's devices: with none, JAX
    # raises once and then aborts the process (py_device_list.cc).
    raise DecodeError("a NamedSharding over an empty concrete mesh cannot have a memory kind",
                      path + ".memory_kind")
  try:
    return compat.NamedSharding(mesh, spec, memory_kind=kind)
  except Exception as e:
    raise DecodeError(f"bad NamedSharding: {e}", path) from None
