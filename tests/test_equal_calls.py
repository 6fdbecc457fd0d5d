"""A function wrapped in custom_jvp or custom_vjp is traced anew at each call
(jax.nn.relu in every layer of an MLP): the encoder writes equal copies of its
call once (ClosedJaxpr.own_jaxpr), and the decoder gives each its own jaxpr
object again, so that the loaded program prints, runs and differentiates as
the original. Copies that differ in what is written (a source line, a
sub-jaxpr of their own) stay apart."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _mlp(layers=4):
  def f(x, ws):
    for w in ws:
      x = jax.nn.relu(x @ w)  # one source line: every layer's relu call is equal
    return jnp.sum(x)
  x = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
  ws = [jnp.cos(jnp.arange(16.0) + i).reshape(4, 4) for i in range(layers)]
  return f, (x, ws)


def _module(data: bytes) -> pb.Module:
  return pb.Module.FromString(data)


def _root_calls(m: pb.Module) -> list[pb.ClosedJaxpr]:
  """The closed_jaxprs entries of the call_jaxpr params of the root's eqns."""
  root = m.jaxprs[m.closed_jaxprs[m.root].jaxpr]
  params = [m.params[i] for e in root.eqns for i in e.params]
  return [m.closed_jaxprs[p.value.closed_jaxpr] for p in params if p.name == "call_jaxpr"]


def _jaxprs_of_root_calls(data: bytes) -> int:
  """How many jaxprs the root's custom calls name in the file."""
  return len({c.jaxpr for c in _root_calls(_module(data))})


def _custom_calls(cj):
  return [e.params["call_jaxpr"] for e in cj.jaxpr.eqns if e.primitive.name == "custom_jvp_call"]


@pytest.mark.parametrize("debug_info", [True, False])
def test_relu_in_every_layer_is_written_once(debug_info):
  f, args = _mlp(layers=4)
  cj = jax.make_jaxpr(f)(*args)
  assert len(_custom_calls(cj)) == 4
  data = jp.dumps(cj, debug_info=debug_info)
  m = _module(data)
  calls = _root_calls(m)
  assert [c.own_jaxpr for c in calls] == [False, True, True, True]
  assert len({c.jaxpr for c in calls}) == 1 and m.format_version.minor >= 3
  # more layers, no more jaxprs in the file
  f1, args1 = _mlp(layers=1)
  assert len(_module(jp.dumps(jax.make_jaxpr(f1)(*args1), debug_info=debug_info)).jaxprs) == len(m.jaxprs)

  cj2 = jp.loads(data)
  calls = _custom_calls(cj2)
  # each its own object, with variables of its own: JAX prints (and names
  # the variables of) a jaxpr used twice differently from two equal ones
  assert len({id(c.jaxpr) for c in calls}) == 4
  assert not set(calls[0].jaxpr.invars) & set(calls[1].jaxpr.invars)
  if debug_info:
    assert str(cj2) == str(cj)
    assert cj2.pretty_print(source_info=True) == cj.pretty_print(source_info=True)
  run, run2 = jaxpr_as_fun(cj), jaxpr_as_fun(cj2)
  flat = jax.tree.leaves(args)
  np.testing.assert_array_equal(run2(*flat)[0], run(*flat)[0])
  g, g2 = (jax.grad(lambda *a, r=r: r(*a)[0], argnums=tuple(range(len(flat))))(*flat)
           for r in (run, run2))
  for a, b in zip(g, g2):
    np.testing.assert_array_equal(a, b)
  # re-encoding the loaded program writes the same file
  assert jp.dumps(cj2, debug_info=debug_info) == data


def _custom(body):
  fun = jax.custom_jvp(body)
  fun.defjvp(lambda p, t: (fun(*p), t[0]))
  return fun


def one(x):
  return jnp.sin(x) * 2.0


def other(x):  # one's twin but for its name
  return jnp.sin(x) * 2.0


def test_calls_that_differ_in_debug_info_are_written_apart():
  cj = jax.make_jaxpr(lambda x: _custom(other)(_custom(one)(x)))(jnp.arange(3.0))
  data = jp.dumps(cj)
  assert _jaxprs_of_root_calls(data) == 2
  cj2 = jp.loads(data)
  assert [c.jaxpr.debug_info.func_src_info.split()[0] for c in _custom_calls(cj2)] == ["one", "other"]
  assert cj2.pretty_print(source_info=True) == cj.pretty_print(source_info=True)
  # without debug info the two are the same call
  assert _jaxprs_of_root_calls(jp.dumps(cj, debug_info=False)) == 1


def test_calls_with_sub_jaxprs_of_their_own_stay_apart():
  """Equal calls whose inner jit jaxprs are distinct objects (JAX's cache
  emptied between them) are two entries: JAX prints a jaxpr that two calls
  share once, on top, and two equal ones inline."""
  def f(x, clear):
    for _ in range(2):
      if clear:
        jax.clear_caches()
      x = jax.nn.relu(x)
    return x
  x = jnp.arange(3.0)
  cj = jax.make_jaxpr(lambda x: f(x, True))(x)
  inner = [c.jaxpr.eqns[0].params["jaxpr"] for c in _custom_calls(cj)]
  assert inner[0] is not inner[1]
  assert _jaxprs_of_root_calls(jp.dumps(cj)) == 2
  assert str(jp.loads(jp.dumps(cj))) == str(cj)
  shared = jax.make_jaxpr(lambda x: f(x, False))(x)
  assert _jaxprs_of_root_calls(jp.dumps(shared)) == 1


def test_custom_vjp_calls_are_written_once():
  @jax.custom_vjp
  def clip_gradient(x):
    return x

  clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))

  def f(x):
    for _ in range(3):
      x = clip_gradient(x) * 3.0
    return jnp.sum(x)
  x = jnp.arange(4.0)
  cj = jax.make_jaxpr(f)(x)
  data = jp.dumps(cj)
  assert _jaxprs_of_root_calls(data) == 1
  cj2 = jp.loads(data)
  assert str(cj2) == str(cj)
  grad = lambda c: jax.grad(lambda v: jaxpr_as_fun(c)(v)[0])(x)
  np.testing.assert_array_equal(grad(cj2), grad(cj))
  np.testing.assert_array_equal(grad(cj2), np.ones(4))  # clipped at each of the 3 calls
