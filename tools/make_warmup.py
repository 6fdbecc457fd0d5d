"""Writes jaxpr_proto/warmup.jaxpb, the program `jaxpr_proto.warmup` loads as
the package is imported: the benchmarks' MLP SGD step (bench_programs) cut
to 2 layers of width 4, under jit (a custom_jvp rule, dot_general,
broadcasts, reductions: what most traced training code holds), with its
source frames. Written with the oldest JAX the project supports, so that
newer ones load it through their upgrades.

    .venv/bin/python tools/make_warmup.py
"""
import os
import sys

import jax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import jaxpr_proto as jp  # noqa: E402
from bench_programs import mlp_sgd_step  # noqa: E402

PATH = os.path.join(ROOT, "jaxpr_proto", "warmup.jaxpb")


def function():
  """(the jitted step, its arguments)."""
  _, step, args = mlp_sgd_step(layers=2, width=4, batch=2, lr=0.5)
  return jax.jit(step), args


def main():
  f, args = function()
  data = jp.dumps(jax.make_jaxpr(f)(*args))
  with open(PATH, "wb") as out:
    out.write(data)
  print(f"{PATH}: {len(data)} bytes, JAX {jax.__version__}")


if __name__ == "__main__":
  main()
