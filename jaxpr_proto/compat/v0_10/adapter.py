"""The adapter for JAX 0.10: `common` plus what JAX 0.9 lacked."""
from jaxpr_proto.compat.common import *  # noqa: F401,F403
from jaxpr_proto.compat.common import TypedNdArray, core, jax, jex_core, mesh_lib

MINOR = (0, 10)

# Jaxpr and ClosedJaxpr are two classes (one from JAX 0.11).
UNIFIED_JAXPR = False

ManualAxisType = core.ManualAxisType
check_jaxpr = jex_core.check_jaxpr

# Eqn-context fields beyond the five of format v1.0 (compute_type,
# threefry_partitionable, cur_abstract_mesh, remove_size_one_mesh_axis,
# xla_metadata), in JaxprEqnContext._create's order, with the value that
# means "not set". Files carry them in EqnContext.fields.
CONTEXT_FIELDS: dict = {}


def make_context(compute_type, threefry_partitionable, cur_abstract_mesh,
                 remove_size_one_mesh_axis, xla_metadata, fields):
  """A JaxprEqnContext; `fields` holds the CONTEXT_FIELDS that are set."""
  return core.JaxprEqnContext._create(
      compute_type, threefry_partitionable, cur_abstract_mesh,
      remove_size_one_mesh_axis, xla_metadata)


def default_context():
  return core.JaxprEqnContext()


def manual_axis_type(aval):
  """The aval's manual axes: an object with .varying, .unreduced, .reduced."""
  return aval.manual_axis_type


shaped_array = core.ShapedArray


def abstract_device(device_kind, num_cores=None, platform=None):
  """mesh.AbstractDevice; a file without a platform (JAX 0.9 wrote none)
  takes it from the local devices of that kind."""
  if not platform:
    platform = next((d.platform for d in jax.local_devices() if d.device_kind == device_kind),
                    str(device_kind).lower())
  return mesh_lib.AbstractDevice(device_kind, num_cores, platform)


def typed_ndarray(x):
  """A literal's TypedNdArray."""
  return TypedNdArray(x, None)
