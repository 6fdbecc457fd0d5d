"""Jaxprs and Functions shipped to the worker processes of a real
dask.distributed LocalCluster through plain `client.submit` (Dask's own
pickling), run there under jit, and compared with a local run."""
import os
import pickle
import subprocess
import sys

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp

distributed = pytest.importorskip("distributed")

# One cluster for the module, under `--dist loadgroup` (pytest-xdist).
pytestmark = pytest.mark.xdist_group("dask")

# The workers import this module's helpers by name (Dask pickles them by
# reference; the worker processes share this process's sys.path). The models'
# jaxprs and Functions travel as .jaxpb bytes.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


# --- models ---------------------------------------------------------------------

def mlp(params, x):
  for w, b in params[:-1]:
    x = jax.nn.relu(x @ w + b)
  w, b = params[-1]
  return x @ w + b


@jax.custom_vjp
def soft_clip(x):
  return jnp.tanh(x) * 3


def _sc_fwd(x):
  return soft_clip(x), x


def _sc_bwd(x, g):
  return (g * 3 * (1 - jnp.tanh(x) ** 2) * 0.5,)  # a deliberately different rule


soft_clip.defvjp(_sc_fwd, _sc_bwd)


def custom_vjp_loss(w, x):
  return jnp.sum(soft_clip(x @ w) ** 2)


def grad_of_custom_vjp(w, x):
  return jax.grad(custom_vjp_loss)(w, x)


def rnn(params, xs):
  def step(h, x):
    h = jnp.tanh(h @ params["wh"] + x @ params["wx"])
    return h, h.sum()
  return jax.lax.scan(step, jnp.zeros(params["wh"].shape[0]), xs)


def newton_sqrt(a):
  def cond(s):
    x, i = s
    return (jnp.abs(x * x - a).max() > 1e-5) & (i < 50)

  def body(s):
    x, i = s
    return (0.5 * (x + a / x), i + 1)
  return jax.lax.while_loop(cond, body, (a, 0))


def dropout_noise(key, x):
  key, sub = jax.random.split(key)
  keep = jax.random.bernoulli(sub, 0.8, x.shape)
  return jnp.where(keep, x / 0.8, 0.0) + 0.01 * jax.random.normal(key, x.shape), key


def _r(seed, *shape):
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


MODELS = {
    "relu_mlp": (mlp, ([(_r(0, 4, 8), _r(1, 8)), (_r(2, 8, 8), _r(3, 8)), (_r(4, 8, 2), _r(5, 2))],
                       _r(6, 5, 4))),
    "custom_vjp": (grad_of_custom_vjp, (_r(7, 3, 3), _r(8, 4, 3))),
    "scan": (rnn, ({"wh": _r(9, 6, 6) * 0.3, "wx": _r(10, 3, 6)}, _r(11, 7, 3))),
    "while": (newton_sqrt, (jnp.abs(_r(12, 5)) + 0.5,)),
    "prng_keys": (dropout_noise, (jax.random.key(3), _r(13, 4, 5))),
}


def _close(a, b):
  la, ta = jax.tree.flatten(a)
  lb, tb = jax.tree.flatten(b)
  assert str(ta) == str(tb)
  for x, y in zip(la, lb):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)


# --- worker-side helpers (shipped by value) ------------------------------------------

def run_jaxpr(cj, *args):
  return jax.jit(jax.extend.core.jaxpr_as_fun(cj))(*args)


def call(f, *args):
  return f(*args)


def worker_info():
  return os.getpid()


def install_compile_counter(dask_worker):
  import jax.monitoring
  counts = dask_worker._jp_compiles = []
  jax.monitoring.register_event_duration_secs_listener(
      lambda event, duration, **kw: counts.append(kw.get("fun_name"))
      if event == BACKEND_COMPILE else None)


def compile_count(dask_worker):
  return len(dask_worker._jp_compiles)


# --- the cluster -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
  from distributed import Client, LocalCluster
  cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=":0", silence_logs=40)
  c = Client(cluster)
  try:
    yield c
  finally:
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def workers(client):
  ws = sorted(client.scheduler_info()["workers"])
  assert len(ws) == 2
  return ws


def test_workers_are_other_processes(client, workers):
  pids = [client.submit(worker_info, workers=[w], pure=False).result() for w in workers]
  assert len(set(pids) | {os.getpid()}) == 3


