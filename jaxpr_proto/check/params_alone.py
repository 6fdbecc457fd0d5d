"""The param checks of what an eqn's params alone show, its operands aside
(`param_rules`): each param against its primitive's schema (`param_schema`),
then the values no schema states: hashable, ints within int64, axes named
once and within any rank, a precision pair, sub-jaxprs' debug info of their
counts."""
from __future__ import annotations

import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.check import param_schema
from jaxpr_proto.codec import names

_INT64 = (-(1 << 63), (1 << 63) - 1)
# Params that hold a value of the operand's dtype, which JAX gives as a
# Python int up to uint64's largest (a uint64 gather's fill_value, 2**64-1);
# check.shape_rules checks that the value fits the operand.
_UINT64_VALUES = frozenset({"fill_value"})


def _params_errors(prim, params):
  """The problems that the params alone show, the eqn's operands aside."""
  name = prim.name
  found = False
  for param, message in param_schema.errors(name, params, by_name=_jax_own(prim)):
    found = True
    yield param, message
  for param, v in params.items():
    top = (1 << 64) - 1 if param in _UINT64_VALUES else _INT64[1]
    why = (_unhashable(v) or _big_int(v, top) or (param in _DISTINCT and _repeats(v))
           or (param in _AXES and _far_axis(v)) or (param == "precision" and _not_a_pair(v)))
    if why:
      found = True
      yield param, f"{name}'s {param} {why}"
  if found:
    return
  if name not in _NAMES_MAY_MISCOUNT:
    for param, v in params.items():
      for j in (v if type(v) is tuple else (v,)):
        why = _debug_miscount(j)
        if why:
          yield param, why
          return


def params_key(params: dict) -> tuple:
  """A key of what `_params_errors` reads of `params`: each value by value
  (compat.memo.value_key) where it has an exact key, else what the checks
  read of it: a sub-jaxpr's kind and debug-info verdict, an object's kind
  (the schema's) and hashability, a tuple's of each element and how many
  are distinct. So the eqns of one primitive over equal copies of a
  sub-jaxpr (a custom_jvp call per layer, each a jit of relu) share a
  verdict. Raises NoKey for the rest."""
  return tuple((name, _value_key(v)) for name, v in params.items())


def _value_key(v):
  try:
    return compat.memo.value_key(v)
  except compat.memo.NoKey:
    pass
  if type(v) is tuple:  # (with how many distinct: `_repeats` reads its elements' equality)
    return (tuple, len(set(v)) if _unhashable(v) is None else None, tuple(map(_value_key, v)))
  kind = param_schema.kind(v)
  if kind in ("ClosedJaxpr", "Jaxpr"):
    return (kind, _debug_miscount(v))
  if kind.startswith("obj:"):  # (read by its kind alone, and hashed)
    return (kind, _unhashable(v))
  raise compat.memo.NoKey


def _jax_own(prim) -> bool:
  """Whether `prim` is one of JAX's primitives (a user's, registered under
  its own namespace, is the reading process's to trust)."""
  key = names.PRIMITIVES.name(prim)
  return key is not None and key[0] == "jax"


# Params that name axes or dimensions, each at most once (XLA refuses repeats;
# not every JAX rule checks).
_DISTINCT = frozenset({"axis_name", "axes", "dimensions", "broadcast_dimensions", "permutation"})


# Params that are axes of an operand: within XLA's ranks, so that no rule
# computes with (or a C++ one overflows on) an axis like -9088979112675496642.
_AXES = _DISTINCT | {"axis", "dimension", "split_axis", "concat_axis"}
_MAX_RANK = 64


def _far_axis(v):
  for x in (v if type(v) is tuple else (v,)):
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and not -_MAX_RANK <= x <= _MAX_RANK:
      return f"is an axis beyond any rank ({x})"
  return None


def _not_a_pair(v):
  """A precision is None, one value, or a pair (lhs, rhs): JAX's rules read two."""
  if type(v) is tuple and len(v) != 2:
    return f"has {len(v)} entries, not a pair (lhs, rhs)"
  return None


def _repeats(v):
  if type(v) is tuple and len(set(v)) != len(v):
    return "names an axis twice"
  return None


# JAX asserts the names' counts in a sub-jaxpr's debug info when it traces
# it again (jit, scan: a bare AssertionError), yet writes names of another
# count itself for these primitives' jaxprs (custom_jvp's call_jaxpr).
_NAMES_MAY_MISCOUNT = frozenset({"custom_jvp_call", "custom_vjp_call"})


def _debug_miscount(j):
  jaxpr = j.jaxpr if isinstance(j, compat.ClosedJaxpr) else j
  if not isinstance(jaxpr, compat.Jaxpr):
    return None
  debug = jaxpr.debug_info
  for field, n in (("arg_names", len(jaxpr.invars)), ("result_paths", len(jaxpr.outvars))):
    names = getattr(debug, field, None)
    if names is not None and len(names) != n:
      what = "inputs" if field == "arg_names" else "outputs"
      return f"its jaxpr's debug info has {len(names)} {field.replace('_', ' ')} for {n} {what}"
  return None


def _unhashable(v):
  try:
    hash(v)
  except Exception:
    return "is not hashable (JAX caches eqns by their params)"
  return None


def _big_int(v, top=_INT64[1], depth=0):
  if type(v) is int:
    if _INT64[0] <= v <= top:
      return None
    return f"holds an integer that does not fit {'int64' if top == _INT64[1] else 'int64 or uint64'}"
  if type(v) in (tuple, list, frozenset) and depth < 8:
    for x in v:
      why = _big_int(x, top, depth + 1)
      if why:
        return why
  return None
