"""Which JAX primitives the round-trip corpus (tests/corpus.py) exercises.

``exercised_primitives()`` traces every corpus program with
``jax.make_jaxpr`` -- plus ``jax.grad`` of the differentiable ones,
``jax.jvp`` of them, and ``jax.vmap`` of the vmappable ones -- and collects the
primitive names of all equations, recursively through every sub-jaxpr found in
eqn params (``ClosedJaxpr`` / ``Jaxpr`` values and (nested) tuples / lists /
dicts of them).

``SKIP`` lists the primitives of ``jax.extend.core.primitives`` that a CPU
corpus of ordinary programs cannot contain, each with a concrete reason.

Run ``python -m tests.primitive_coverage`` (from the repo root) for a report.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Iterable

import numpy as np

import jax
import jax.extend
import jax.extend.core
import jax.extend.core.primitives
import jax.numpy as jnp

try:
  from tests import corpus
except ImportError:  # run from inside tests/
  import corpus  # type: ignore


# Primitives that cannot appear in a jaxpr of this CPU corpus.
SKIP: dict[str, str] = {
    # --- pmap-only / multi-device collectives -------------------------------
    "ragged_all_to_all": "XLA:CPU has no lowering for ragged all-to-all (GPU/TPU "
                         "only), so a program containing it cannot run here",
    # --- internal primitives not produced by any public API -----------------
    "call": "core.call_p: legacy untyped call primitive; nothing in JAX 0.10 "
            "binds it (only transformation rules are registered for it): jit "
            "stages 'jit', remat 'remat2', scan/custom_vjp partial eval 'closed_call'",
    "custom_lin": "only exists transiently while JAX linearizes a custom_vjp "
                  "function, before transposition; it stays in a staged jaxpr only "
                  "for forward-mode-of-custom_vjp (jax.linearize / jvp-of-grad), "
                  "which JAX rejects: such a jaxpr cannot be lowered ('can't apply "
                  "forward-mode autodiff (jvp) to a custom_vjp function')",
}
_MINOR = tuple(int(x) for x in jax.__version__.split(".")[:2])
if _MINOR >= (0, 11):
  del SKIP["call"]  # gone in JAX 0.11 (an alias of eval_jaxpr)
if _MINOR >= (0, 12):
  for _n in ("eq_to", "le_to", "lt_to"):
    SKIP[_n] = ("total-order comparisons that JAX 0.12 binds only inside the "
                "expansion of HiJAX primitives (jnp.searchsorted), which a saved "
                "jaxpr holds unexpanded")


# ---------------------------------------------------------------------------

def _sub_jaxprs(v: Any) -> Iterable[jax.extend.core.Jaxpr]:
  if isinstance(v, jax.extend.core.ClosedJaxpr):
    yield v.jaxpr
  elif isinstance(v, jax.extend.core.Jaxpr):
    yield v
  elif isinstance(v, (tuple, list)):
    for x in v:
      yield from _sub_jaxprs(x)
  elif isinstance(v, dict):
    for x in v.values():
      yield from _sub_jaxprs(x)


def eqns_of(jaxpr, also=lambda eqn: ()):
  """Each eqn of ``jaxpr`` (Jaxpr or ClosedJaxpr) and of the jaxprs in its
  params, recursively, each jaxpr once; ``also(eqn)`` gives more jaxprs to
  walk (a custom rule's)."""
  if isinstance(jaxpr, jax.extend.core.ClosedJaxpr):
    jaxpr = jaxpr.jaxpr
  seen: set[int] = set()
  stack = [jaxpr]
  while stack:
    j = stack.pop()
    if id(j) in seen:
      continue
    seen.add(id(j))
    for eqn in j.eqns:
      yield eqn
      for v in eqn.params.values():
        stack.extend(_sub_jaxprs(v))
      stack.extend(also(eqn))


def primitives_of(jaxpr, acc: set[str] | None = None) -> set[str]:
  """Primitive names of ``jaxpr`` (Jaxpr or ClosedJaxpr), recursively."""
  if acc is None:
    acc = set()
  acc.update(eqn.primitive.name for eqn in eqns_of(jaxpr))
  return acc


def _tangent(x):
  dt = getattr(x, "dtype", None)
  if isinstance(x, (bool, int)) and not isinstance(x, float):
    return np.zeros((), jax.dtypes.float0)
  if isinstance(x, (float, complex)):
    return jnp.ones_like(x)
  if dt is not None and jax.dtypes.issubdtype(dt, jnp.inexact):
    return jnp.ones_like(x)
  return np.zeros(np.shape(x), jax.dtypes.float0)


def jvp_fn(p: corpus.Program):
  """(fn, primals) computing jax.jvp of p.fn w.r.t. its grad_argnums args."""
  argnums = tuple(p.grad_argnums)

  def f(*args):
    def partial(*diff):
      full = list(args)
      for i, d in zip(argnums, diff):
        full[i] = d
      out = p.fn(*full)
      # only inexact outputs (like corpus.grad_fn): tokens/keys have no tangents
      return [l for l in jax.tree.leaves(out) if corpus._is_inexact(l)]
    primals = tuple(args[i] for i in argnums)
    tangents = tuple(jax.tree.map(_tangent, a) for a in primals)
    return jax.jvp(partial, primals, tangents)
  return f


def derived_jaxprs(p: corpus.Program):
  """(label, thunk) pairs of every jaxpr that the coverage traces for ``p``."""
  yield "fn", lambda: corpus.trace(p)
  if p.grad_argnums is not None:
    yield "grad", lambda: jax.make_jaxpr(corpus.grad_fn(p))(*p.args)
    # Forward mode through custom_vjp is unsupported by JAX (the staged jaxpr
    # would hold a custom_lin eqn that raises when lowered): no jvp for those.
    if "custom_vjp_call" not in primitives_of(corpus.trace(p)):
      yield "jvp", lambda: jax.make_jaxpr(jvp_fn(p))(*p.args)
  if p.vmap:
    yield "vmap", lambda: jax.make_jaxpr(corpus.vmap_fn(p))(*corpus.vmap_args(p))


def exercised_primitives(programs=None, strict: bool = True) -> set[str]:
  """Names of all primitives in the corpus programs and their grad/jvp/vmap."""
  acc: set[str] = set()
  for p in (corpus.PROGRAMS if programs is None else programs):
    for label, thunk in derived_jaxprs(p):
      try:
        primitives_of(thunk(), acc)
      except Exception as e:  # pragma: no cover - reported, not hidden
        if strict:
          raise RuntimeError(f"tracing {label} of {p.name} failed: {e}") from e
  return acc


def exported_primitives() -> dict[str, jax.extend.core.Primitive]:
  mod = jax.extend.core.primitives
  return {v.name: v for v in vars(mod).values()
          if isinstance(v, jax.extend.core.Primitive)}


def unexercised(exercised: set[str] | None = None) -> list[str]:
  if exercised is None:
    exercised = exercised_primitives()
  return sorted(set(exported_primitives()) - exercised)


def main() -> int:
  t0 = time.perf_counter()
  ex = exercised_primitives()
  dt = time.perf_counter() - t0
  exported = exported_primitives()
  missing = sorted(set(exported) - ex)
  print(f"{len(ex)} primitives exercised ({len(set(exported) & ex)} of "
        f"{len(exported)} exported) by {len(corpus.PROGRAMS)} programs in {dt:.1f}s")
  print("not exported by jax.extend.core.primitives but exercised:",
        sorted(ex - set(exported)))
  for n in missing:
    print(f"  {n:28s} {'SKIP: ' + SKIP[n] if n in SKIP else 'NOT EXERCISED, NOT ON SKIP'}")
  stale = sorted(set(SKIP) & ex)
  if stale:
    print("on SKIP but exercised:", stale)
  return int(bool([n for n in missing if n not in SKIP]) or bool(stale))


if __name__ == "__main__":
  sys.exit(main())