@pytest.mark.parametrize("name", list(MODELS))
def test_ship_and_run(client, workers, name):
  fn, args = MODELS[name]
  want = jax.jit(fn)(*args)
  f = jp.trace(fn)(*args)
  cj = jax.make_jaxpr(fn)(*args)
  flat = jax.tree.leaves(args)
  out_tree = jax.tree.structure(want)
  for w in workers:
    # A Function as the task itself, and as an argument.
    _close(client.submit(f, *args, workers=[w], pure=False).result(), want)
    _close(client.submit(call, f, *args, workers=[w], pure=False).result(), want)
    # A ClosedJaxpr as data, run jitted there.
    got = client.submit(run_jaxpr, cj, *flat, workers=[w], pure=False).result()
    _close(jax.tree.unflatten(out_tree, got), want)
    # jax.jit(jaxpr_as_fun(cj)) as the task.
    jitted = jax.jit(jax.extend.core.jaxpr_as_fun(cj))
    got = client.submit(jitted, *flat, workers=[w], pure=False).result()
    _close(jax.tree.unflatten(out_tree, got), want)


def test_grad_on_worker(client, workers):
  fn, args = MODELS["relu_mlp"]
  f = jp.trace(fn)(*args)

  def loss_grad(f, params, x):
    return jax.jit(jax.grad(lambda p: jnp.sum(f(p, x) ** 2)))(params)

  want = jax.grad(lambda p: jnp.sum(fn(p, args[1]) ** 2))(args[0])
  _close(client.submit(loss_grad, f, *args, workers=[workers[1]]).result(), want)


def test_compiles_once_per_worker(client, workers):
  fn, args = MODELS["scan"]
  f = jp.trace(fn)(*args)
  jitted = jax.jit(jax.extend.core.jaxpr_as_fun(jax.make_jaxpr(fn)(*args)))
  flat = jax.tree.leaves(args)
  w = workers[0]
  client.run(install_compile_counter, workers=[w])
  for task in (lambda: client.submit(f, *args, workers=[w], pure=False),
               lambda: client.submit(jitted, *flat, workers=[w], pure=False)):
    task().result()  # the first call compiles
    before = client.run(compile_count, workers=[w])[w]
    for fut in [task() for _ in range(4)]:
      fut.result()
    after = client.run(compile_count, workers=[w])[w]
    assert after == before, f"{after - before} more compiles for the same function"
  # The counter counts: a jaxpr that each task jits anew compiles each time.
  cj = jax.make_jaxpr(fn)(*args)
  client.submit(run_jaxpr, cj, *flat, workers=[w], pure=False).result()
  before = client.run(compile_count, workers=[w])[w]
  client.submit(run_jaxpr, cj, *flat, workers=[w], pure=False).result()
  assert client.run(compile_count, workers=[w])[w] > before


def test_stages_example(client):
  """examples/dask_stages.py, run as a script against this cluster."""
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  res = subprocess.run(
      [sys.executable, os.path.join(ROOT, "examples", "dask_stages.py"),
       "--scheduler", client.scheduler.address, "--stages", "3", "--depth", "6",
       "--width", "16", "--batch", "8"],
      capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
  assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
  assert "OK" in res.stdout.split()
  assert "on 2 worker(s)" in res.stdout


def test_big_constant_travels_out_of_band(client, workers):
  """A program closing over a 16 MiB constant: Dask carries it as a pickle
  protocol 5 buffer beside the message, and the worker runs it bit for bit."""
  w = np.random.default_rng(1).standard_normal((4, 1 << 20)).astype(np.float32)
  fn = lambda x: jnp.tanh(x @ jnp.asarray(w)).sum()
  x = jnp.linspace(-1, 1, 4, dtype=jnp.float32)
  cj = jax.make_jaxpr(fn)(x)
  buffers = []
  pickle.dumps(cj, protocol=5, buffer_callback=buffers.append)
  assert sum(memoryview(b).nbytes for b in buffers) == w.nbytes  # out of band
  want = np.asarray(run_jaxpr(cj, x)[0])
  got = client.submit(run_jaxpr, cj, x, workers=[workers[0]], pure=False).result()
  assert np.asarray(got[0]).tobytes() == want.tobytes()


def test_lambda_callback_ships(client, workers):
  """A program whose pure_callback is a lambda (registered nowhere): the
  pickle stream is code anyway, so the callback travels as code, and the
  worker runs the program."""
  offset = 0.5
  fn = lambda x: jax.pure_callback(lambda v: np.asarray(v) * 2 + offset,
                                   jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1
  x = jnp.arange(3, dtype=jnp.float32)
  f = jp.trace(fn)(x)
  got = client.submit(f, x, workers=[workers[1]], pure=False).result()
  np.testing.assert_array_equal(np.asarray(got), np.arange(3) * 2 + 1.5)
