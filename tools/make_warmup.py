"""Writes jaxpr_proto/warmup.jaxpb, the program `jaxpr_proto.warmup` loads as
the package is imported: one SGD step of a 2-layer relu MLP of width 4 (jit,
a custom_jvp rule, dot_general, broadcasts, reductions: what most traced
training code holds), with its source frames. Written with the oldest JAX
the project supports, so that newer ones load it through their upgrades.

    .venv/bin/python tools/make_warmup.py
"""
import os
import sys

import jax
import jax.numpy as jnp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import jaxpr_proto as jp  # noqa: E402

PATH = os.path.join(ROOT, "jaxpr_proto", "warmup.jaxpb")


def step(params, x, y):
  def loss(p):
    h = x
    for w, b in p[:-1]:
      h = jax.nn.relu(h @ w + b)
    w, b = p[-1]
    return jnp.mean((h @ w + b - y) ** 2)
  return jax.tree.map(lambda a, g: a - 0.5 * g, params, jax.grad(loss)(params))


def program():
  params = [(jnp.ones((4, 4)), jnp.zeros(4)) for _ in range(2)]
  return jax.make_jaxpr(jax.jit(step))(params, jnp.ones((2, 4)), jnp.zeros((2, 4)))


def main():
  data = jp.dumps(program())
  with open(PATH, "wb") as f:
    f.write(data)
  print(f"{PATH}: {len(data)} bytes, JAX {jax.__version__}")


if __name__ == "__main__":
  main()
