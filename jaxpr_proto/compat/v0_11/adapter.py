"""The adapter for JAX 0.11: the 0.10 adapter plus what 0.11 changed."""
from jaxpr_proto.compat.v0_10.adapter import *  # noqa: F401,F403
from jaxpr_proto.compat.v0_10.adapter import FLATTREE_FIELDS, core, jax
from jax._src import api as _api
from jax._src import flattree as _ft
from jax._src import layout as _layout
from jax._src import util as _util

from jaxpr_proto.compat.v0_11.hiprims import HIPRIMS, hiprim_functions, is_hiprim  # noqa: F401

MINOR = (0, 11)

# Jaxpr and ClosedJaxpr are one class: a jaxpr's constvars are its leading
# inputs that have consts attached. Files write every jaxpr value as a closed
# jaxpr; the upgraders turn those back into open jaxprs for older JAX.
UNIFIED_JAXPR = True
# jit's inline param is an enum (a bool before).
Inline = _api.Inline
# PartitionSpec.unreduced_kind's enum (new).
UNREDUCED_KINDS = jax.sharding.UnreducedKind


def jaxpr_key(j) -> int:
  """Closing a jaxpr (Jaxpr(j, consts)) makes a new object that shares j's
  eqn list: that list identifies it."""
  return id(j.eqns)

# JaxprEqnContext gained cur_layout_mode (between cur_abstract_mesh and
# remove_size_one_mesh_axis).
CONTEXT_FIELDS = {"cur_layout_mode": _layout.LayoutMode.AUTO}


def make_context(compute_type, threefry_partitionable, cur_abstract_mesh,
                 remove_size_one_mesh_axis, xla_metadata, fields):
  return core.JaxprEqnContext._create(
      compute_type, threefry_partitionable, cur_abstract_mesh,
      fields["cur_layout_mode"], remove_size_one_mesh_axis, xla_metadata)


# FlatTree params (scan's ft_in and ft_out), written as extensions
# "jax::flattree.<kind>" with the fields of FLATTREE_FIELDS: the kind of each
# FlatTree type, and its fields' values in that order.
_FLATTREE_KINDS = {
    _ft.FTTuple: ("tuple", lambda v: (tuple(v.elts),)),
    _ft.FTPyTree: ("pytree", lambda v: (tuple(v.xs), v.tree)),
    _ft.FTSingleton: ("singleton", lambda v: (v.val,)),
    _ft.FTStatic: ("static", lambda v: (v.val,)),
    _ft.FTFiltered: ("filtered", lambda v: (v.val,)),
    _ft.FTDict: ("dict", lambda v: (tuple(v.keys), tuple(v._vals))),
    _util.Either: ("either", lambda v: (v.is_right, v.val)),
}


def flattree_fields(v):
  """(kind, [(field, value)]) of a FlatTree node or an Either, or None."""
  entry = _FLATTREE_KINDS.get(type(v))
  if entry is None:
    return None
  kind, values = entry
  return kind, list(zip(FLATTREE_FIELDS[kind], values(v)))


FLATTREE_BUILDERS = {
    "tuple": lambda f: _ft.FTTuple(*f["elts"]),
    "pytree": lambda f: _ft.FTPyTree(f["xs"], f["tree"]),
    "singleton": lambda f: _ft.FTSingleton(f["val"]),
    "static": lambda f: _ft.FTStatic(f["val"]),
    "filtered": lambda f: _ft.FTFiltered(f["val"]),
    "dict": lambda f: _ft.FTDict(f["keys"], f["vals"]),
    "either": lambda f: _util.Either(bool(f["is_right"]), f["val"]),
}


def scan_flattrees(num_consts, num_carry, num_xs, num_ys):
  """scan's ft_in and ft_out for operands given by counts (as lax.scan builds them)."""
  return (_ft.pack((_ft.nones(num_consts), _ft.nones(num_carry), _ft.nones(num_xs))),
          _ft.pack((_ft.nones(num_carry), _ft.nones(num_ys))))


# custom_vjp_call's `bwd` returns (input cotangents, backward-pass logs).
def bwd_cotangents(ret):
  cts, logs = ret
  if logs is not None:
    raise TypeError("custom_vjp bwd rules with logs (defvjp_with_logs) are not supported")
  return cts


def bwd_return(cotangents):
  return cotangents, None


def reserve_checkify_codes(largest: int) -> None:
  """checkify's error codes are per checkify call (a CheckifyContext), not
  process-wide: nothing to reserve."""


def tracing_treedef(t):
  """`t` in JAX's tracing registry, where JAX builds the treedefs of some
  params (custom_vmap_call's in_tree) and combines them with
  its own (treedef_tuple_tracing_registry refuses another registry's)."""
  from jax._src.tree_util import tracing_registry
  data = t.node_data()
  if data is None:
    return tracing_registry.flatten(0)[1]
  children = [tracing_treedef(c) for c in jax.tree_util.treedef_children(t)]
  return jax.tree_util.PyTreeDef.from_node_data_and_children(tracing_registry, data, children)
