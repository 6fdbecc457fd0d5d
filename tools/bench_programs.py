"""The programs of the benchmarks, made with JAX alone: bench_fresh times
`make_jaxpr` on them in a process that has not imported jaxpr_proto (whose
import-time warm-up runs some of JAX's code too)."""
import jax
import jax.numpy as jnp


def mlp_sgd_step(layers: int = 8, width: int = 512, batch: int = 32, lr: float = 0.01):
  """The issue's program: one SGD step of an 8-layer relu MLP of width 512."""
  k = jax.random.split(jax.random.key(0), layers + 1)
  params = [(jax.random.normal(k[i], (width, width)) * 0.04, jnp.zeros(width))
            for i in range(layers)]
  x, y = jax.random.normal(k[layers], (batch, width)), jnp.zeros((batch, width))

  def loss(p, x, y):
    for w, b in p[:-1]:
      x = jax.nn.relu(x @ w + b)
    w, b = p[-1]
    return jnp.mean((x @ w + b - y) ** 2)

  def step(p, x, y):
    return jax.tree.map(lambda a, g: a - lr * g, p, jax.grad(loss)(p, x, y))
  return f"mlp_sgd_step_{layers}x{width}", step, (params, x, y)


def unrolled_fn(layers: int, lanes: int = 8, offset: float = 0.001):
  """The function and arguments of `unrolled`'s program."""
  import numpy as np
  ws = [np.full((16, 16), 0.01 * (k + 1), np.float32) for k in range(4)]

  def f(xs, ws):
    out = []
    for x in xs:
      for k in range(layers):
        x = jnp.tanh(x @ ws[k % 4] + offset * k)
      out.append(x.sum())
    return out
  return f, ([np.ones((4, 16), np.float32)] * lanes, ws)
