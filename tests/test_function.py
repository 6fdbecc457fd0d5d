"""jp.trace / jp.Function: saved functions with pytree signatures."""
import copy
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import textwrap
import types
from typing import NamedTuple

import cloudpickle
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp
from jaxpr_proto.codec import names
from tests import corpus

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


class Params(NamedTuple):
  w: jax.Array
  b: jax.Array


def apply(params, x, *, scale=1.0, act="relu"):
  h = x @ params["dense"].w + params["dense"].b
  h = jax.nn.relu(h) if act == "relu" else jnp.tanh(h)
  return {"y": h * scale, "aux": (None, [jnp.sum(h)])}


def _params():
  return {"dense": Params(jnp.arange(6.0).reshape(3, 2) / 7, jnp.array([0.5, -2.0]))}


X = jnp.array([1.0, -2.0, 0.5])


def _traced():
  return jp.trace(apply, static_argnames=("act",))(_params(), X, scale=2.0, act="relu")


def _loss(f):
  return lambda p, x: f(p, x, scale=2.0)["aux"][1][0] + jnp.sum(f(p, x, scale=2.0)["y"] ** 2)


def assert_tree_close(a, b):
  la, ta = jax.tree.flatten(a)
  lb, tb = jax.tree.flatten(b)
  assert len(la) == len(lb), (ta, tb)
  for x, y in zip(la, lb):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-6)


# --- what it holds -----------------------------------------------------------------

def test_trace_holds_the_signature():
  f = _traced()
  assert isinstance(f, jp.Function)
  assert f.name == "apply"
  assert isinstance(f.closed_jaxpr, jax.extend.core.ClosedJaxpr)
  args_tree = jax.tree.structure(((_params(), X), {"scale": 2.0}))
  assert f.in_tree == args_tree
  assert f.out_tree == jax.tree.structure(apply(_params(), X, scale=2.0))
  assert [a.shape for a in f.in_avals] == [(3, 2), (2,), (3,), ()]
  assert f.in_avals[3].weak_type  # the Python float
  assert [a.shape for a in f.out_avals] == [(), (2,)]
  assert "apply" in repr(f)


def test_static_args_are_fixed():
  relu = _traced()
  tanh = jp.trace(apply, static_argnames=("act",))(_params(), X, scale=2.0, act="tanh")
  assert_tree_close(relu(_params(), X, scale=2.0), apply(_params(), X, scale=2.0, act="relu"))
  assert_tree_close(tanh(_params(), X, scale=2.0), apply(_params(), X, scale=2.0, act="tanh"))
  g = jp.trace(lambda n, x: x * n, static_argnums=0)(3, X)
  assert_tree_close(g(X), X * 3)
  with pytest.raises(TypeError, match="static"):
    g(3, X)


def test_call_checks_arguments():
  f = _traced()
  with pytest.raises(TypeError, match="structure"):
    f(_params(), X)  # scale missing
  with pytest.raises(TypeError, match="input 2 has type float32\\[4\\]"):
    f(_params(), jnp.ones(4), scale=2.0)
  with pytest.raises(TypeError, match="int32"):
    f(_params(), jnp.ones(3, jnp.int32), scale=2.0)


# --- calling it under transformations, after a round trip -----------------------------

@pytest.fixture(scope="module")
def loaded():
  return jp.loads(jp.dumps(_traced()))


def test_loaded_is_a_function(loaded):
  assert isinstance(loaded, jp.Function)
  assert loaded.name == "apply"
  assert jp.dumps(loaded) == jp.dumps(_traced())


def test_call(loaded):
  assert_tree_close(loaded(_params(), X, scale=2.0), apply(_params(), X, scale=2.0))
  out = loaded(_params(), X, scale=2.0)
  assert set(out) == {"y", "aux"} and out["aux"][0] is None


def test_jit(loaded):
  assert_tree_close(jax.jit(loaded)(_params(), X, scale=3.0), apply(_params(), X, scale=3.0))
  assert_tree_close(jax.jit(lambda p: loaded(p, X, scale=1.0))(_params()),
                    apply(_params(), X, scale=1.0))


def test_grad(loaded):
  assert_tree_close(jax.grad(_loss(loaded), argnums=(0, 1))(_params(), X),
                    jax.grad(_loss(apply), argnums=(0, 1))(_params(), X))


