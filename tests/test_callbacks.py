"""Host callbacks by name: jax.debug.callback, jax.pure_callback and
io_callback save the name their function was registered under, and a
process that never imported the writer's code binds it to its own."""
from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback

import jaxpr_proto as jp
from jaxpr_proto.codec import names
from tests.helpers import run_json

# The writer: its functions and program live only in this script.
WRITER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import io_callback
    import jaxpr_proto as jp
    seen = []

    @jp.register_callback(name="mylib.log")
    def log(x, tag="io", *, scale=1.0):
      seen.append([tag, (np.asarray(x) * scale).tolist()])

    def host_poly(x, y):
      return (np.asarray(x) ** 2 + np.asarray(y)).astype(np.float32)
    jp.register_callback(host_poly, name="mylib.host_poly")

    def program(x, y):
      jax.debug.callback(log, x, "debug", scale=2.0)
      a = jax.pure_callback(host_poly, jax.ShapeDtypeStruct(x.shape, jnp.float32), x, y,
                            vmap_method="sequential")
      io_callback(log, None, a, ordered=True)
      b = io_callback(host_poly, jax.ShapeDtypeStruct(x.shape, jnp.float32), a, x, ordered=True)
      io_callback(log, None, b, ordered=True)
      return a + b

    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    f = jp.trace(program)(x, y)
    jp.save(f, sys.argv[1])
    out = jax.jit(program)(x, y)
    jax.effects_barrier()
    vm = jax.vmap(lambda x: jax.pure_callback(host_poly, jax.ShapeDtypeStruct((3,), jnp.float32),
                                              x, y, vmap_method="sequential"))(np.stack([x, 2 * x]))
    print(json.dumps({"out": np.asarray(out).tolist(), "seen": seen,
                      "vmap": np.asarray(vm).tolist()}))
""")

# The reader: its own functions under the same names; never the writer's code.
READER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax, jax.numpy as jnp
    import jaxpr_proto as jp
    seen = []
    how = sys.argv[2]

    def log(x, tag="io", *, scale=1.0):
      seen.append([tag, (np.asarray(x) * scale).tolist()])

    def host_poly(x, y):
      return (np.asarray(x) ** 2 + np.asarray(y)).astype(np.float32)

    if how == "registered":
      jp.register_callback(log, name="mylib.log")
      jp.register_callback(host_poly, name="mylib.host_poly")
      f = jp.load(sys.argv[1])
    elif how == "bound":  # for this load only
      f = jp.load(sys.argv[1], callbacks={"mylib.log": log, "mylib.host_poly": host_poly})
    else:  # nothing registered: refused, naming both
      try:
        jp.load(sys.argv[1])
      except jp.DecodeError as e:
        report = jp.check(sys.argv[1])
        print(json.dumps({"error": str(e), "check": [p for p, _ in report.errors]}))
      sys.exit(0)
    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    out = jax.jit(f)(x, y)
    jax.effects_barrier()
    sub = f.closed_jaxpr.jaxpr.eqns  # the pure_callback alone, under vmap
    pure = next(e for e in sub if e.primitive.name == "pure_callback")
    g = lambda x: pure.primitive.bind(x, y, **pure.params)[0]
    vm = jax.vmap(g)(np.stack([x, 2 * x]))
    print(json.dumps({"out": np.asarray(out).tolist(), "seen": seen,
                      "vmap": np.asarray(vm).tolist(), "text": str(f.closed_jaxpr)}))
""")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  path = tmp_path_factory.mktemp("callbacks") / "program.jaxpb"
  return path, run_json(WRITER, path)


@pytest.mark.parametrize("how", ["registered", "bound"])
def test_callbacks_run_in_a_fresh_process(saved, how):
  path, want = saved
  got = run_json(READER, path, how)
  np.testing.assert_array_equal(got["out"], want["out"])
  np.testing.assert_array_equal(got["vmap"], want["vmap"])
  # What the callbacks received, in order (debug first, then the ordered io ones).
  assert got["seen"] == want["seen"]
  assert [t for t, _ in got["seen"]] == ["debug", "io", "io"]
  assert "pure_callback" in got["text"] and "io_callback" in got["text"]


def test_unregistered_callbacks_are_refused_by_name(saved):
  path, _ = saved
  got = run_json(READER, path, "none")
  assert "is not registered in this process" in got["error"]
  assert "mylib.host_poly, mylib.log" in got["error"]  # every name the file needs
  assert "jp.register_callback" in got["error"] and "callbacks=" in got["error"]
  assert got["check"] and all(".params.callback" in p for p in got["check"])


def test_file_names_the_feature(saved):
  path, _ = saved
  m = jp.parse(path.read_bytes())
  assert "callbacks" in m.required_features
  assert (m.format_version.major, m.format_version.minor) >= (1, 3)
  assert b"host_poly" in path.read_bytes() and b"def " not in path.read_bytes()


# --- in this process -----------------------------------------------------------------

def _registered(name, fn):
  names.CALLBACKS.add(name, fn, replace=True)
  return fn


def test_unregistered_function_cannot_be_saved():
  cj = jax.make_jaxpr(lambda x: jax.pure_callback(
      lambda v: np.asarray(v) + 1, jax.ShapeDtypeStruct((2,), jnp.float32), x))(jnp.ones(2))
  with pytest.raises(jp.EncodeError, match=r"eqn\[0\].params.callback: .*not registered.*"
                                           r"jp.register_callback"):
    jp.dumps(cj)


