"""The param rules (`param_rules`) of calls: jit (its per-operand params
and shardings), composite, linear_call, and the host callbacks (their
in_tree against the operands, pure_callback's vmap method)."""
from __future__ import annotations

import re

from jaxpr_proto import compat
from jaxpr_proto.check.jaxpr_fits import _avals, _call_jaxpr, _count, _jaxpr_fits, _out_avals
from jaxpr_proto.check.sharding_rules import _shardings_fit


def _jit(eqn, *, jaxpr, in_shardings, out_shardings, in_layouts, out_layouts,
         donated_invars, **_):
  n_in, n_out = len(eqn.invars), len(eqn.outvars)
  for param, v, n in (("in_shardings", in_shardings, n_in), ("in_layouts", in_layouts, n_in),
                      ("donated_invars", donated_invars, n_in),
                      ("out_shardings", out_shardings, n_out),
                      ("out_layouts", out_layouts, n_out)):
    if len(v) != n:
      yield param, f"{param} has {len(v)} entries for {n} {param.split('_')[0]}puts"
  yield from _shardings_fit("in_shardings", in_shardings, eqn.invars)
  yield from _shardings_fit("out_shardings", out_shardings, eqn.outvars)
  yield from _jaxpr_fits("jaxpr", jaxpr, _avals(eqn.invars), _avals(eqn.outvars))


# The op names StableHLO's verifier takes for a composite.
_COMPOSITE_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*([.][a-zA-Z0-9_$]+)+")


def _composite(eqn, *, attributes, name, **params):
  """Each attribute is (name, leaves, treedef) with as many leaves as the
  treedef has (lowering unpacks them); the jaxpr is called as jit's is."""
  if not (isinstance(name, str) and _COMPOSITE_NAME.fullmatch(name)):
    yield "name", f"composite name {name!r} is not a namespaced op name such as 'my_namespace.my_op'"
  for k, a in enumerate(attributes):
    if not (type(a) is tuple and len(a) == 3 and type(a[0]) is str and type(a[1]) is tuple
            and getattr(a[2], "num_leaves", None) == len(a[1])):
      yield "attributes", f"attributes[{k}] is not a (name, leaves, treedef) triple"
      return
  yield from _call_jaxpr("call_jaxpr" if "call_jaxpr" in params else "jaxpr")(eqn, **params)  # JAX >= 0.11: call_jaxpr


# pure_callback's vmap methods (JAX's allowed_vmap_methods; None: JAX's default).
_VMAP_METHODS = frozenset({"sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                           "legacy_vectorized", None})


def _callback(eqn, *, callback, vmap_method=None, **_):
  """The callback takes the eqn's operands as the array leaves of its
  in_tree (the other leaves are debug_callback's static args): JAX unflattens
  them at run time, in the host callback, where a mismatch fails."""
  parts = compat.callback_parts(eqn.primitive.name, callback)
  if parts is None:
    yield "callback", "is not a callback made by JAX's callback API"
    return
  _, in_tree, static_args = parts
  dynamic = in_tree.num_leaves - len(static_args or ())
  if dynamic != len(eqn.invars):
    yield "callback", (f"the callback takes {dynamic} array arguments, the eqn has "
                       f"{len(eqn.invars)} operands")
  if vmap_method not in _VMAP_METHODS:
    yield "vmap_method", f"{vmap_method!r} is none of JAX's vmap methods"


def _linear_call(eqn, *, callee, transpose_thunk, num_callee_consts, num_res, **_):
  """JAX's abstract eval of linear_call returns the callee's outputs and
  checks nothing else; its transpose rule (grad) binds the saved transpose
  to (its consts, the residuals, the outputs' cotangents) for the linear
  operands' cotangents."""
  n = len(eqn.invars)
  for param, k in (("num_callee_consts", num_callee_consts), ("num_res", num_res)):
    bad = _count(param, k, n)
    if bad:
      yield bad
      return
  if num_callee_consts + num_res > n:
    yield "num_res", f"num_callee_consts + num_res = {num_callee_consts + num_res} > {n} operands"
    return
  found = _jaxpr_fits("callee", callee, _avals(eqn.invars), None)
  if found:
    yield from found
    return
  try:
    transpose, t_consts = transpose_thunk()
  except Exception as e:
    yield "transpose_thunk", f"cannot be called: {type(e).__name__}: {e}"
    return
  for param, j in (("callee", callee), ("transpose_thunk", transpose)):
    if getattr(j, "consts", None):  # JAX runs them as open jaxprs, without their consts
      yield param, f"{param}'s jaxpr has consts, which linear_call does not pass"
      return
  res = _avals(eqn.invars)[num_callee_consts:num_callee_consts + num_res]
  lin = _avals(eqn.invars)[num_callee_consts + num_res:]
  consts = [compat.core.get_aval(c) for c in t_consts]
  yield from _jaxpr_fits("transpose_thunk", transpose, consts + res + _out_avals(callee), lin)