def test_vmap(loaded):
  xs = jnp.stack([X, -X, 2 * X])
  assert_tree_close(jax.vmap(lambda x: loaded(_params(), x, scale=2.0))(xs),
                    jax.vmap(lambda x: apply(_params(), x, scale=2.0))(xs))
  ps = jax.tree.map(lambda a: jnp.stack([a, a + 1]), _params())
  assert_tree_close(jax.vmap(lambda p: loaded(p, X, scale=2.0))(ps),
                    jax.vmap(lambda p: apply(p, X, scale=2.0))(ps))


def test_jvp_and_hessian(loaded):
  f = lambda x: _loss(loaded)(_params(), x)
  g = lambda x: _loss(apply)(_params(), x)
  jvp = lambda h: jax.jit(lambda x, t: jax.jvp(h, (x,), (t,)))
  assert_tree_close(jvp(f)(X, jnp.ones(3)), jvp(g)(X, jnp.ones(3)))
  assert_tree_close(jax.jit(jax.hessian(f))(X), jax.jit(jax.hessian(g))(X))
  assert_tree_close(jax.hessian(f)(X), jax.jit(jax.hessian(g))(X))  # and not under jit


# --- serializing it -------------------------------------------------------------------

def test_save_and_load(tmp_path):
  f = _traced()
  jp.save(f, tmp_path / "apply.jaxpb")
  g = jp.load(tmp_path / "apply.jaxpb")
  assert isinstance(g, jp.Function)
  assert_tree_close(g(_params(), X, scale=2.0), f(_params(), X, scale=2.0))
  msg = jp.encode(f)
  assert msg.HasField("function") and msg.function.name == "apply"
  assert isinstance(jp.decode(msg), jp.Function)
  # A plain jaxpr stays a ClosedJaxpr.
  assert isinstance(jp.loads(jp.dumps(f.closed_jaxpr)), jax.extend.core.ClosedJaxpr)


@pytest.mark.parametrize("how", ["pickle", "cloudpickle", "deepcopy"])
def test_pickle(how):
  f = _traced()
  g = {"pickle": lambda x: pickle.loads(pickle.dumps(x)),
       "cloudpickle": lambda x: cloudpickle.loads(cloudpickle.dumps(x)),
       "deepcopy": copy.deepcopy}[how](f)
  assert isinstance(g, jp.Function) and g is not f
  assert jp.dumps(g) == jp.dumps(f)
  assert_tree_close(g(_params(), X, scale=2.0), f(_params(), X, scale=2.0))
  assert copy.copy(f) is f  # immutable
  j = {"pickle": lambda x: pickle.loads(pickle.dumps(x)),
       "cloudpickle": lambda x: cloudpickle.loads(cloudpickle.dumps(x)),
       "deepcopy": copy.deepcopy}[how](jax.jit(f))
  assert_tree_close(j(_params(), X, scale=2.0), f(_params(), X, scale=2.0))


def test_pickle_payload_is_jaxpb():
  f = _traced()
  assert jp.dumps(f) in pickle.dumps(f)


def test_from_closed_jaxpr():
  cj = jax.make_jaxpr(lambda a, b: (a * b, a - b))(1.0, 2.0)
  f = jp.Function.from_closed_jaxpr(cj, name="mul_sub")
  assert f(3.0, 2.0) == [6.0, 1.0]
  g = jp.loads(jp.dumps(f))
  assert g.name == "mul_sub" and g(3.0, 2.0) == [6.0, 1.0]


def test_compiles_once():
  f = jp.trace(lambda p, x: apply(p, x, scale=1.5, act="tanh"))(_params(), X)
  p, x = _params(), X
  data = jp.dumps(f)
  count = []

  def listener(event, duration, **kw):
    if event == BACKEND_COMPILE:
      count.append(kw)

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    for _ in range(3):
      f(p, x)
    assert len(count) == 1
    # The same bytes, loaded again and again (as Dask does for each task):
    # compiled once.
    for _ in range(3):
      jp.loads(data)(p, x)
      pickle.loads(pickle.dumps(jp.loads(data)))(p, x)
    assert len(count) == 2
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


# --- pytree node types -----------------------------------------------------------------

def test_namedtuples_are_structural():
  f = jp.trace(lambda p: Params(p.b, p.w))(Params(jnp.ones(2), jnp.zeros(3)))
  g = jp.loads(jp.dumps(f))
  out = g(Params(jnp.ones(2), jnp.zeros(3)))  # the caller's own class is accepted
  assert type(out).__name__ == "Params" and out._fields == ("w", "b")
  assert out.w.shape == (3,)
  assert jp.dumps(g) == jp.dumps(f)  # the made class encodes as the original


