"""jaxpr_proto.stages: splitting a jaxpr into stages of consecutive eqns."""
import operator
import pickle

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto.stages import split
from tests import corpus

C = np.arange(4.0, dtype=np.float32)


def prog(x, y):
  a = jnp.sin(x) + C
  b = a * y
  d = jnp.cos(b) + x
  return d.sum(), 3.0, x, b, jnp.asarray(C)


X, Y = jnp.linspace(0.0, 1.0, 4), jnp.full(4, 2.0, jnp.float32)


def _same(got, want):
  assert len(got) == len(want)
  for g, w in zip(got, want):
    if jax.dtypes.issubdtype(g.dtype, jax.dtypes.prng_key):
      g, w = jax.random.key_data(g), jax.random.key_data(w)
    # (stages are compiled one by one: XLA may fuse a little differently)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 6, 100])
def test_split_runs_like_the_original(k):
  cj = jax.make_jaxpr(prog)(X, Y)
  staged = split(cj, num_stages=k)
  assert len(staged.stages) == min(k, len(cj.jaxpr.eqns))
  # Consecutive, covering, non-empty.
  assert [i for s in staged.stages for i in s.eqns] == list(range(len(cj.jaxpr.eqns)))
  _same(staged(X, Y), jaxpr_as_fun(cj)(X, Y))


def test_stage_inputs_are_the_live_values():
  cj = jax.make_jaxpr(prog)(X, Y)
  staged = split(cj, boundaries=[2, 4])
  s0, s1, s2 = staged.stages
  # Stage 0: sin, add(C) uses x only; hands on `a`.
  assert s0.inputs == (0,) and len(s0.outputs) == 1
  # Stage 1: mul uses a and y; hands on b (a program output and input of cos).
  assert s1.inputs == (s0.outputs[0], 1)
  # Each stage's jaxpr takes exactly its inputs and gives exactly its outputs.
  for s in staged.stages:
    assert len(s.closed_jaxpr.jaxpr.invars) == len(s.inputs)
    assert len(s.closed_jaxpr.jaxpr.outvars) == len(s.outputs)
  # The constant goes with the stages that use it, not through the pipeline.
  assert len(s0.closed_jaxpr.consts) == 1
  assert staged.outputs[2] == 0  # x passes straight through


def test_split_arguments():
  cj = jax.make_jaxpr(prog)(X, Y)
  with pytest.raises(TypeError):
    split(cj)
  with pytest.raises(TypeError):
    split(cj, 2, boundaries=[1])
  with pytest.raises(ValueError):
    split(cj, num_stages=0)
  with pytest.raises(ValueError):
    split(cj, boundaries=[3, 2])
  with pytest.raises(ValueError):
    split(cj, boundaries=[0])
  with pytest.raises(TypeError):
    split(cj, 2)(X)


def test_no_eqns():
  cj = jax.make_jaxpr(lambda x: (x, 1.0))(X)
  staged = split(cj, num_stages=3)
  assert len(staged.stages) == 1
  _same(staged(X), jaxpr_as_fun(cj)(X))


def test_stages_pickle_and_run_remotely():
  """Each stage travels as its .jaxpb bytes, like to a Dask worker."""
  cj = jax.make_jaxpr(prog)(X, Y)
  staged = split(cj, num_stages=3)

  def submit(fn, *args):
    if isinstance(fn, jp.Function):
      fn = pickle.loads(pickle.dumps(fn))
    return fn(*args)

  _same(staged.run(X, Y, submit=submit), jaxpr_as_fun(cj)(X, Y))
  assert all(isinstance(pickle.loads(pickle.dumps(s)), jp.stages.Stage) for s in staged.stages)
  assert isinstance(pickle.loads(pickle.dumps(staged)), jp.stages.Staged)


def test_lazy_submit_handles():
  """run() with deferred handles, as futures are: getitem is submitted too."""
  cj = jax.make_jaxpr(prog)(X, Y)
  staged = split(cj, num_stages=2)
  log = []

  class Handle:
    def __init__(self, get):
      self.get = get

  def submit(fn, *args):
    log.append(fn)
    return Handle(lambda: fn(*[a.get() if isinstance(a, Handle) else a for a in args]))

  handles = staged.run(*[Handle(lambda v=v: v) for v in (X, Y)], submit=submit)
  _same([h.get() for h in handles], jaxpr_as_fun(cj)(X, Y))
  assert sum(1 for f in log if isinstance(f, jp.Function)) == 2
  assert operator.getitem in log


@pytest.mark.parametrize("name", ["mlp_train_step", "user_custom_vjp", "scan_variants",
                                  "random_key_arg", "state_refs"])
def test_corpus_programs(name):
  p = corpus.get(name)
  cj = corpus.trace(p)
  args = jax.tree.leaves(p.args)
  want = jax.jit(jaxpr_as_fun(cj))(*args)
  staged = split(cj, num_stages=3)
  assert len(staged.stages) == (1 if name == "state_refs" else 3)  # a Ref lives throughout
  for s in staged.stages:
    jax.extend.core.check_jaxpr(s.closed_jaxpr.jaxpr)
  _same(staged(*args), want)


def test_refs_do_not_cross_stages():
  def f(x):
    r = jax.ref.new_ref(x)
    r[...] = r[...] * 2.0
    y = jnp.sin(x)
    r[...] += y
    return jax.ref.freeze(r) + 1.0, y

  cj = jax.make_jaxpr(f)(X)
  n = len(cj.jaxpr.eqns)
  staged = split(cj, num_stages=n)
  assert 1 < len(staged.stages) < n  # the Ref's eqns stay together
  _same(staged(X), jaxpr_as_fun(cj)(X))
  with pytest.raises(ValueError, match="Ref"):
    split(cj, boundaries=[1])
