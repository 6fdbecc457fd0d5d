"""Sanity checks for the round-trip test corpus (tests/corpus.py).

1. every program traces (``corpus.trace``) and runs under ``jax.jit``;
2. ``jax.grad`` (of the sum of float outputs) traces and runs where
   ``grad_argnums`` is set;
3. ``jax.vmap`` over a new leading axis of all array args traces and runs
   where ``vmap=True``;
4. names are unique identifiers and there are at least 60 programs.

XLA:CPU compile time dominates; executables are compiled with cheap
per-compile options (``FAST_COMPILE_OPTIONS``: no fusion emitters, LLVM
optimization level 0), which is ~3-4x faster to compile than the defaults and
does not change what is being checked.  The options are passed per compile via
``Lowered.compile(compiler_options=...)`` so nothing global is modified.
"""

from __future__ import annotations

import numpy as np
import pytest

import jax
import jax.extend

from tests import corpus

FAST_COMPILE_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
}
if tuple(int(x) for x in jax.__version__.split(".")[:2]) < (0, 11):
  FAST_COMPILE_OPTIONS["xla_cpu_use_fusion_emitters"] = False  # gone in jaxlib 0.11

PROGRAMS = corpus.PROGRAMS
IDS = [p.name for p in PROGRAMS]
GRAD = [p for p in PROGRAMS if p.grad_argnums is not None]
VMAP = [p for p in PROGRAMS if p.vmap]


def run_jit(fn, *args):
  """jax.jit(fn)(*args), compiled with FAST_COMPILE_OPTIONS.

  Returns (outputs, the jaxpr jit traced).  Also checks that the output
  pytree matches the traced output structure.
  """
  traced = jax.jit(fn).trace(*args)
  compiled = traced.lower().compile(compiler_options=FAST_COMPILE_OPTIONS)
  out = jax.block_until_ready(compiled(*args))
  assert jax.tree.structure(out) == jax.tree.structure(traced.out_info)
  return out, traced.jaxpr


def _is_closed_jaxpr(x):
  return isinstance(x, jax.extend.core.ClosedJaxpr)


def test_names_unique_and_count():
  names = [p.name for p in PROGRAMS]
  assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
  assert all(n.isidentifier() for n in names)
  assert len(PROGRAMS) >= 60
  for p in PROGRAMS:
    assert corpus.get(p.name) is p


def test_program_fields_consistent():
  for p in PROGRAMS:
    assert callable(p.fn), p.name
    assert isinstance(p.args, tuple), p.name
    if p.grad_argnums is not None:
      assert p.grad_argnums and all(0 <= i < len(p.args) for i in p.grad_argnums), p.name
    if p.symbolic is not None:
      assert p.grad_argnums is None and not p.vmap, p.name
      assert len(corpus.symbolic_specs(p)) == len(p.args), p.name
  assert len([p for p in PROGRAMS if p.symbolic]) >= 2


@pytest.mark.parametrize("p", PROGRAMS, ids=IDS)
def test_trace_and_jit(p):
  closed = corpus.trace(p)
  assert _is_closed_jaxpr(closed)
  if p.symbolic is not None:
    # at least one input has a symbolic (non-int) dimension
    dims = [d for v in closed.jaxpr.invars for d in getattr(v.aval, "shape", ())]
    assert any(not isinstance(d, (int, np.integer)) for d in dims), str(closed)
    # the concrete args are valid instances of the symbolic shapes
    concrete = jax.make_jaxpr(p.fn)(*p.args)
    assert len(concrete.jaxpr.outvars) == len(closed.jaxpr.outvars)
  run_jit(p.fn, *p.args)


@pytest.mark.parametrize("p", GRAD, ids=[p.name for p in GRAD])
def test_grad(p):
  out, closed = run_jit(corpus.grad_fn(p), *p.args)
  assert _is_closed_jaxpr(closed)
  assert len(jax.tree.leaves(out)) > 0


@pytest.mark.parametrize("p", VMAP, ids=[p.name for p in VMAP])
def test_vmap(p):
  out, closed = run_jit(corpus.vmap_fn(p), *corpus.vmap_args(p))
  assert _is_closed_jaxpr(closed)
  for leaf in jax.tree.leaves(out):
    if hasattr(leaf, "shape"):
      assert leaf.shape[:1] == (2,), (p.name, leaf.shape)