@dataclasses.dataclass
class Linear:
  w: jax.Array
  b: jax.Array
  use_bias: bool = True


jax.tree_util.register_dataclass(Linear, data_fields=["w", "b"], meta_fields=["use_bias"])


class Unregistered:
  def __init__(self, a):
    self.a = a


jax.tree_util.register_pytree_node(Unregistered, lambda u: ((u.a,), None),
                                   lambda _, c: Unregistered(*c))


def test_registered_dataclass():
  lin = Linear(jnp.ones((2, 3)), jnp.ones(3), use_bias=False)
  fn = lambda m, x: x @ m.w + (m.b if m.use_bias else 0.0)
  f = jp.trace(fn)(lin, jnp.ones(2))
  with pytest.raises(jp.EncodeError, match="Linear"):
    jp.dumps(f)
  jp.register_pytree_node(Linear, "tests::Linear")
  try:
    data = jp.dumps(f)
    g = jp.loads(data)
    assert_tree_close(g(lin, jnp.ones(2)), fn(lin, jnp.ones(2)))
    assert_tree_close(jax.grad(lambda m: g(m, jnp.ones(2)).sum())(lin).w, jnp.ones((2, 3)))
  finally:
    names.PYTREE_NODES.remove("tests::Linear")
  with pytest.raises(jp.DecodeError, match="tests::Linear"):
    jp.loads(data)


def test_unregistered_node_type():
  f = jp.trace(lambda u: u.a * 2)(Unregistered(jnp.ones(2)))
  with pytest.raises(jp.EncodeError, match="test_function.Unregistered"):
    jp.dumps(f)
  with pytest.raises(jp.EncodeError, match="Unregistered"):
    pickle.dumps(f)


def test_decoding_never_imports():
  m = jp.encode(jp.trace(lambda p: p.w)(Params(jnp.ones(2), jnp.ones(2))))
  m.function.in_tree.root.children[0].children[0].children[0].kind = \
      jp.proto.TREE_NODE_KIND_CUSTOM
  m.function.in_tree.root.children[0].children[0].children[0].type = "os.path.join"
  before = set(sys.modules)
  with pytest.raises(jp.DecodeError, match="os.path.join"):
    jp.decode(m)
  assert set(sys.modules) == before


def test_known_libraries_preregistered():
  """The node types of an imported optax / flax / equinox are pre-registered;
  a library that is not imported is never imported. (Fake modules here, so
  that the test runs without those libraries.)"""
  fake = types.ModuleType("optax")

  class FakeAdamState(NamedTuple):
    count: jax.Array
    mu: jax.Array

  FakeAdamState.__module__ = "optax._src.transform"

  @dataclasses.dataclass
  class FakeNode:
    x: jax.Array
    n: int = 1

  FakeNode.__module__ = "optax._src.base"
  jax.tree_util.register_dataclass(FakeNode, data_fields=["x"], meta_fields=["n"])

  class NotANode:
    pass

  NotANode.__module__ = "optax._src.base"
  fake.ScaleByFakeAdamState = FakeAdamState
  fake.FakeNode = FakeNode
  fake.NotANode = NotANode
  fake._Private = FakeAdamState
  if "optax" in sys.modules:
    pytest.skip("the real optax is imported")
  sys.modules["optax"] = fake
  try:
    f = jp.trace(lambda s, n: (s.mu * n.x, n))(FakeAdamState(jnp.ones(()), jnp.ones(2)),
                                                FakeNode(jnp.ones(2), 3))
    g = jp.loads(jp.dumps(f))  # registered lazily, at the first need
    assert names.PYTREE_NODES.name(FakeAdamState) == "optax::ScaleByFakeAdamState"
    assert names.PYTREE_NODES.name(FakeNode) == "optax::FakeNode"
    assert names.PYTREE_NODES.name(NotANode) is None
    out = g(FakeAdamState(jnp.ones(()), jnp.full(2, 2.0)), FakeNode(jnp.ones(2), 3))
    assert isinstance(out[1], FakeNode) and out[1].n == 3
    assert_tree_close(out[0], jnp.full(2, 2.0))
  finally:
    del sys.modules["optax"]
    for name in ("optax::ScaleByFakeAdamState", "optax::FakeNode"):
      names.PYTREE_NODES.remove(name)
    names._seen.discard("optax")  # scanned again when the real optax comes
  for mod in ("flax", "equinox", "optax"):
    if mod not in sys.modules:
      names.refresh()
      assert mod not in sys.modules


