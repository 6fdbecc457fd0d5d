"""What the per-primitive param rules (`param_rules`) share: the avals of
operands and sub-jaxprs, whether a sub-jaxpr takes and gives the avals an
eqn gives it and takes (its signature), a count within the operands, and
the rule of a call primitive that calls its jaxpr on its operands."""
from __future__ import annotations

import numpy as np

from jaxpr_proto import compat


def _avals(xs):
  return [x.aval for x in xs]


def _in_avals(j):
  return list(j.in_avals) if isinstance(j, compat.ClosedJaxpr) else _avals(j.invars)


def _out_avals(j):
  return list(j.out_avals) if isinstance(j, compat.ClosedJaxpr) else _avals(j.outvars)


def _match(a, b) -> bool:
  try:
    return compat.core.typematch(a, b)
  except Exception:
    return False


def _signature(param, what, got, want):
  """A message where the avals `got` of `param`'s `what` are not `want`."""
  if len(got) != len(want):
    return param, f"{param} takes {len(got)} {what} where the eqn gives it {len(want)}"
  if got == want:  # (equal avals typematch: JAX's typematch compares them so first)
    return None
  for k, (g, w) in enumerate(zip(got, want)):
    if not _match(g, w):
      return param, f"{param}'s {what} {k} is {g.str_short()} where it gets {w.str_short()}"
  return None


def _jaxpr_fits(param, j, ins, outs):
  """Errors where jaxpr `j` does not take `ins` or give `outs` (None: unchecked)."""
  if not isinstance(j, (compat.ClosedJaxpr, compat.Jaxpr)):
    return [(param, f"{param} is not a jaxpr")]
  found = []
  if ins is not None:
    found.append(_signature(param, "inputs", _in_avals(j), ins))
  if outs is not None:
    found.append(_signature(param, "outputs", _out_avals(j), outs))
  return [f for f in found if f]


def _count(param, n, total):
  if type(n) is not int or not 0 <= n <= total:
    return param, f"{param}={n!r} is out of range for {total} operands"
  return None


_BOOL = compat.ShapedArray((), np.dtype("bool"))


def _scalar(aval):
  return compat.ShapedArray((), aval.dtype)


def _call_jaxpr(param):
  def rule(eqn, **params):
    yield from _jaxpr_fits(param, params[param], _avals(eqn.invars), _avals(eqn.outvars))
  return rule
