"""Run a big JAX program as a pipeline of stages on Dask workers.

1. Trace a large program (a deep residual MLP with a scan, a custom_vjp and
   typed PRNG keys) to a jaxpr.
2. Split it into stages of consecutive eqns: `jaxpr_proto.stages.split`. Each
   stage is a sub-jaxpr whose inputs are the values live at its start.
3. Ship each stage to a worker: a stage is a `jaxpr_proto.Function`, which
   Dask pickles as its `.jaxpb` encoding (nothing else: the workers never see
   this file's code).
4. Run the pipeline (Dask moves the live values between workers) and compare
   its outputs with the original program's.

    pip install 'jaxpr-proto[dask]'
    python examples/dask_stages.py                   # starts a LocalCluster
    python examples/dask_stages.py --scheduler tcp://host:8786
"""
from __future__ import annotations

import argparse
import sys

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

import jaxpr_proto as jp


@jax.custom_vjp
def clipped_relu(x):
  return jnp.clip(x, 0.0, 6.0)


def _fwd(x):
  return clipped_relu(x), x


def _bwd(x, g):
  return (g * ((x > 0) & (x < 6)),)


clipped_relu.defvjp(_fwd, _bwd)


def init(key, depth: int, width: int):
  keys = jax.random.split(key, depth + 1)
  layers = [{"w": jax.random.normal(k, (width, width)) / np.sqrt(width),
             "b": jnp.zeros(width)} for k in keys[:-1]]
  return {"layers": layers, "out": jax.random.normal(keys[-1], (width, 1))}


def program(params, x, key):
  """A deep residual MLP with dropout (typed PRNG keys), a scan and a custom_vjp."""
  h = x
  for i, layer in enumerate(params["layers"]):
    key, sub = jax.random.split(key)
    keep = jax.random.bernoulli(sub, 0.9, h.shape)
    z = jax.nn.relu(h @ layer["w"] + layer["b"]) if i % 2 else clipped_relu(h @ layer["w"])
    h = h + jnp.where(keep, z / 0.9, 0.0)

  def step(carry, row):  # a running mean over the batch
    return carry + row, carry

  total, prefix = jax.lax.scan(step, jnp.zeros(h.shape[1:]), h)
  logits = (h + prefix / h.shape[0]) @ params["out"]
  return jnp.mean(jax.nn.softplus(logits)), total


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--scheduler", help="address of a running Dask scheduler")
  ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
  ap.add_argument("--stages", type=int, default=4)
  ap.add_argument("--depth", type=int, default=12)
  ap.add_argument("--width", type=int, default=64)
  ap.add_argument("--batch", type=int, default=32)
  args = ap.parse_args(argv)

  from dask.distributed import Client, LocalCluster

  # 1. Trace the program.
  key = jax.random.key(0)
  params = init(jax.random.key(1), args.depth, args.width)
  x = jax.random.normal(jax.random.key(2), (args.batch, args.width))
  closed = jax.make_jaxpr(program)(params, x, key)
  flat_args = jax.tree.leaves((params, x, key))
  print(f"traced: {len(closed.jaxpr.eqns)} eqns, {len(flat_args)} inputs")

  # 2. Split it into stages.
  staged = jp.stages.split(closed, num_stages=args.stages)
  for i, s in enumerate(staged.stages):
    print(f"stage {i}: eqns {s.eqns.start}..{s.eqns.stop - 1}, "
          f"{len(s.inputs)} live inputs, {len(s.outputs)} outputs, "
          f"{len(jp.dumps(s.closed_jaxpr))} bytes")

  # 3 + 4. Ship the stages to the workers and run the pipeline.
  cluster = None
  if args.scheduler:
    client = Client(args.scheduler)
  else:
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                           processes=True, dashboard_address=":0")
    client = Client(cluster)
  try:
    workers = sorted(client.scheduler_info()["workers"])
    used = []

    def submit(fn, *a):
      # Stages round-robin over the workers; the small getitem tasks that
      # pick a stage's outputs run where the stage ran.
      if isinstance(fn, jp.Function):
        used.append(workers[len(used) % len(workers)])
      return client.submit(fn, *a, workers=[used[-1]], allow_other_workers=False,
                           pure=False)

    futures = staged.run(*client.scatter(flat_args), submit=submit)
    got = client.gather(futures)
  finally:
    client.close()
    if cluster is not None:
      cluster.close()

  want = jax.jit(jax.extend.core.jaxpr_as_fun(closed))(*flat_args)
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  ref = program(params, x, key)
  np.testing.assert_allclose(np.asarray(got[0]), np.asarray(ref[0]), rtol=1e-5, atol=1e-5)
  print(f"ran {len(staged.stages)} stages on {len(set(used))} worker(s); outputs match "
        f"the original program: loss={float(got[0]):.6f}")
  print("OK")
  return 0


if __name__ == "__main__":
  sys.exit(main())
