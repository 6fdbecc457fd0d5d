"""The adapter for JAX 0.12: the 0.11 adapter plus what 0.12 changed."""
from jaxpr_proto.compat.v0_11.adapter import *  # noqa: F401,F403
from jaxpr_proto.compat.v0_11.adapter import CONTEXT_FIELDS as _CONTEXT_FIELDS_0_11, core
from jaxpr_proto.compat.v0_11.adapter import HIPRIMS as _HIPRIMS_0_11
from jax._src.numpy import hijax as _np_hijax
from jax._src.numpy import ufuncs as _ufuncs

MINOR = (0, 12)

# JaxprEqnContext gained no_collectives (after remove_size_one_mesh_axis).
CONTEXT_FIELDS = {**_CONTEXT_FIELDS_0_11, "no_collectives": frozenset()}


def make_context(compute_type, threefry_partitionable, cur_abstract_mesh,
                 remove_size_one_mesh_axis, xla_metadata, fields):
  return core.JaxprEqnContext._create(
      compute_type, threefry_partitionable, cur_abstract_mesh,
      fields["cur_layout_mode"], remove_size_one_mesh_axis,
      fields["no_collectives"], xla_metadata)


# HiJAX primitives that jnp builds in JAX 0.12, rebuilt by their own
# constructors (which check their arguments) from the input avals, output
# aval and params that the file carries.
HIPRIMS = {
    **_HIPRIMS_0_11,
    "jax::numpy.hijax.SearchSorted": (_np_hijax.SearchSorted, lambda i, o, p: _np_hijax.SearchSorted(
        *i, out_dtype=o.dtype, **p)),
    "jax::numpy.hijax.Nonzero": (_np_hijax.Nonzero, lambda i, o, p: _np_hijax.Nonzero(*i, **p)),
    "jax::numpy.hijax.Einsum": (_np_hijax.Einsum, lambda i, o, p: _np_hijax.Einsum(*i, **p)),
    "jax::numpy.ufuncs.Ldexp": (_ufuncs.Ldexp, lambda i, o, p: _ufuncs.Ldexp(**p)),
    "jax::numpy.ufuncs.Frexp": (_ufuncs.Frexp, lambda i, o, p: _ufuncs.Frexp(**p)),
}
