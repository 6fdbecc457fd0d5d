"""Params an eqn lacks that JAX's public function for its primitive binds.

JAX's harnesses bind some primitives bare (`mul_p.bind(x, y)`, without
`out_dtype`; `conj_p.bind(x)`, without `input_dtype`). JAX runs such an eqn,
but its printer and transpose rules need the param, so the loader refuses it
(param_schema: a param no rule may lack). The encoder completes such an eqn
as the public function (`lax.mul`, `lax.conj`) would have bound it for the
same operands: it traces that function on the operands' avals and takes the
missing params from the eqn it binds. So the defaults come from JAX itself,
and the file holds a program JAX prints, runs and differentiates.
"""
from __future__ import annotations

import functools

import jax

from jaxpr_proto.compat import param_tables
from jaxpr_proto.compat.releases import parse_version

_required = functools.cache(functools.partial(param_tables.required_params,
                                              parse_version(jax.__version__)))


def completed(eqn) -> dict | None:
  """The eqn's params with those it lacks filled in as `jax.lax.<primitive>`
  binds them for its operands, in that function's order; None where nothing
  is missing or the public function does not bind this primitive alone."""
  prim = eqn.primitive
  missing = _required(prim.name) - eqn.params.keys()
  if not missing:
    return None
  fn = getattr(jax.lax, prim.name, None)
  if not callable(fn):
    return None
  try:
    args = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.invars]
    traced = jax.make_jaxpr(fn)(*args).jaxpr
  except Exception:  # (not a function of the operands alone: left as it is, and refused at load)
    return None
  if len(traced.eqns) != 1 or traced.eqns[0].primitive is not prim:
    return None
  bound = traced.eqns[0].params
  if not missing <= bound.keys():
    return None
  out = {k: eqn.params[k] if k in eqn.params else v for k, v in bound.items()}
  out.update((k, v) for k, v in eqn.params.items() if k not in out)
  return out
