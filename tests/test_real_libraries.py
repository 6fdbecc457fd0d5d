"""Real programs of the JAX libraries people use (flax, optax, equinox,
jax.scipy; numpyro where installed), under every supported JAX: each traced
program round-trips through .jaxpb, prints identically, and its outputs,
gradients and vmap agree bit for bit with the original's.

flax, optax and equinox are test dependencies (pyproject.toml), so these run
in CI under JAX 0.10, 0.11 and 0.12.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg  # noqa: F401 (submodules used below)
import jax.scipy.ndimage  # noqa: F401
import jax.scipy.optimize  # noqa: F401
import jax.scipy.signal  # noqa: F401
import jax.scipy.special  # noqa: F401
import jax.scipy.stats  # noqa: F401
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp

flax = pytest.importorskip("flax")
optax = pytest.importorskip("optax")
eqx = pytest.importorskip("equinox")
import flax.linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

PROGRAMS: dict = {}


def program(fn):
  """Registers fn() -> (function, args, differentiate-by-argnums or None)."""
  PROGRAMS[fn.__name__] = fn
  return fn


def _key(i):
  return jax.random.key(i)


def _x(i, shape):
  return jax.random.normal(jax.random.key(100 + i), shape, jnp.float32)


# --- flax ---------------------------------------------------------------------

class _MLP(nn.Module):
  @nn.compact
  def __call__(self, x):
    x = nn.gelu(nn.Dense(16)(x))
    x = nn.LayerNorm()(x)
    return nn.Dense(3)(x)


@program
def flax_linen_mlp_train_step():
  model = _MLP()
  x, y = _x(0, (8, 5)), jnp.arange(8) % 3
  params = model.init(_key(1), x)
  tx = optax.adamw(1e-3)
  state = tx.init(params)

  def step(params, state, x, y):
    def loss(p):
      logits = model.apply(p, x)
      return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    l, g = jax.value_and_grad(loss)(params)
    upd, state = tx.update(g, state, params)
    return optax.apply_updates(params, upd), state, l
  return step, (params, state, x, y), None


class _Conv(nn.Module):
  @nn.compact
  def __call__(self, x, train: bool = False):
    x = nn.Conv(4, (3, 3))(x)
    x = nn.BatchNorm(use_running_average=not train)(x)
    x = nn.max_pool(nn.relu(x), (2, 2), strides=(2, 2))
    return nn.Dense(2)(x.reshape((x.shape[0], -1)))


@program
def flax_linen_conv_batchnorm():
  model = _Conv()
  x = _x(1, (2, 8, 8, 3))
  variables = model.init(_key(2), x)
  return (lambda v, x: model.apply(v, x)), (variables, x), (0,)


class _Attn(nn.Module):
  @nn.compact
  def __call__(self, x):
    h = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8)(x, x)
    return nn.Dropout(0.1, deterministic=True)(h) + x


@program
def flax_linen_attention():
  model = _Attn()
  x = _x(2, (2, 5, 8))
  params = model.init(_key(3), x)
  return (lambda p, x: model.apply(p, x)), (params, x), (0,)


class _Scan(nn.Module):
  @nn.compact
  def __call__(self, carry, xs):
    cell = nn.scan(nn.GRUCell, variable_broadcast="params", split_rngs={"params": False},
                   in_axes=0, out_axes=0)(features=6)
    return cell(carry, xs)


@program
def flax_linen_scan_gru():
  model = _Scan()
  carry, xs = jnp.zeros((2, 6)), _x(3, (4, 2, 3))
  params = model.init(_key(4), carry, xs)
  return (lambda p, c, xs: model.apply(p, c, xs)), (params, carry, xs), (0,)


@program
def flax_nnx_linear():
  m = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(m)

  def f(state, x):
    return nnx.merge(graphdef, state)(x)
  return f, (state, _x(4, (2, 4))), (0,)


# --- optax --------------------------------------------------------------------

@program
def optax_chain_clip_sgd_momentum():
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1, momentum=0.9, nesterov=True))
  params = {"w": _x(5, (3, 2)), "b": jnp.zeros(2)}
  state = tx.init(params)

  def step(params, state, g):
    upd, state = tx.update(g, state, params)
    return optax.apply_updates(params, upd), state
  return step, (params, state, jax.tree.map(lambda p: p * 3.0, params)), None


@program
def optax_schedule_adam():
  sched = optax.warmup_cosine_decay_schedule(0.0, 1e-2, 10, 100)
  tx = optax.adam(sched)
  params = _x(6, (4,))
  state = tx.init(params)

  def step(params, state, g):
    upd, state = tx.update(g, state, params)
    return optax.apply_updates(params, upd), state
  return step, (params, state, _x(7, (4,))), None


@program
def optax_losses():
  def f(logits, labels, pred, target):
    return (optax.softmax_cross_entropy(logits, labels).sum()
            + optax.huber_loss(pred, target).sum() + optax.l2_loss(pred, target).sum()
            + optax.sigmoid_binary_cross_entropy(pred, jnp.clip(target, 0, 1)).sum())
  logits = _x(8, (4, 3))
  labels = jax.nn.one_hot(jnp.arange(4) % 3, 3)
  return f, (logits, labels, _x(9, (5,)), _x(10, (5,))), (0, 2)


@program
def optax_lbfgs_step():
  tx = optax.lbfgs()
  params = _x(11, (3,))
  fun = lambda p: jnp.sum((p - 1.0) ** 2)
  state = tx.init(params)

  def step(params, state):
    value, grad = optax.value_and_grad_from_state(fun)(params, state=state)
    upd, state = tx.update(grad, state, params, value=value, grad=grad, value_fn=fun)
    return optax.apply_updates(params, upd), state
  return step, (params, state), None


# --- equinox ------------------------------------------------------------------

@program
def equinox_mlp_filter_grad():
  model = eqx.nn.MLP(4, 2, 8, 2, key=_key(5))
  params, static = eqx.partition(model, eqx.is_array)

  def loss(params, x, y):
    m = eqx.combine(params, static)
    return jnp.mean((jax.vmap(m)(x) - y) ** 2)
  return jax.grad(loss), (params, _x(12, (6, 4)), _x(13, (6, 2))), None


@program
def equinox_conv_and_norm():
  conv = eqx.nn.Conv2d(3, 4, 3, key=_key(6))
  norm = eqx.nn.LayerNorm((4, 6, 6))
  params, static = eqx.partition((conv, norm), eqx.is_array)

  def f(params, x):
    c, n = eqx.combine(params, static)
    return jax.nn.relu(n(c(x)))
  return f, (params, _x(14, (3, 8, 8))), (0,)


@program
def equinox_attention():
  attn = eqx.nn.MultiheadAttention(2, 8, key=_key(7))
  params, static = eqx.partition(attn, eqx.is_array)

  def f(params, x):
    return eqx.combine(params, static)(x, x, x)
  return f, (params, _x(15, (5, 8))), (0,)


@program
def equinox_gru_scan():
  cell = eqx.nn.GRUCell(3, 5, key=_key(8))
  params, static = eqx.partition(cell, eqx.is_array)

  def f(params, xs):
    c = eqx.combine(params, static)
    h, hs = jax.lax.scan(lambda h, x: (c(x, h), h), jnp.zeros(5), xs)
    return h, hs
  return f, (params, _x(16, (7, 3))), (0,)


# --- jax.scipy ----------------------------------------------------------------

@program
def scipy_linalg_solvers():
  a = _x(17, (4, 4))
  spd = a @ a.T + 4 * jnp.eye(4)
  b = _x(18, (4, 2))

  def f(spd, b):
    c = jax.scipy.linalg.cho_factor(spd)
    return (jax.scipy.linalg.cho_solve(c, b), jax.scipy.linalg.solve(spd, b, assume_a="pos"),
            jax.scipy.linalg.expm(spd * 0.1), jax.scipy.linalg.lu_factor(spd)[0])
  return f, (spd, b), (0, 1)


@program
def scipy_special_and_stats():
  def f(x, y):
    return (jax.scipy.special.logsumexp(x), jax.scipy.special.gammaln(jnp.abs(x) + 1),
            jax.scipy.special.erf(x), jax.scipy.special.xlogy(jnp.abs(x), jnp.abs(y) + 1),
            jax.scipy.stats.norm.logpdf(x, 0.5, 2.0).sum(),
            jax.scipy.stats.t.logpdf(y, 3.0).sum(), jax.scipy.special.betainc(2.0, 3.0, jax.nn.sigmoid(x)))
  return f, (_x(19, (6,)), _x(20, (6,))), (0, 1)


@program
def scipy_optimize_minimize():
  def f(x0, a):
    fun = lambda x: jnp.sum(a * (x - 2.0) ** 2) + jnp.sum(x ** 4) * 0.01
    return jax.scipy.optimize.minimize(fun, x0, method="BFGS").x
  return f, (jnp.zeros(3), jnp.array([1.0, 2.0, 3.0])), None


@program
def scipy_signal_and_ndimage():
  def f(x, k):
    return (jax.scipy.signal.convolve(x, k, mode="same"),
            jax.scipy.ndimage.map_coordinates(x, [jnp.linspace(0, 7, 5)], order=1))
  return f, (_x(21, (8,)), _x(22, (3,))), (0, 1)


# --- numpyro (where installed) --------------------------------------------------

@program
def numpyro_log_density():
  numpyro = pytest.importorskip("numpyro")
  dist = pytest.importorskip("numpyro.distributions")
  from numpyro.infer.util import log_density

  def model(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([3]).to_event(1))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(x @ w, s), obs=y)

  def f(w, s, x, y):
    return log_density(model, (x,), {"y": y}, {"w": w, "s": s})[0]
  return f, (_x(23, (3,)), jnp.float32(0.7), _x(24, (5, 3)), _x(25, (5,))), (0, 1)


# --- the checks -----------------------------------------------------------------

def _bits(tree):
  return [(np.asarray(x).dtype, np.asarray(x).shape, np.asarray(x).tobytes())
          for x in jax.tree.leaves(tree)]


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def traced(request):
  fn, args, argnums = PROGRAMS[request.param]()
  flat, in_tree = jax.tree.flatten(args)
  cj = jax.make_jaxpr(fn)(*args)
  cj2 = jp.loads(jp.dumps(cj))
  return request.param, fn, args, argnums, cj, cj2


def test_prints_identically_and_reencodes(traced):
  name, fn, args, argnums, cj, cj2 = traced
  assert str(cj2) == str(cj)
  data = jp.dumps(cj)
  assert jp.dumps(cj2) == data
  assert jp.check(data).ok


def test_outputs_identical(traced):
  name, fn, args, argnums, cj, cj2 = traced
  flat = jax.tree.leaves(args)
  want = jax.jit(jaxpr_as_fun(cj))(*flat)
  got = jax.jit(jaxpr_as_fun(cj2))(*flat)
  assert _bits(got) == _bits(want)


def test_gradients_identical(traced):
  name, fn, args, argnums, cj, cj2 = traced
  if argnums is None:
    pytest.skip("a training step: its gradient is inside")
  flat = jax.tree.leaves(args)
  n_before = [len(jax.tree.leaves(a)) for a in args]
  wrt = [i for k in argnums for i in range(sum(n_before[:k]), sum(n_before[:k + 1]))
         if jnp.issubdtype(jnp.asarray(flat[i]).dtype, jnp.inexact)]

  def grad_of(c):
    def scalar(*xs):
      return sum(jnp.sum(jnp.real(o)) for o in jaxpr_as_fun(c)(*xs)
                 if jnp.issubdtype(o.dtype, jnp.inexact))
    return jax.jit(jax.grad(scalar, argnums=wrt))(*flat)
  assert _bits(grad_of(cj2)) == _bits(grad_of(cj))


def test_vmap_identical(traced):
  name, fn, args, argnums, cj, cj2 = traced
  flat = jax.tree.leaves(args)
  batched = [jnp.stack([x, x]) for x in flat]

  def run(c):
    return jax.jit(jax.vmap(jaxpr_as_fun(c)))(*batched)
  assert _bits(run(cj2)) == _bits(run(cj))
