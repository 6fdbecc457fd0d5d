"""JAX's classes, functions and primitives that the rest of jaxpr_proto
uses, each under one name (`compat.ClosedJaxpr`, `compat.pp_eqn`, ...)."""
from __future__ import annotations

import jax
import jax.extend.core as jex_core
from jax._src import core
from jax._src import dtypes as jax_dtypes
from jax._src import effects as effects_lib
from jax._src import linear_util as lu
from jax._src import literals
from jax._src import mesh as mesh_lib
from jax._src import partition_spec
from jax._src import sharding_impls
from jax._src import source_info_util
from jax._src import util as jax_util
from jax._src.interpreters import ad
from jax._src.interpreters import partial_eval as pe
from jax._src.state import types as state_types

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
SourceInfo = source_info_util.SourceInfo
Traceback = source_info_util.Traceback
PyTreeDef = jax.tree_util.PyTreeDef
NameStack = source_info_util.NameStack
Scope = source_info_util.Scope
Transform = source_info_util.Transform
AbstractMesh = mesh_lib.AbstractMesh
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
# The call primitive of a closed jaxpr (from JAX 0.11 an alias of eval_jaxpr_p).
closed_call_p = core.closed_call_p
jaxpr_as_fun = jex_core.jaxpr_as_fun
trace_to_jaxpr_dynamic = pe.trace_to_jaxpr_dynamic
convert_constvars_jaxpr = pe.convert_constvars_jaxpr
partial_eval_jaxpr_nounits = pe.partial_eval_jaxpr_nounits
# What JAX raises when asked to differentiate a custom_vjp call with respect to
# a value its function closed over (custom_derivatives.lift_fwd).
CustomVJPException = ad.CustomVJPException
# How JAX holds the static args it binds into a wrapped function (a
# custom_jvp's nondiff_argnums): the value is the wrapper's `val`.
STATIC_ARG_WRAPPERS = (jax_util.Unhashable, jax_util.Hashable)
# What only a trace makes (a wrapped function, an output store, the trace):
# a closure of JAX's that holds one was made by that trace.
PER_TRACE_TYPES = (lu.WrappedFun, lu.Store, lu.EqualStore, core.Trace)


AbstractRef = state_types.AbstractRef
short_dtype_name = jax_dtypes.short_dtype_name

# Pretty-printing pieces (for the structural diff).
JaxprPpContext = core.JaxprPpContext
JaxprPpSettings = core.JaxprPpSettings
pp_vars = core.pp_vars
pp_var = core.pp_var
pp_eqn = core.pp_eqn