@pytest.mark.parametrize("lib", ["optax", "flax", "equinox"])
def test_real_library_node_types(lib):
  """The real libraries (test dependencies): their node types are pre-registered."""
  mod = pytest.importorskip(lib)
  names.refresh()
  assert [n for n in names.PYTREE_NODES.names() if n.startswith(lib + "::")]
  if lib == "optax":
    opt = mod.adam(1e-2)
    params = {"w": jnp.ones((3, 2))}

    def step(params, state, g):
      upd, state = opt.update(g, state, params)
      return mod.apply_updates(params, upd), state

    args = (params, opt.init(params), params)
  elif lib == "equinox":
    lin = mod.nn.Linear(3, 2, key=jax.random.key(0))
    step, args = (lambda m, x: (m(x), m)), (lin, jnp.ones(3))
  else:
    from flax.core import FrozenDict
    step, args = (lambda p, x: x @ p["w"]), (FrozenDict({"w": jnp.ones((3, 2))}), jnp.ones(3))
  g = jp.loads(jp.dumps(jp.trace(step)(*args)))
  assert_tree_close(g(*args), step(*args))
  assert jax.tree.structure(g(*args)) == jax.tree.structure(step(*args))


# --- the corpus ---------------------------------------------------------------------------
#
# Every program: jp.trace -> dumps -> loads gives the same bytes and signature,
# and the loaded Function traces (by jax.eval_shape: no compiling) under a
# call, grad and vmap to the types the original program has. A sample is run
# for real, compared with the original's outputs, gradients and vmap. A fresh
# process loads every saved program and checks the types of a call.

for _cls, _name in ((corpus.Linear, "tests.corpus::Linear"),
                    (corpus.MLPModule, "tests.corpus::MLPModule")):
  if _name not in names.PYTREE_NODES:
    jp.register_pytree_node(_cls, _name)

RUN = ["mlp_train_step", "user_custom_vjp", "scan_variants", "while_loop_newton"]


def _types(tree):
  """Structure and leaf types, comparable across processes."""
  leaves, t = jax.tree.flatten(tree)
  return (str(t).replace("namedtuple", ""),
          [(tuple(getattr(a, "shape", ())), str(getattr(a, "dtype", type(a).__name__)))
           for a in leaves])


def _grad_types(p):
  """What jax.grad(..., allow_int=True) of p gives: the args' own types,
  float0 for integer ones."""
  def t(x):
    x = jax.typeof(x)
    dt = x.dtype if jax.dtypes.issubdtype(x.dtype, jnp.inexact) else jax.dtypes.float0
    return jax.ShapeDtypeStruct(x.shape, dt)
  args = tuple(jax.tree.map(t, p.args[i]) for i in p.grad_argnums)
  return _types(args)


_SAVED: dict = {}


def _try_save(p):
  """(Function, bytes) of corpus program p, or the reason it has none (cached)."""
  if p.name not in _SAVED:
    try:
      f = jp.trace(p.fn)(*p.args)
    except Exception as e:  # the corpus is still being written
      _SAVED[p.name] = f"corpus program does not trace here: {type(e).__name__}: {e}"
    else:
      _SAVED[p.name] = (f, jp.dumps(f))  # every corpus program's Function saves
  return _SAVED[p.name]


def _saved(p):
  got = _try_save(p)
  if isinstance(got, str):
    pytest.skip(got)
  return got


CORPUS = [p for p in corpus.PROGRAMS if not p.symbolic]


@pytest.mark.parametrize("p", CORPUS, ids=lambda p: p.name)
def test_corpus_function_roundtrip(p):
  f, data = _saved(p)
  g = jp.loads(data)
  assert isinstance(g, jp.Function)
  assert jp.dumps(g) == data
  assert g.in_avals == f.in_avals and g.out_avals == f.out_avals
  call = _types(jax.eval_shape(g, *p.args))
  assert call == _types(jax.tree.unflatten(f.out_tree, f.out_avals))
  q = corpus.Program(p.name, g, p.args, p.grad_argnums, p.vmap)
  if p.grad_argnums is not None:
    assert _types(jax.eval_shape(corpus.grad_fn(q), *p.args)) == _grad_types(p)
  if p.vmap:
    batched = jax.eval_shape(corpus.vmap_fn(q), *corpus.vmap_args(q))
    assert _types(batched)[0] == call[0]
    assert _types(batched)[1] == [((2, *s), d) for s, d in call[1]]


