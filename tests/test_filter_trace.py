"""Functions inside pytrees, by name, and jp.trace(filter=True): an equinox
MLP with a jax.nn.silu activation, saved with its non-array leaves static,
loads in a process that imports equinox but not the writer's code; there the
model's outputs and eqx.filter_grad through the loaded Function agree with
the original's. Functions are known by qualified name (JAX's public modules)
or by jp.register_function; a file naming another is refused on load."""
from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp
from jaxpr_proto.codec import names
from tests.helpers import run_json

eqx = pytest.importorskip("equinox")

WRITER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax, jax.numpy as jnp, equinox as eqx
    import jaxpr_proto as jp

    m = eqx.nn.MLP(3, 2, 8, 2, activation=jax.nn.silu, key=jax.random.key(0))
    x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
    f = jp.trace(lambda m, x: jax.vmap(m)(x), filter=True)(m, x)
    jp.save(f, sys.argv[1])
    eqx.tree_serialise_leaves(sys.argv[2], m)
    out = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(m, x)
    grad = eqx.filter_jit(eqx.filter_grad(lambda m, x: jnp.sum(jax.vmap(m)(x) ** 2)))(m, x)
    print(json.dumps({"out": np.asarray(out).tolist(),
                      "grad": [np.asarray(g).tolist() for g in jax.tree.leaves(grad)]}))
""")

# The reader builds a model of the same shape only to read the weights into.
READER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax, jax.numpy as jnp, equinox as eqx
    import jaxpr_proto as jp

    f = jp.load(sys.argv[1])
    like = eqx.nn.MLP(3, 2, 8, 2, activation=jax.nn.silu, key=jax.random.key(7))
    m = eqx.tree_deserialise_leaves(sys.argv[2], like)
    x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
    grad = eqx.filter_jit(eqx.filter_grad(lambda m, x: jnp.sum(f(m, x) ** 2)))(m, x)
    relu = eqx.nn.MLP(3, 2, 8, 2, activation=jax.nn.relu, key=jax.random.key(7))
    try:
      f(relu, x)
      refused = None
    except TypeError as e:
      refused = str(e)
    print(json.dumps({"out": np.asarray(f(m, x)).tolist(),
                      "grad": [np.asarray(g).tolist() for g in jax.tree.leaves(grad)],
                      "refused": refused}))
""")


def test_equinox_mlp_saved_with_filter_loads_without_the_writers_code(tmp_path):
  files = [str(tmp_path / "mlp.jaxpb"), str(tmp_path / "mlp.eqx")]
  wrote = run_json(WRITER, *files)
  read = run_json(READER, *files)
  assert read["out"] == wrote["out"]
  assert read["grad"] == wrote["grad"]
  assert "static" in read["refused"] and "silu" in read["refused"]


def _mlp():
  return eqx.nn.MLP(3, 2, 8, 2, activation=jax.nn.silu, key=jax.random.key(0))


def test_static_leaves_are_in_the_file_by_name():
  m, x = _mlp(), jnp.ones((4, 3))
  f = jp.trace(lambda m, x: jax.vmap(m)(x), filter=True)(m, x)
  msg = jp.encode(f)
  got = {s.index: s.value.WhichOneof("kind") + ":" + getattr(s.value, s.value.WhichOneof("kind"))
         for s in msg.function.static_leaves}
  assert got == {6: "function:jax.nn.silu", 7: "function:equinox.nn._mlp._identity"}
  assert {"functions", "static_leaves"} <= set(msg.required_features)
  # Arrays and Python scalars in the arguments: scalars are static, as in eqx.filter_jit.
  g = jp.trace(lambda x, s: x * s, filter=True)(x, 3.0)
  assert g.static_leaves == ((1, 3.0),) and len(g.in_avals) == 1
  np.testing.assert_array_equal(jp.loads(jp.dumps(g))(x, 3.0), x * 3.0)
  with pytest.raises(TypeError, match="leaf 1 is static, traced as 3.0; got 4.0"):
    jp.loads(jp.dumps(g))(x, 4.0)


def test_unknown_functions_are_refused_and_registered_ones_saved():
  def gelu_tanh(x):
    return jax.nn.gelu(x, approximate=True)

  x = jnp.linspace(-2.0, 2.0, 5)
  trace = jp.trace(lambda act, x: act(x), filter=True)
  with pytest.raises(jp.EncodeError, match=r"function\.static_leaves\[0\]"):
    jp.dumps(trace(gelu_tanh, x))
  jp.register_function(gelu_tanh, name="tests.gelu_tanh")
  try:
    data = jp.dumps(trace(gelu_tanh, x))
    np.testing.assert_array_equal(jp.loads(data)(gelu_tanh, x), jax.jit(gelu_tanh)(x))
  finally:
    names.FUNCTIONS.remove("tests.gelu_tanh")
  with pytest.raises(jp.DecodeError, match="'tests.gelu_tanh' is not known in this process"):
    jp.loads(data)


def test_jax_functions_are_known_by_qualified_name():
  assert names.function_name(jax.nn.silu) == "jax.nn.silu"
  assert names.function(names.function_name(jax.nn.swish)) is jax.nn.swish  # one object
  assert names.function("jax.numpy.add") is jnp.add
  assert names.function("os.system") is None  # never imported
  assert names.function_name(lambda x: x) is None
