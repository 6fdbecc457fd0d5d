"""Benchmark: jaxpr-proto against its peers, side by side in one process.

    python tools/bench.py [--repeat N]

For each program (the demo's MLP training step, and the gradient of a
transformer block) it prints encode/decode time and bytes of .jaxpb, the time
of re-tracing with jax.make_jaxpr (caches cleared, as in a fresh process),
jax.export's serialize/deserialize time and bytes, pickle of the decoded
ClosedJaxpr (which goes through .jaxpb), and the ratios between them.
"""
from __future__ import annotations

import argparse
import pickle
import statistics
import time

import jax
import jax.numpy as jnp

import jaxpr_proto as jp


def _best(fn, repeat):
  times = []
  for _ in range(repeat):
    t = time.perf_counter()
    out = fn()
    times.append(time.perf_counter() - t)
  return min(times), statistics.median(times), out


def transformer_block_grad():
  d, h, t, f = 64, 4, 16, 256
  k = iter(jax.random.split(jax.random.key(0), 8))
  params = {
      "wq": jax.random.normal(next(k), (d, d)) * 0.05,
      "wk": jax.random.normal(next(k), (d, d)) * 0.05,
      "wv": jax.random.normal(next(k), (d, d)) * 0.05,
      "wo": jax.random.normal(next(k), (d, d)) * 0.05,
      "w1": jax.random.normal(next(k), (d, f)) * 0.05,
      "w2": jax.random.normal(next(k), (f, d)) * 0.05,
      "g1": jnp.ones(d), "b1": jnp.zeros(d), "g2": jnp.ones(d), "b2": jnp.zeros(d),
  }
  x = jax.random.normal(next(k), (t, d))

  def layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

  def block(p, x):
    with jax.named_scope("attention"):
      y = layernorm(x, p["g1"], p["b1"])
      q, kk, v = (y @ p[n] for n in ("wq", "wk", "wv"))
      split = lambda a: a.reshape(t, h, d // h).transpose(1, 0, 2)
      q, kk, v = map(split, (q, kk, v))
      att = jax.nn.softmax(q @ kk.transpose(0, 2, 1) / (d // h) ** 0.5, axis=-1)
      o = (att @ v).transpose(1, 0, 2).reshape(t, d) @ p["wo"]
      x = x + o
    with jax.named_scope("mlp"):
      y = layernorm(x, p["g2"], p["b2"])
      x = x + jax.nn.gelu(y @ p["w1"]) @ p["w2"]
    return x

  def loss(p, x):
    return jnp.mean(block(p, x) ** 2)

  return "transformer_block_grad", jax.grad(loss), (params, x)


def demo_program():
  from jaxpr_proto.cli import demo
  return "demo_mlp_train_step", demo.train_step, demo.example_args()


def bench(name, fn, args, repeat):
  def trace():
    jax.clear_caches()
    return jax.make_jaxpr(fn)(*args)

  t_trace, _, cj = _best(trace, repeat)
  t_enc, _, data = _best(lambda: jp.dumps(cj), repeat)
  t_dec, _, cj2 = _best(lambda: jp.loads(data), repeat)
  t_dec_trusted, _, _ = _best(lambda: jp.loads(data, typecheck=False), repeat)
  assert str(cj2) == str(cj)
  t_pdump, _, pdata = _best(lambda: pickle.dumps(cj2), repeat)
  t_pload, _, _ = _best(lambda: pickle.loads(pdata), repeat)

  exported = jax.export.export(jax.jit(fn))(*args)
  t_ser, _, ser = _best(exported.serialize, repeat)
  t_deser, _, _ = _best(lambda: jax.export.deserialize(ser), repeat)
  n_eqns = sum(1 for _ in _all_eqns(cj.jaxpr))

  ms = lambda t: f"{t * 1e3:8.2f} ms"
  print(f"\n== {name}: {len(cj.jaxpr.eqns)} top-level eqns, {n_eqns} in all")
  print(f"  jaxpr-proto   encode {ms(t_enc)}   decode {ms(t_dec)}   {len(data):8d} bytes")
  print(f"  (trusted)                        decode {ms(t_dec_trusted)}   typecheck=False")
  print(f"  make_jaxpr    trace  {ms(t_trace)}   (caches cleared)")
  print(f"  jax.export    serial {ms(t_ser)}   deser  {ms(t_deser)}   {len(ser):8d} bytes")
  print(f"  pickle        dumps  {ms(t_pdump)}   loads  {ms(t_pload)}   {len(pdata):8d} bytes")
  print(f"  ratios: re-trace/decode {t_trace / t_dec:6.1f}x (trusted {t_trace / t_dec_trusted:5.1f}x)   "
        f"export-deser/decode {t_deser / t_dec:6.2f}x   "
        f"export-bytes/jaxpb-bytes {len(ser) / len(data):5.2f}x   "
        f"pickle-bytes/jaxpb-bytes {len(pdata) / len(data):5.2f}x")
  return dict(name=name, encode=t_enc, decode=t_dec, bytes=len(data), trace=t_trace,
              export_ser=t_ser, export_deser=t_deser, export_bytes=len(ser))


def _all_eqns(jaxpr):
  from jax.extend.core import ClosedJaxpr, Jaxpr
  for e in jaxpr.eqns:
    yield e
    for v in e.params.values():
      for x in (v if isinstance(v, (tuple, list)) else (v,)):
        if isinstance(x, ClosedJaxpr):
          yield from _all_eqns(x.jaxpr)
        elif isinstance(x, Jaxpr):
          yield from _all_eqns(x)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--repeat", type=int, default=7)
  args = ap.parse_args(argv)
  print(f"jax {jax.__version__}, backend {jax.default_backend()}, best of {args.repeat}")
  for name, fn, fargs in (demo_program(), transformer_block_grad()):
    bench(name, fn, fargs, args.repeat)


if __name__ == "__main__":
  main()
