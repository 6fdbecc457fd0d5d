"""Every use of JAX internals (`jax._src`) lives here, so that a new JAX release
is a one-file change. The rest of the package imports JAX objects from here."""
from __future__ import annotations

import jax
import jax.extend.core as jex_core
import numpy as np
from jax._src import ad_checkpoint
from jax._src import core
from jax._src import effects as effects_lib
from jax._src import linear_util as lu
from jax._src import literals
from jax._src import mesh as mesh_lib
from jax._src import partition_spec
from jax._src import sharding_impls
from jax._src import source_info_util
from jax._src.interpreters import partial_eval as pe
from jax._src.random import prng

from jaxpr_proto.errors import DecodeError

ClosedJaxpr = jex_core.ClosedJaxpr
Jaxpr = jex_core.Jaxpr
JaxprEqn = core.JaxprEqn
Var = core.Var
Literal = core.Literal
DropVar = core.DropVar
Primitive = jex_core.Primitive
Device = jax.Device
Tracer = core.Tracer
ShapedArray = core.ShapedArray
AbstractToken = core.AbstractToken
abstract_token = core.abstract_token
DebugInfo = core.DebugInfo
JaxprEqnContext = core.JaxprEqnContext
MemorySpace = core.MemorySpace
ManualAxisType = core.ManualAxisType
SourceInfo = source_info_util.SourceInfo
NameStack = source_info_util.NameStack
Scope = source_info_util.Scope
Transform = source_info_util.Transform
AbstractMesh = mesh_lib.AbstractMesh
AbstractDevice = mesh_lib.AbstractDevice
Mesh = mesh_lib.Mesh
AxisType = mesh_lib.AxisType
NamedSharding = jax.sharding.NamedSharding
PartitionSpec = jax.sharding.PartitionSpec
UNCONSTRAINED = partition_spec.PartitionSpec.UNCONSTRAINED
UNSPECIFIED = sharding_impls.UNSPECIFIED
float0 = jax.dtypes.float0
TypedInt = literals.TypedInt
TypedFloat = literals.TypedFloat
TypedComplex = literals.TypedComplex
TypedNdArray = literals.TypedNdArray
Effect = effects_lib.Effect
WrappedFun = lu.WrappedFun
wrap_init = lu.wrap_init
eval_jaxpr = core.eval_jaxpr
check_jaxpr = jex_core.check_jaxpr
jaxpr_as_fun = jex_core.jaxpr_as_fun
trace_to_jaxpr_dynamic = pe.trace_to_jaxpr_dynamic
convert_constvars_jaxpr = pe.convert_constvars_jaxpr


def eqn(invars, outvars, primitive, params, effects, source_info, ctx):
  return core.JaxprEqn(invars, outvars, primitive, params, effects,
                       source_info, ctx)


def make_context(compute_type, threefry_partitionable, cur_abstract_mesh,
                 remove_size_one_mesh_axis, xla_metadata):
  return core.JaxprEqnContext._create(
      compute_type, threefry_partitionable, cur_abstract_mesh,
      remove_size_one_mesh_axis, xla_metadata)


def default_context():
  return core.JaxprEqnContext()


def empty_source_info():
  return source_info_util.new_source_info()


# --- PRNG key dtypes -------------------------------------------------------

def is_key_dtype(dtype) -> bool:
  return isinstance(dtype, prng.KeyTy)


def key_impl_name(dtype) -> str:
  return dtype._impl.name


def key_impl(name: str, path: str = ""):
  impl = prng.prngs.get(name)
  if impl is None:
    raise DecodeError(f"unknown PRNG implementation {name!r}", path)
  return impl


def key_dtype(name: str, path: str = ""):
  return prng.KeyTy(key_impl(name, path))


def is_prng_impl(x) -> bool:
  return isinstance(x, prng.PRNGImpl)


def is_key_array(x) -> bool:
  return isinstance(x, prng.PRNGKeyArray)


def key_data(x):
  return np.asarray(jax.random.key_data(x))


def wrap_key_data(data, impl_name: str):
  return jax.random.wrap_key_data(data, impl=impl_name)


# --- symbolic dims ---------------------------------------------------------

def is_symbolic_dim(d) -> bool:
  return core.is_symbolic_dim(d)


# --- remat policies --------------------------------------------------------
checkpoint_policies = ad_checkpoint.checkpoint_policies
DotsSaveable = ad_checkpoint.DotsSaveable
SaveOnlyTheseNames = ad_checkpoint.SaveOnlyTheseNames
SaveAnyNamesButThese = ad_checkpoint.SaveAnyNamesButThese


def no_current_trace():
  """A context in which tracing starts afresh (as JAX's thunks run)."""
  return core.set_current_trace(None)


# --- objects that the value codec writes by name ----------------------------

def is_prng_impl_obj(x) -> bool:
  return isinstance(x, prng.PRNGImpl)


def policy_factories():
  """The remat policy factories whose closures are written by their arguments."""
  p = checkpoint_policies
  return {
      "jax::save_from_both_policies": (p.save_from_both_policies, ("policy_1", "policy_2")),
      "jax::offload_dot_with_no_batch_dims": (p.offload_dot_with_no_batch_dims, ("offload_src", "offload_dst")),
  }


def symbolic_constraints(scope) -> list[str]:
  return [c.debug_str for c in scope._explicit_constraints]


def named_axis_effect(name):
  return core.NamedAxisEffect(name)


NamedAxisEffect = core.NamedAxisEffect


def internal_pytree_types():
  """JAX's own pytree node classes that appear in eqn params."""
  from jax._src import custom_derivatives
  from jax._src.state import indexing
  from jax._src.lax.control_flow.solves import _LinearSolveTuple
  return {"jax::NDIndexer": indexing.NDIndexer, "jax::Slice": indexing.Slice,
          "jax::Residuals": custom_derivatives.Residuals,
          "jax::_LinearSolveTuple": _LinearSolveTuple}


def extra_enum_types():
  """Enums of jaxlib that appear in eqn params."""
  from jax._src.lib import _jax as jaxlib_ext
  return {"jax::ArrayCopySemantics": jaxlib_ext.ArrayCopySemantics}


def local_device(platform: str, index: int):
  devs = [d for d in jax.local_devices() if d.platform == platform] or jax.local_devices()
  return devs[index % len(devs)] if devs else None
