"""Params whose form a later minor changed, in the JAX 0.10 form (the
adapters of the minors that changed them redefine them): PartitionSpec's
unreduced kinds, FlatTrees, HiJAX primitives, custom_vjp's bwd, jit's
inline."""
from __future__ import annotations

import jax

# PartitionSpec.unreduced_kind's enum: none before JAX 0.11 (see v0_11/adapter.py).
UNREDUCED_KINDS = None


# FlatTree params (JAX >= 0.11's scan ft_in and ft_out) are written as
# extensions "jax::flattree.<kind>": the fields of each kind, in order, with
# the type that a stand-in (compat.standins) relies on, None for any.
FLATTREE_FIELDS: dict[str, dict[str, type | None]] = {
    "tuple": {"elts": tuple}, "pytree": {"xs": tuple, "tree": jax.tree_util.PyTreeDef},
    "singleton": {"val": None}, "static": {"val": None}, "filtered": {"val": None},
    "dict": {"keys": tuple, "vals": tuple}, "either": {"is_right": bool, "val": None},
}


# This JAX has no FlatTrees (see v0_11/adapter.py): files that carry them are
# read into standins.FlatTreeStandIn for the upgraders.
def flattree_fields(v):
  return None


FLATTREE_BUILDERS: dict = {}


def scan_flattrees(num_consts, num_carry, num_xs, num_ys):
  raise NotImplementedError("FlatTrees need JAX >= 0.11")

# HiJAX primitives (JAX >= 0.11): call_hi_primitive's `_prim` param is an
# object of a HiPrim class. Those a file may carry, by registered name:
# {name: (class, build(in_avals, params))}; see v0_12.py.
HIPRIMS: dict = {}


def is_hiprim(v) -> bool:
  return False


def hiprim_functions(prim) -> dict:
  return {}


# custom_vjp_call's `bwd` (a WrappedFun) returns the input cotangents; from
# JAX 0.11 it returns (cotangents, logs).
def bwd_cotangents(ret):
  return ret


def bwd_return(cotangents):
  return cotangents


Inline = None  # jit's inline param is a bool (an enum from JAX 0.11)
