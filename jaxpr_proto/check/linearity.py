"""Whether a custom_jvp rule's jaxpr shows that grad can linearize it, by
one pass over its eqns: no tracing.

grad needs two things of a jvp rule (check.param_rules): its primal outputs
must not read its tangent inputs (partial evaluation with the tangents
unknown leaves them known), and its tangent outputs must be linear in them
(JAX's transpose rules take every eqn that reads a tangent). The param
checks find both by tracing the rule through JAX, which on a first load is
the costliest check of a program using `jax.nn.relu`. Most rules show both
plainly: the tangents flow only through eqns that JAX transposes (adds, a
select on a primal predicate, a product with a primal...). `shows_linear`
says so where they do; anywhere else (a jit inside, an eqn JAX may not
transpose, effects) it says nothing, and the rule is traced as before. It
never says a rule is fine that tracing refuses: each primitive below is
taken only in the operand positions whose transpose JAX defines.
"""
from __future__ import annotations

import jax

from jaxpr_proto import compat


def _any(lin, n):
  return True


def _operand(lin, n):
  return lin == {0}


def _one_of_two(lin, n):
  return n == 2 and len(lin) == 1


# primitive name -> whether JAX transposes it with operands `lin` (a set of
# positions) linear, of its n operands
TRANSPOSABLE = {
    "add": _any, "sub": _any, "add_any": _any, "concatenate": _any, "pad": _any,
    "neg": _operand, "reduce_sum": _operand, "transpose": _operand, "squeeze": _operand,
    "copy": _operand, "copy_p": _operand, "rev": _operand, "cumsum": _operand,
    "slice": _operand, "dynamic_slice": _operand,
    "reshape": lambda lin, n: n == 1 and lin == {0},
    "broadcast_in_dim": lambda lin, n: n == 1 and lin == {0},
    "convert_element_type": lambda lin, n: lin == {0},  # (and floats both sides: _eqn_ok)
    "mul": _one_of_two, "dot_general": _one_of_two,
    "div": lambda lin, n: n == 2 and lin == {0},
    "select_n": lambda lin, n: 0 not in lin,  # (the predicate primal)
    "dynamic_update_slice": lambda lin, n: lin <= {0, 1},
}


def _inexact(aval) -> bool:  # (as check.param_rules asks it)
  dtype = getattr(aval, "dtype", None)
  return dtype is not None and jax.numpy.issubdtype(dtype, jax.numpy.inexact)


def _is_float0(aval) -> bool:
  return getattr(aval, "dtype", None) == jax.dtypes.float0


def _eqn_ok(eqn, lin: set) -> bool:
  rule = TRANSPOSABLE.get(eqn.primitive.name)
  if rule is None or not rule(lin, len(eqn.invars)):
    return False
  if eqn.primitive.name == "convert_element_type":
    return _inexact(eqn.invars[0].aval) and _inexact(eqn.outvars[0].aval)
  return True


def _reads(eqn, flow: set) -> set:
  """The positions of `eqn`'s operands in `flow`."""
  return {k for k, x in enumerate(eqn.invars) if type(x) is compat.Var and x in flow}


def shows_linear(jvp, n_primals: int, n_outs: int) -> bool:
  """True where the jvp rule `jvp` (a ClosedJaxpr: primals and tangents in,
  primal outputs and tangent outputs out) shows by its eqns alone that grad
  can linearize it; False where it does not show it (not that it cannot)."""
  jaxpr = jvp.jaxpr
  ins, outs = jaxpr.invars, jaxpr.outvars
  if len(ins) != 2 * n_primals or len(outs) < n_outs:
    return False
  if jaxpr.effects or any(e.effects for e in jaxpr.eqns):
    return False
  tangents = ins[n_primals:]
  # 1. The primal outputs do not read a tangent (float0 tangents are known).
  flow = {v for v in tangents if not _is_float0(v.aval)}
  for eqn in jaxpr.eqns:
    if _reads(eqn, flow):
      flow.update(v for v in eqn.outvars if type(v) is compat.Var)
  if any(type(x) is compat.Var and x in flow for x in outs[:n_outs]):
    return False
  # 2. The tangent outputs are linear in the tangents, eqn by eqn; JAX
  # transposes nothing unless every tangent in and out is of floats.
  tangent_outs = outs[n_outs:]
  if not tangent_outs or not all(_inexact(v.aval) for v in [*tangents, *tangent_outs]):
    return True
  flow = set(tangents)
  for eqn in jaxpr.eqns:
    lin = _reads(eqn, flow)
    if lin:
      if not _eqn_ok(eqn, lin):
        return False
      flow.update(v for v in eqn.outvars if type(v) is compat.Var)
  return True
