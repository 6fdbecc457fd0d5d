"""The adapter for JAX 0.9, kept for moving files between releases
(tests/test_cross_jax.py): `common` plus JAX 0.9's forms of what 0.10 changed."""
from jaxpr_proto.compat.common import *  # noqa: F401,F403
from jaxpr_proto.compat.common import (MemorySpace, ShapedArray, TypedNdArray,
                                     core, mesh_lib)
from jax._src import config as _config
from jax._src import xla_metadata_lib as _xla_metadata_lib

from jaxpr_proto.errors import VersionError

MINOR = (0, 9)
UNIFIED_JAXPR = False

check_jaxpr = core.check_jaxpr
CONTEXT_FIELDS: dict = {}


class ManualAxisType:
  """JAX 0.9 keeps the varying manual axes in ShapedArray.vma, and unreduced /
  reduced axes only in the sharding's PartitionSpec."""
  __slots__ = ("varying", "unreduced", "reduced")

  def __init__(self, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
    self.varying, self.unreduced, self.reduced = varying, unreduced, reduced


def manual_axis_type(aval):
  spec = getattr(aval.sharding, "spec", None)
  return ManualAxisType(varying=frozenset(aval.vma),
                        unreduced=frozenset(getattr(spec, "unreduced", ())),
                        reduced=frozenset(getattr(spec, "reduced", ())))


def shaped_array(shape, dtype, weak_type=False, *, sharding=None,
                 manual_axis_type=None, memory_space=MemorySpace.Device):
  vma = frozenset()
  if manual_axis_type is not None:
    spec = getattr(sharding, "spec", None)
    for kind in ("unreduced", "reduced"):
      axes = getattr(manual_axis_type, kind)
      if axes and not axes <= frozenset(getattr(spec, kind, ())):
        raise VersionError(f"{kind} manual axes outside the sharding need JAX >= 0.10")
    vma = manual_axis_type.varying
  return ShapedArray(shape, dtype, weak_type, sharding=sharding, vma=vma,
                     memory_space=memory_space)


def make_context(compute_type, threefry_partitionable, cur_abstract_mesh,
                 remove_size_one_mesh_axis, xla_metadata, fields):
  ctx = core.JaxprEqnContext(compute_type, threefry_partitionable,
                             None if xla_metadata is None else dict(xla_metadata))
  ctx.cur_abstract_mesh = cur_abstract_mesh
  ctx.remove_size_one_mesh_axis = remove_size_one_mesh_axis
  return ctx


def default_context():
  return core.JaxprEqnContext(
      _config.compute_on_context_manager.value,
      _config.threefry_partitionable.value,
      _xla_metadata_lib.current_xla_metadata())


def abstract_device(device_kind, num_cores=None, platform=None):
  """JAX 0.9's AbstractDevice has no platform."""
  return mesh_lib.AbstractDevice(device_kind, num_cores)


def typed_ndarray(x):
  """JAX 0.9's TypedNdArray takes a weak_type bool."""
  return TypedNdArray(x, False)
