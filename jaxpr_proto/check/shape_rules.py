"""The param rules (`param_rules`) of shapes and axes: dynamic_slice,
split, gather, sort, stack, unstack, reshape, approx_top_k (indices, sizes
and axes against the operands' ranks and shapes)."""
from __future__ import annotations

import math

import jax
import numpy as np


def _dynamic_slice(eqn, *, slice_sizes, **_):
  """One start index and one slice size per operand axis (JAX's shape rule
  zips them, so that too few pass)."""
  rank = len(eqn.invars[0].aval.shape)
  if len(eqn.invars) != 1 + rank:
    yield None, f"dynamic_slice of a rank-{rank} operand takes {rank} start indices, not {len(eqn.invars) - 1}"
  if len(slice_sizes) != rank:
    yield "slice_sizes", f"slice_sizes has {len(slice_sizes)} entries for an operand of rank {rank}"


def _split(eqn, *, axis, **_):
  """An axis of the operand, as jnp.split and lax.split give it (JAX's shape
  rule takes -1 too, but its transpose concatenates along `axis` as given)."""
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if type(axis) is not int or not 0 <= axis < rank:
    yield "axis", f"split's axis={axis!r} is not an axis of its rank-{rank} operand (0..{rank - 1})"


def _gather(eqn, *, mode, fill_value, **_):
  """A FILL_OR_DROP gather's lowering fills out-of-bounds slices with its
  fill_value (lax.gather sets one for every dtype; JAX's lowering fails on
  None). Other modes ignore it."""
  if mode == jax.lax.GatherScatterMode.FILL_OR_DROP and fill_value is None:
    yield "fill_value", "a FILL_OR_DROP gather needs a fill_value, not None"
  dtype = getattr(eqn.invars[0].aval, "dtype", None) if eqn.invars else None
  if type(fill_value) is int and dtype is not None and np.issubdtype(dtype, np.integer):
    info = np.iinfo(dtype)  # (the lowering makes a constant of the operand's dtype of it)
    if not info.min <= fill_value <= info.max:
      yield "fill_value", f"fill_value={fill_value} does not fit the operand's {dtype}"


def _sort(eqn, *, dimension, num_keys, **_):
  """Keys among the operands, and a dimension of theirs (JAX's rules index
  with both)."""
  if not 1 <= num_keys <= len(eqn.invars):
    yield "num_keys", f"num_keys={num_keys} is not within the {len(eqn.invars)} operands"
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if not -rank <= dimension < rank:
    yield "dimension", f"dimension {dimension} is not an axis of a rank-{rank} operand"


# lax.stack and lax.unstack bind a canonical axis (0 <= axis); the shape rules
# accept a negative one, which lowering and transposition then misplace.
def _stack(eqn, *, axis, **_):
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if not 0 <= axis <= rank:
    yield "axis", f"stack axis {axis} is not an axis (0 to {rank}) of the rank-{rank + 1} result"


def _unstack(eqn, *, axis, **_):
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if not 0 <= axis < rank:
    yield "axis", f"unstack axis {axis} is not an axis (0 to {rank - 1}) of the rank-{rank} operand"


def _reshape(eqn, *, new_sizes, **_):
  """JAX's shape rule leaves the element count unchecked (a TODO); XLA refuses it."""
  shape = eqn.invars[0].aval.shape
  if all(type(d) is int for d in (*shape, *new_sizes)) and (
      math.prod(shape) != math.prod(new_sizes)):
    yield "new_sizes", f"reshape of {eqn.invars[0].aval.str_short()} to {tuple(new_sizes)} changes the element count"


def _approx_top_k(eqn, *, recall_target, reduction_dimension, reduction_input_size_override, **_):
  if not (isinstance(recall_target, float) and 0.0 < recall_target <= 1.0):
    yield "recall_target", f"recall_target={recall_target!r} is not in (0, 1] (XLA refuses it)"
  shape = eqn.invars[0].aval.shape
  n = shape[reduction_dimension] if -len(shape) <= reduction_dimension < len(shape) else None
  override = reduction_input_size_override
  if n is not None and override != -1 and not (type(n) is int and n <= override < (1 << 31)):
    yield "reduction_input_size_override", (
        f"reduction_input_size_override={override} is neither -1 nor at least the "
        f"reduced axis's size {n} (XLA refuses it)")
