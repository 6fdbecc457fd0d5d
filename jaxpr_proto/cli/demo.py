"""The built-in example of `jaxpr-proto demo`: a small MLP training step.

`train_step(params, xs, ys)` does one SGD step of a 3-layer MLP (relu) with
gradients accumulated over microbatches by a `lax.scan`, then evaluates the
loss of the new parameters. The MLP passes its hidden activations through
`clip_gradient`, a user `jax.custom_vjp` that is the identity going forward
and clips the cotangent going backward (gradient clipping). The evaluation
after the step is not differentiated inside the program, so its
`custom_vjp_call` eqn survives into the jaxpr, and differentiating the
program (`grad_fn`) goes through the rule that was stored in the file.

`run(...)` traces it, writes a temporary `.jaxpb`, loads it back, runs both
programs and their gradients, and reports whether they agree bitwise.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import TextIO

import numpy as np

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
from jax import lax

from jaxpr_proto.cli.eqn_counts import eqn_counts
from jaxpr_proto.cli.printing import ms
from jaxpr_proto.wire import files

CLIP = 0.5          # bound on each element of the backward cotangent
LEARNING_RATE = 0.1
SIZES = (3, 16, 1)
N_MICRO, MICRO_BATCH = 4, 8


@jax.custom_vjp
def clip_gradient(x):
  """The identity; its cotangent is clipped to [-CLIP, CLIP]."""
  return x


def _clip_fwd(x):
  return x, None


def _clip_bwd(_, g):
  return (jnp.clip(g, -CLIP, CLIP),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def mlp(params, x):
  *hidden, (w_out, b_out) = params
  for w, b in hidden:
    x = clip_gradient(jax.nn.relu(x @ w + b))
  return x @ w_out + b_out


def loss(params, x, y):
  return jnp.mean((mlp(params, x) - y) ** 2)


def train_step(params, xs, ys):
  """One SGD step over `N_MICRO` microbatches; returns (new params, loss after)."""

  def accumulate(grad_sum, batch):
    x, y = batch
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(jnp.add, grad_sum, grads), value

  zeros = jax.tree.map(jnp.zeros_like, params)
  grad_sum, losses = lax.scan(accumulate, zeros, (xs, ys))
  n = xs.shape[0]
  new_params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g / n, params, grad_sum)
  # Not differentiated here: its custom_vjp_call stays in the jaxpr.
  loss_after = loss(new_params, xs.reshape(-1, xs.shape[-1]), ys.reshape(-1, ys.shape[-1]))
  return new_params, jnp.mean(losses), loss_after


def example_args(seed: int = 0):
  """Deterministic parameters and data: (params, xs, ys)."""
  rng = np.random.default_rng(seed)
  params = []
  for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
    w = rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_in, n_out)).astype(np.float32)
    params.append((w, np.zeros((n_out,), np.float32)))
  xs = rng.normal(size=(N_MICRO, MICRO_BATCH, SIZES[0])).astype(np.float32)
  ys = np.sin(xs.sum(-1, keepdims=True)).astype(np.float32)
  return params, xs, ys


def trace():
  """-> (closed_jaxpr, flat example args)."""
  args = example_args()
  return jax.make_jaxpr(train_step)(*args), jax.tree.leaves(args)


def grad_fn(closed_jaxpr):
  """d(loss after the step)/d(all inputs), through jaxpr_as_fun."""
  f = jex_core.jaxpr_as_fun(closed_jaxpr)
  n_in = len(closed_jaxpr.in_avals)
  return jax.grad(lambda *a: f(*a)[-1], argnums=tuple(range(n_in)))


def count_eqns(jaxpr) -> tuple[int, int]:
  """(top-level eqns, eqns including those of sub-jaxprs, each occurrence counted)."""
  top, total, _ = eqn_counts(jaxpr)
  return top, total


def bitwise_equal(a, b) -> bool:
  a, b = np.asarray(a), np.asarray(b)
  return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run(out: TextIO, *, keep: str | None = None) -> bool:
  """Runs the demo, printing to `out`; True when everything agrees bitwise."""
  import jaxpr_proto as jp

  print("jaxpr-proto demo: one SGD step of an MLP (relu), gradients accumulated "
        f"by lax.scan over {N_MICRO} microbatches,", file=out)
  print(f"custom_vjp gradient clipping at ±{CLIP}, loss of the new parameters.", file=out)

  t0 = time.perf_counter()
  cj, args = trace()
  t_trace = time.perf_counter() - t0
  top, total = count_eqns(cj)
  print(f"  make_jaxpr  {ms(t_trace):>10}   {top} eqns ({total} including sub-jaxprs)", file=out)

  t0 = time.perf_counter()
  data = jp.dumps(cj)
  t_encode = time.perf_counter() - t0
  small = len(jp.dumps(cj, debug_info=False))
  with tempfile.TemporaryDirectory() as tmp:
    path = keep or os.path.join(tmp, "train_step.jaxpb")
    files.write_atomic(path, data)
    t0 = time.perf_counter()
    with open(path, "rb") as f:
      cj2 = jp.loads(f.read())
    t_decode = time.perf_counter() - t0
    size = os.path.getsize(path)
  print(f"  encode      {ms(t_encode):>10}   {size:,} bytes "
        f"({small:,} without debug info)", file=out)
  print(f"  decode      {ms(t_decode):>10}", file=out)
  if keep:
    print(f"  wrote {keep}", file=out)

  same_text = str(cj) == str(cj2)
  jex_core.check_jaxpr(cj2.jaxpr)

  ok = True
  results = []
  for label, make in (("outputs", lambda c: jax.jit(jex_core.jaxpr_as_fun(c))),
                      ("gradients", lambda c: jax.jit(grad_fn(c)))):
    t0 = time.perf_counter()
    ref = jax.block_until_ready(make(cj)(*args))
    t_a = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = jax.block_until_ready(make(cj2)(*args))
    t_b = time.perf_counter() - t0
    a, b = jax.tree.leaves(ref), jax.tree.leaves(got)
    agree = len(a) == len(b) and all(map(bitwise_equal, a, b))
    ok &= agree
    results.append((label, agree, len(a), t_a, t_b))
  print(f"  printed jaxprs {'identical' if same_text else 'DIFFER'}", file=out)
  ok &= same_text
  for label, agree, n, t_a, t_b in results:
    verdict = "agree bitwise" if agree else "DISAGREE"
    print(f"  {label:<10} {verdict} ({n} arrays; jit+run original {ms(t_a)}, "
          f"loaded {ms(t_b)})", file=out)
  print("OK" if ok else "FAILED", file=out)
  return ok
