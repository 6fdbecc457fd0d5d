"""What JAX 0.12 changed in its primitives: the changes that the
upgraders apply to files of JAX 0.12 and later read by an older JAX, and
the other way round (see compat/upgrade.py)."""
from __future__ import annotations

import jax

from jaxpr_proto.compat.change import Change

SINCE = (0, 12, 0)


def _polynomial(x, *coeffs, unroll=None):
  """Horner's rule, as JAX 0.12 lowers polynomial (a scan past `unroll` terms)."""
  import jax.numpy as jnp
  threshold = 8 if unroll is None else unroll
  if len(coeffs) <= threshold:
    acc = coeffs[-1]
    for c in reversed(coeffs[:-1]):
      acc = jnp.add(jnp.multiply(acc, x), c)
    return acc
  shape = jnp.broadcast_shapes(x.shape, *(c.shape for c in coeffs))
  cshape = jnp.broadcast_shapes(*(c.shape for c in coeffs))
  stacked = jnp.stack([jnp.broadcast_to(c, cshape) for c in reversed(coeffs)])
  y, _ = jax.lax.scan(lambda acc, c: (jnp.add(jnp.multiply(acc, x), c), None),
                      jnp.zeros(shape, x.dtype), stacked, unroll=threshold)
  return y


CHANGES: list[Change] = [
    Change(SINCE, "erfc", "add_param", "accuracy", default=None),
    # Pallas TPU kernels' primitives.
    Change(SINCE, "bitcast", "add_param", "dim", default=-2,
           note="JAX 0.11's bitcast scaled the second-minor dimension"),
    Change(SINCE, "dma_wait", "remove_param", "insert_dummy_device", default=False),


]

# Primitives new in this minor that an older JAX can compute (see 0.11's).
EXPANSIONS = {"polynomial": _polynomial}
