"""Long chains of dependent eqns (issue 30): a file never is refused for one.

An unrolled model is one long chain, and exactly the program people save:
a 100k-eqn chain loads (with and without JAX's type check), checks and
prints as the original. XLA's CPU compiler crashes on chains past about
bounds.XLA_CPU_CHAIN ops (docs/limits.md), so where this package compiles a
program itself (the CLI's `run`) it measures the lowered program's chain
first and refuses a longer one with a message instead of a crash.
"""
from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp
from jaxpr_proto.check import bounds

N = 100_000


@pytest.fixture(scope="module")
def long_chain():
  """A traced chain of N sins, and its file (built once: tracing takes seconds)."""
  def f(x):
    for _ in range(N):
      x = jnp.sin(x)
    return x
  cj = jax.make_jaxpr(f)(np.float32(0.5))
  return cj, jp.dumps(cj)


def test_a_long_chain_loads_and_prints_as_the_original(long_chain):
  cj, data = long_chain
  assert len(cj.jaxpr.eqns) == N
  want = str(cj)
  for typecheck in (True, False):
    got = jp.loads(data, typecheck=typecheck)
    assert len(got.jaxpr.eqns) == N
    assert str(got) == want
  assert jp.check(data).ok


def _nested_calls(n: int) -> bytes:
  """n levels of jit, each calling the level below twice in a row: a chain
  of 2**n sins in a file of a few KB."""
  f = jnp.sin
  for _ in range(n):
    f = (lambda g: jax.jit(lambda x: g(g(x))))(f)
  return jp.dumps(jax.make_jaxpr(f)(1.0))


def test_shared_calls_make_a_long_chain_that_loads():
  # A 2**20-eqn chain through shared sub-jaxprs is within MAX_INLINED_EQNS.
  data = _nested_calls(20)
  assert len(data) < 10_000
  cj = jp.loads(data)
  assert jp.check(data).ok
  assert bounds.compiled_chain(jax.jit(jax.extend.core.jaxpr_as_fun(cj)).lower(1.0)
                               .compiler_ir("stablehlo")) == 2 ** 20


def test_shared_calls_past_the_size_bound_are_refused():
  # A 2**30-eqn chain: refused for its size, not for its chain.
  with pytest.raises(jp.DecodeError, match=f"more than {bounds.MAX_INLINED_EQNS} eqns once "
                                           "each use of a sub-jaxpr is counted"):
    jp.loads(_nested_calls(30))


def _chain_of(f, *args) -> int:
  return bounds.compiled_chain(jax.jit(f).lower(*args).compiler_ir("stablehlo"))


def test_compiled_chain_counts_ops_with_calls_inlined():
  x = np.float32(1)
  assert _chain_of(lambda x: jnp.sin(jnp.sin(jnp.sin(x))), x) == 3
  assert _chain_of(lambda x: jnp.sin(x) + jnp.cos(x), x) == 2
  # An eqn of several ops counts them all (logistic: negate, exp, add, divide).
  assert _chain_of(lambda x: jax.nn.sigmoid(jax.nn.sigmoid(x)), x) == 8
  # A call counts as its callee's chain, each time it is called.
  g = jax.jit(lambda x: jnp.sin(jnp.sin(x)))
  assert _chain_of(lambda x: g(g(g(x))), x) == 6
  # A loop body is a computation of its own; an unrolled scan copies it.
  body = lambda c, _: (jnp.sin(jnp.sin(jnp.sin(c))), None)
  loop = lambda x: jax.lax.while_loop(lambda c: c < 3, lambda c: body(c, None)[0], jnp.sin(x))
  assert _chain_of(loop, x) == 3
  assert _chain_of(lambda x: jax.lax.scan(body, x, None, length=100, unroll=True)[0], x) >= 300


def test_cli_run_refuses_a_chain_past_what_xla_compiles(tmp_path):
  # In a process of its own: a regression would crash XLA (SIGSEGV), not fail.
  n = (bounds.XLA_CPU_CHAIN + 1).bit_length()  # 2**n sins, past XLA_CPU_CHAIN
  path = tmp_path / "deep.jaxpb"
  path.write_bytes(_nested_calls(n))
  proc = subprocess.run([sys.executable, "-m", "jaxpr_proto", "run", str(path), "--random"],
                        capture_output=True, text=True, timeout=600,
                        env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert proc.returncode == 1, proc.stderr
  assert f"a chain of {2 ** n:,} dependent ops" in proc.stderr
  assert "XLA's CPU compiler crashes" in proc.stderr


def test_diff_of_a_long_chain_with_one_eqn_changed(long_chain):
  # difflib alone is quadratic in a repeated key: the common ends are matched first.
  from jaxpr_proto.cli import jaxpr_diff
  cj, _ = long_chain
  k = N // 2
  eqns = list(cj.jaxpr.eqns)
  eqns[k] = eqns[k].replace(primitive=jax.lax.cos_p)
  other = cj.replace(jaxpr=cj.jaxpr.replace(eqns=eqns))
  d = jaxpr_diff.diff(cj, other)
  assert [(c.kind, c.a, c.b) for c in d.changes] == [("changed", k, k)]
