"""Jaxprs and traced functions as objects: a jaxpr copied with variables of
its own, its key across its closed forms, the function and info of a
jax.jit-wrapped function; and the contexts in which JAX traces afresh or
computes eagerly."""
from __future__ import annotations

from jax._src import core


def copy_jaxpr(j):
  """j with variables of its own, as a second trace of one function gives
  (JAX's printer names variables by identity); its eqns' params, sub-jaxprs
  and source info are j's."""
  new = {}

  def bind(v):
    if isinstance(v, core.DropVar):
      return core.DropVar(v.aval)
    new[v] = out = core.Var(v.aval)
    for field in ("initial_qdd", "final_qdd"):  # (JAX 0.10)
      if getattr(v, field, None) is not None:
        setattr(out, field, getattr(v, field))
    return out

  def use(x):
    return x if isinstance(x, core.Literal) else new.get(x, x)

  constvars = [bind(v) for v in j.constvars]
  invars = [bind(v) for v in j.invars]
  eqns = [e.replace(invars=[use(x) for x in e.invars], outvars=[bind(v) for v in e.outvars])
          for e in j.eqns]
  return j.replace(constvars=constvars, invars=invars, eqns=eqns,
                   outvars=[use(x) for x in j.outvars], debug_info=j.debug_info)


def jaxpr_key(j) -> int:
  """Identifies a jaxpr across its closed forms (see v0_11.py)."""
  return id(j)


def no_current_trace():
  """A context in which tracing starts afresh (as JAX's thunks run)."""
  return core.set_current_trace(None)


def eval_context():
  """A context in which JAX computes eagerly, whatever trace is current:
  arrays made there are values, never tracers."""
  return core.eval_context()


def jit_info(f):
  """(fun, PjitInfo) of a jax.jit-wrapped function, or None (guarded)."""
  try:
    cache_miss = f._cache_miss
    cache_miss = getattr(cache_miss, "__wrapped__", cache_miss)
    cells = dict(zip(cache_miss.__code__.co_freevars,
                     (c.cell_contents for c in cache_miss.__closure__)))
    return cells["fun"], cells["jit_info"]
  except Exception:  # a JAX that builds jit differently: no custom reduction
    return None
