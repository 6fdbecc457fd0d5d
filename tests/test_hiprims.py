"""HiJAX primitives (JAX >= 0.11) whose params are Python functions, written
as the jaxprs they trace to: custom_root with aux outputs and pytree guesses
round-trips (outputs, gradients, vmap, the gradient's own jaxpr), and a file
whose functions do not fit the primitive is refused at load."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto import compat

pytestmark = pytest.mark.skipif(not compat.HIPRIMS, reason="custom_root is a HiJAX primitive from JAX 0.11")


def root_with_aux(x):
  """sqrt of each leaf of a dict, by Newton steps, returning the iteration count as aux."""
  def f(y):
    return {"a": y["a"] * y["a"] - x, "b": y["b"] * y["b"] - 2 * x}

  def solve(g, y0):
    y = lax.fori_loop(0, 12, lambda i, y: jax.tree.map(lambda v, r: v - r / (2 * v), y, g(y)), y0)
    return y, jnp.int32(12)

  def tangent_solve(g, y):
    return jax.tree.map(lambda v, d: v / d, y, g({"a": jnp.ones_like(x), "b": jnp.ones_like(x)}))

  guess = {"a": jnp.ones_like(x), "b": jnp.ones_like(x)}
  (sol, steps) = lax.custom_root(f, guess, solve, tangent_solve, has_aux=True)
  return sol["a"] + sol["b"], steps


X = jnp.asarray([1.5, 2.0, 3.0], jnp.float32)


def _loaded(fn, *args):
  cj = jax.make_jaxpr(fn)(*args)
  cj2 = jp.loads(jp.dumps(cj))
  assert str(cj2) == str(cj)
  return cj, cj2


def test_custom_root_with_aux_round_trips():
  cj, cj2 = _loaded(root_with_aux, X)
  run, run2 = jaxpr_as_fun(cj), jaxpr_as_fun(cj2)
  for a, b in zip(run(X), run2(X)):
    np.testing.assert_array_equal(a, b)
  loss = lambda r: lambda x: jnp.sum(r(x)[0])
  np.testing.assert_array_equal(jax.grad(loss(run))(X), jax.grad(loss(run2))(X))
  xs = jnp.stack([X, X + 1])
  for a, b in zip(jax.vmap(run)(xs), jax.vmap(run2)(xs)):
    np.testing.assert_array_equal(a, b)


def test_gradient_jaxpr_with_root_linear_map_round_trips():
  g = jax.grad(lambda x: jnp.sum(root_with_aux(x)[0]))
  cj, cj2 = _loaded(g, X)
  assert "_RootLinearMap" in str(cj)
  np.testing.assert_array_equal(jaxpr_as_fun(cj)(X)[0], jaxpr_as_fun(cj2)(X)[0])




@pytest.mark.parametrize("change, message", [
    # f returns a pair where the guess is one array
    (lambda p: dict(p, f=lambda consts, y: (y, y)), "f returns"),
    # f returns another shape than the guess
    (lambda p: dict(p, f=lambda consts, y: jnp.zeros((2,))), "f returns"),
    # has_aux where solve returns the solution alone
    (lambda p: dict(p, has_aux=True), "has_aux"),
])
def test_functions_that_do_not_fit_are_refused(change, message):
  cj = jax.make_jaxpr(lambda x: lax.custom_root(
      lambda y: y * y - x, jnp.ones_like(x), lambda g, y0: y0 - g(y0), lambda g, y: y / g(1.0)))(2.0)
  [eqn] = cj.jaxpr.eqns  # call_hi_primitive, the HiPrim its _prim param
  prim = eqn.params["_prim"]
  bad = type(prim).__new__(type(prim))
  bad.__dict__.update(prim.__dict__)
  bad.params = change(dict(prim.params))
  data = jp.dumps(cj.replace(jaxpr=cj.jaxpr.replace(eqns=[eqn.replace(params={"_prim": bad})])))
  with pytest.raises(jp.DecodeError, match=message):
    jp.loads(data)


def test_function_names_are_a_declared_feature(monkeypatch):
  """The function params keep their names in a field a 1.1 reader lacks:
  the file says so (format 1.2, feature function_names), and a reader
  without the feature refuses it by that name."""
  from jaxpr_proto.wire import files, versions
  data = jp.dumps(jax.make_jaxpr(root_with_aux)(X))
  m = files.parse(data)
  assert "function_names" in m.required_features
  # 1.2, or a later minor where the program needs another feature too (under
  # JAX 0.12, ClosedJaxpr.same_vars: format 1.4)
  assert (m.format_version.major, m.format_version.minor) >= (1, 2)
  monkeypatch.setattr(versions, "SUPPORTED_FEATURES", versions.SUPPORTED_FEATURES - {"function_names"})
  jp.clear_caches()  # (these bytes may have passed in this process, with the feature)
  with pytest.raises(jp.VersionError, match="function_names"):
    jp.loads(data)