def test_register_callback_checks_its_arguments():
  with pytest.raises(ValueError, match="dotted name"):
    jp.register_callback(print, name="has space")
  with pytest.raises(TypeError):
    jp.register_callback(3, name="x.y")
  f1 = _registered("tests.same_name", lambda: 1)
  with pytest.raises(names.RegistryError, match="replace=True"):
    jp.register_callback(lambda: 2, name="tests.same_name")
  assert jp.register_callback(f1, name="tests.same_name") is f1  # the same again: fine

  @jp.register_callback(name="tests.decorated")
  def g(x):
    return x
  assert names.CALLBACKS.get("tests.decorated") is g


def test_a_load_binds_its_own_function():
  """Loads of the same bytes bound to different functions call each its own,
  also through jp.Function's cache of compiled programs."""
  calls = []
  host = _registered("tests.tag", lambda x: calls.append("registered"))
  f = jp.trace(lambda x: (io_callback(host, None, x, ordered=True), x + 1)[1])(jnp.ones(2))
  data = jp.dumps(f)
  one = jp.loads(data, callbacks={"tests.tag": lambda x: calls.append("one")})
  two = jp.loads(data, callbacks={"tests.tag": lambda x: calls.append("two")})
  three = jp.loads(data)
  for g in (one, two, three, one):
    g(jnp.ones(2))
  jax.effects_barrier()
  assert calls == ["one", "two", "registered", "one"]


def _mutated(program, args, mutate):
  m = jp.encode(jax.make_jaxpr(program)(*args))
  for p in m.params:
    if p.name in ("callback", "vmap_method"):
      mutate(p)
  return m.SerializeToString()


def _ext_field(p, name):
  return next(f for f in p.value.extension.fields if f.name == name)


@pytest.mark.parametrize("mutate, error", [
    (lambda p: p.name == "vmap_method" and setattr(p.value, "str", "bogus"),
     r"eqn\[0\].params.vmap_method: 'bogus' is none of JAX's vmap methods"),
    # an in_tree of one leaf for an eqn of two operands
    (lambda p: p.name == "callback" and _ext_field(p, "in_tree").value.CopyFrom(
        jp.encode(jax.make_jaxpr(lambda x: jax.pure_callback(
            _registered("tests.one", lambda v: v), jax.ShapeDtypeStruct((2,), jnp.float32),
            x))(jnp.ones(2))).params[0].value.extension.fields[1].value),
     r"eqn\[0\].params.callback: the callback takes 1 array arguments, the eqn has 2 operands"),
    (lambda p: p.name == "callback" and setattr(_ext_field(p, "name").value, "str", "os.system; x"),
     r"eqn\[0\].params.callback: a callback needs a dotted name"),
    (lambda p: p.name == "callback" and setattr(_ext_field(p, "name").value, "str", "tests.nobody"),
     r"eqn\[0\].params.callback: callback 'tests.nobody' is not registered"),
])
def test_hostile_callback_params(mutate, error):
  host = _registered("tests.two_args", lambda a, b: np.asarray(a) + np.asarray(b))
  data = _mutated(lambda x, y: jax.pure_callback(host, jax.ShapeDtypeStruct((2,), jnp.float32),
                                                 x, y, vmap_method="sequential"),
                  (jnp.ones(2), jnp.ones(2)), mutate)
  with pytest.raises(jp.DecodeError, match=error):
    jp.loads(data)
  assert not jp.check(data).ok


# --- code, for trusted files only ------------------------------------------------

UNPICKLED = []


def _mark_unpickled():
  UNPICKLED.append(1)
  return lambda v: np.asarray(v) + 10


class _Host:
  """A callback whose unpickling is visible (what a hostile pickle would do)."""

  def __call__(self, v):
    return np.asarray(v) + 10

  def __reduce__(self):
    return (_mark_unpickled, ())


def test_pickled_code_loads_only_when_trusted():
  fn = lambda x: jax.pure_callback(_Host(), jax.ShapeDtypeStruct((2,), jnp.float32), x) * 2
  cj = jax.make_jaxpr(fn)(jnp.ones(2))
  with pytest.raises(jp.EncodeError, match="pickle_functions=True"):
    jp.dumps(cj)
  data = jp.dumps(cj, pickle_functions=True)
  assert "pickled_code" in jp.parse(data).required_features
  UNPICKLED.clear()
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\].params.callback: the callback .*_Host "
                                           r"is saved as pickled code.*trust_pickled_code=True"):
    jp.loads(data)
  report = jp.check(data)
  assert [p for p, _ in report.errors] == ["eqn[0].params.callback"]
  assert not UNPICKLED, "refused files must never be unpickled"
  cj2 = jp.loads(data, trust_pickled_code=True)
  assert UNPICKLED and jp.check(data, trust_pickled_code=True).ok
  out = jax.jit(jax.extend.core.jaxpr_as_fun(cj2))(jnp.ones(2))[0]
  np.testing.assert_array_equal(out, np.full(2, 22.0, np.float32))


def test_pickle_embeds_unregistered_callbacks():
  """pickle / cloudpickle (and so Dask) carry an unregistered callback as
  code: the whole stream is code anyway."""
  import pickle
  scale = 3.0
  f = jp.trace(lambda x: jax.pure_callback(lambda v: np.asarray(v) * scale,
                                           jax.ShapeDtypeStruct((2,), jnp.float32), x))(jnp.ones(2))
  import cloudpickle
  g = pickle.loads(cloudpickle.dumps(f))
  np.testing.assert_array_equal(g(jnp.ones(2)), np.full(2, 3.0, np.float32))
