"""custom_vmap: its `rule` param, called as JAX's batching rule calls it;
and dim_as_value, which a saved rule at a batch size turns into a size."""
from __future__ import annotations

import jax
import numpy as np
from jax._src import core
from jax._src import custom_batching as _custom_batching
from jax._src.export import shape_poly as _shape_poly

from jaxpr_proto.compat.jax_names import closed_call_p


def tracing_treedef(t):
  """`t` in the registry where JAX builds custom_vmap_call's in_tree (JAX
  0.10 has one registry)."""
  return t


def custom_vmap_rule(fn):
  """custom_vmap_call's `rule` param for the batching rule `fn`, as JAX's
  custom_vmap makes it."""
  return _custom_batching.ClosedRule(fn, core.DebugInfo("custom_vmap rule", fn.__qualname__,
                                                       None, None))


def is_closed_rule(value) -> bool:
  """Whether a `rule` param is a ClosedRule (JAX calls it without consts)."""
  return isinstance(value, _custom_batching.ClosedRule)


def call_custom_vmap_rule(fn, axis_size, in_batched, args):
  """(out, out_batched) of a custom_vmap rule, called as JAX's batching rule calls it."""
  return _custom_batching.call_rule(fn, axis_size, in_batched, args)


dim_as_value_p = _shape_poly.dim_as_value_p


def size_as_value(size: int):
  """(closed_call primitive, its params) that give `size` as dim_as_value
  would: for a dim_as_value whose symbolic dim was made a size (a saved
  custom_vmap rule at a batch size), which JAX can neither evaluate nor
  lower."""
  return closed_call_p, {"call_jaxpr": jax.make_jaxpr(
      lambda: np.array(size, core.dim_value_dtype()))()}
