"""Params of plain data, and literals' values, are written and read once per
process: the encoder keeps their bytes (param_codecs.encode_params,
Encoder.literal) and the decoder params' values (Decoder.param). Never for
params that refer to a Module's tables, whose bytes differ from file to
file, and with exact keys (floats by their bits)."""
from __future__ import annotations

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto import compat

# A user primitive whose params hold an aval and a primitive: values written
# as indices into the Module's tables.
with_table_params = jex_core.Primitive("with_table_params")
with_table_params.def_impl(
    lambda x, *, aval, other: jnp.zeros(aval.shape, aval.dtype) + other.bind(x, accuracy=None).sum())
with_table_params.def_abstract_eval(lambda x, *, aval, other: aval)
jp.register_primitive(with_table_params, namespace="plain_params_test")


def _program(first_shape, other, aval, first_arg=False):
  """A with_table_params eqn after eqns whose avals and primitives depend on
  `first_shape` and `other`, which decide its param's indices in the tables;
  with `first_arg`, the program's first input has the param's aval."""
  def f(x, z):
    y = other(x.reshape(first_shape).astype(jnp.float16)).astype(jnp.float32).reshape(-1)
    return with_table_params.bind(y, aval=aval, other=lax.cos_p) * 2.0 + z.sum()
  z = np.zeros(aval.shape, aval.dtype)
  x = np.arange(6, dtype=np.float32)
  if first_arg:
    return jax.make_jaxpr(lambda z, x: f(x, z))(z, x)
  return jax.make_jaxpr(f)(x, z)


def _param_bytes(data):
  m = jp.parse(data)
  return {p.SerializeToString() for p in m.params if p.name == "aval"}


@pytest.mark.parametrize("first_arg", [False, True], ids=["new_entries", "entries_before"])
def test_params_in_tables_are_written_per_file(first_arg):
  f32 = lambda n: compat.ShapedArray((n,), jnp.float32)
  # The same param value, at other indices in each file: entries that the
  # param adds, or (first_arg) that the program's inputs added before it.
  a = _program((2, 3), jnp.exp, f32(3), first_arg)
  b = _program((6,), jnp.sin, f32(3), not first_arg)
  jp.clear_caches()
  cold_b = jp.dumps(b)
  jp.clear_caches()
  jp.dumps(a)
  assert jp.dumps(b) == cold_b  # not bytes that index a's tables
  got = jp.loads(cold_b)
  (eqn,) = [e for e in got.jaxpr.eqns if e.primitive is with_table_params]
  assert eqn.params == {"aval": f32(3), "other": lax.cos_p}
  args = [np.ones(v.aval.shape, v.aval.dtype) for v in b.jaxpr.invars]
  np.testing.assert_array_equal(jaxpr_as_fun(got)(*args)[0], jaxpr_as_fun(b)(*args)[0])


def test_params_in_tables_are_read_per_file():
  f32 = lambda n: compat.ShapedArray((n,), jnp.float32)
  # Two values, written as the same bytes: the same index in each file's table.
  a, b = _program((2, 3), jnp.exp, f32(3)), _program((2, 3), jnp.exp, f32(4))
  data_a, data_b = jp.dumps(a), jp.dumps(b)
  assert _param_bytes(data_a) == _param_bytes(data_b)
  jp.clear_caches()
  params = lambda cj: [e.params for e in cj.jaxpr.eqns if e.primitive is with_table_params][0]
  assert params(jp.loads(data_a))["aval"] == f32(3)
  got = jp.loads(data_b)
  assert params(got)["aval"] == f32(4)
  assert str(got) == str(b)


def test_plain_params_are_the_same_bytes_and_values():
  def f(x, w):
    h = jnp.tanh(x @ w)
    return lax.reduce_precision(jnp.cumsum(h, axis=1), 5, 10).sum(), lax.dot_general(
        h, w, (((1,), (0,)), ((), ())), precision=lax.Precision.HIGHEST)
  cj = jax.make_jaxpr(jax.value_and_grad(lambda x, w: f(x, w)[0], argnums=1))(
      np.ones((4, 8), np.float32), np.ones((8, 8), np.float32))
  jp.clear_caches()
  cold = jp.dumps(cj)
  assert jp.dumps(cj) == cold  # from the memo: the same bytes
  one, two = jp.loads(cold), jp.loads(cold)
  assert str(one) == str(two) == str(cj)
  plain = 0
  for e1, e2, e in zip(one.jaxpr.eqns, two.jaxpr.eqns, cj.jaxpr.eqns):
    for k, v in e.params.items():
      if isinstance(v, (compat.Jaxpr, compat.ClosedJaxpr)):
        assert str(e1.params[k]) == str(e2.params[k]) == str(v)
      else:
        assert e1.params[k] == e2.params[k] == v and type(e1.params[k]) is type(v)
        plain += 1
  assert plain > 20


with_spec = jex_core.Primitive("with_spec")
with_spec.def_impl(lambda x, *, spec: x)
with_spec.def_abstract_eval(lambda x, *, spec: x)
jp.register_primitive(with_spec, namespace="plain_params_test")


@pytest.mark.skipif(not hasattr(jax.sharding, "UnreducedKind"), reason="JAX < 0.11")
def test_a_plain_param_from_the_memo_brings_its_features():
  kind = next(k for k in jax.sharding.UnreducedKind if k.name != "sum")
  spec = jax.sharding.PartitionSpec(None, unreduced={"x"}, unreduced_kind=kind)
  cj = jax.make_jaxpr(lambda x: with_spec.bind(jnp.sin(x), spec=spec))(1.0)
  jp.clear_caches()
  cold = jp.encode(cj)
  warm = jp.encode(cj)  # its params' bytes from the memo
  assert "unreduced_kind" in cold.required_features
  assert warm.SerializeToString(deterministic=True) == cold.SerializeToString(deterministic=True)


with_float = jex_core.Primitive("with_float")
with_float.def_impl(lambda x, *, c: x + c)
with_float.def_abstract_eval(lambda x, *, c: x)
jp.register_primitive(with_float, namespace="plain_params_test")


def test_signed_zeros_and_nans_stay_apart():
  """-0.0 == 0.0 in Python: the memos key floats by their bits (params, and
  literals: typed arrays, and typed floats where an int meets a float)."""
  def f(x, i):
    return (with_float.bind(x * -0.0, c=-0.0) + with_float.bind(x * 0.0, c=0.0)
            + x * np.float32("nan") + i * -0.0 + i * 0.0)
  cj = jax.make_jaxpr(f)(np.float32(1.0), np.int32(1))
  jp.clear_caches()
  for data in (jp.dumps(cj), jp.dumps(cj)):
    for _ in range(2):
      got = jp.loads(data)
      params = [e.params["c"] for e in got.jaxpr.eqns if e.primitive is with_float]
      lits = [e.invars[1].val for e in got.jaxpr.eqns if e.primitive.name == "mul"]
      assert [bool(np.signbit(v)) for v in params] == [True, False]
      assert [bool(np.signbit(v)) for v in lits] == [True, False, False, True, False]
      assert np.isnan(lits[2])