def _close(a, b):
  la, ta = jax.tree.flatten(a)
  lb, tb = jax.tree.flatten(b)
  assert str(ta).replace("namedtuple", "") == str(tb).replace("namedtuple", "")
  for x, y in zip(la, lb):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    assert x.shape == y.shape and x.dtype == y.dtype
    if x.dtype != jax.dtypes.float0:
      np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", RUN)
def test_corpus_function_runs(name):
  p = corpus.get(name)
  f, data = _saved(p)
  g = jp.loads(data)
  mine = corpus.Program(p.name, g, p.args, p.grad_argnums, p.vmap)
  _close(g(*p.args), jax.jit(p.fn)(*p.args))
  if p.grad_argnums is not None:
    _close(corpus.grad_fn(mine)(*p.args), jax.jit(corpus.grad_fn(p))(*p.args))
  if p.vmap:
    _close(corpus.vmap_fn(mine)(*corpus.vmap_args(p)),
           jax.jit(corpus.vmap_fn(p))(*corpus.vmap_args(p)))


FRESH_CORPUS = textwrap.dedent("""
    import json, pathlib, sys
    import jax
    import jaxpr_proto as jp
    # (Pallas kernels: loading imports Pallas and its backends, from the fixed
    # table of JAX's optional modules.)
    res = {}
    # The corpus's host callbacks, by name: types are all this process asks of them.
    bound = {n: print for n in ("corpus.record", "corpus.host_sin", "corpus.host_affine")}
    for path in sorted(pathlib.Path(sys.argv[1]).glob("*.jaxpb")):
      try:
        f = jp.load(path, callbacks=bound)
      except jp.DecodeError as e:
        res[path.stem] = ["DecodeError", str(e)]
        continue
      args, kwargs = jax.tree.unflatten(
          f.in_tree, [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                      for a in f.in_avals])
      leaves, t = jax.tree.flatten(jax.eval_shape(lambda a, k: f(*a, **k), args, kwargs))
      res[path.stem] = [str(t).replace("namedtuple", ""),
                        [(tuple(getattr(a, "shape", ())),
                          str(getattr(a, "dtype", type(a).__name__))) for a in leaves]]
    print(json.dumps({"res": res, "tests_imported": "tests" in sys.modules}))
""")


def test_corpus_fresh_process(tmp_path):
  expected = {}
  for p in CORPUS:
    got = _try_save(p)
    if not isinstance(got, str):
      f, data = got
      (tmp_path / f"{p.name}.jaxpb").write_bytes(data)
      expected[p.name] = json.loads(json.dumps(
          _types(jax.tree.unflatten(f.out_tree, f.out_avals))))
  assert len(expected) > len(CORPUS) // 2
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  res = subprocess.run([sys.executable, "-c", FRESH_CORPUS, str(tmp_path)],
                       capture_output=True, text=True, timeout=240, env=env,
                       cwd=tmp_path)
  assert res.returncode == 0, res.stderr[-3000:]
  out = json.loads(res.stdout.strip().splitlines()[-1])
  assert not out["tests_imported"]
  got = out["res"]
  assert set(got) == set(expected)
  for name, want in expected.items():
    if got[name][0] == "DecodeError":
      # Only the corpus's own pytree classes are unknown to a fresh process.
      assert "tests.corpus::" in got[name][1], (name, got[name])
    else:
      assert got[name] == want, name


# --- the README's example --------------------------------------------------------------------

def _readme_block(tag):
  text = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "README.md")).read()
  start = text.index(f"<!-- readme-example: {tag} -->")
  body = text[text.index("```python\n", start) + len("```python\n"):]
  return body[:body.index("```")]


def test_readme_example(tmp_path):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  save = _readme_block("save")
  load = _readme_block("load") + textwrap.dedent("""
      import sys
      assert y.shape == (8,)
      assert jax.tree.structure(grads) == jax.tree.structure(params)
      assert all(bool(jnp.isfinite(g).all()) for g in jax.tree.leaves(grads))
      print("LOADED", float(y.sum()))
  """)
  save += "\nprint('SAVED', float(f(params, jnp.ones((8, 3))).sum()))\n"
  runs = []
  for code in (save, load):
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=240, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    runs.append(float(res.stdout.split()[-1]))
  assert runs[0] == runs[1]
