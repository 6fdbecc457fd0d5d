"""Benchmark: jaxpr-proto against its peers, side by side in one process.

    python tools/bench.py [--repeat N] [--eqns 1000,1000000] [--layers 4000] [--big-gib 2.5]

For each program (the MLP step of the issue on large programs: one SGD
step of an 8-layer MLP of width 512; the demo's MLP training step; the
gradient of a transformer block) it prints encode/decode time and bytes of
.jaxpb, the time of re-tracing with jax.make_jaxpr (caches cleared, as in a
fresh process), jax.export's serialize/deserialize time and bytes, pickle of
the decoded ClosedJaxpr (which goes through .jaxpb), and the ratios between
them. Decoding is timed four ways: cold (jaxpr_proto's memos cleared too, as
in a fresh process), warm (bytes not loaded before, the memos kept), again
(the same bytes, which passed the checks before: see check.loading) and
trusted (typecheck=False, cold); and beside them the floor: JAX's own
constructors and check_jaxpr on the same program, what a decoder spends
that builds the jaxpr and has JAX check it eqn by eqn (jaxpr_proto's check
runs JAX's type rules once per distinct eqn: a warm load can go below it).
Each program's steps run in turn, round after round, best of 4 x --repeat
rounds.

Then a chain of elementwise eqns at each size of --eqns: eqns per second of
`jp.dumps` and of `jp.loads(typecheck=False)`, and the time per eqn against
the smallest size (linear scaling is 1.0x); and a traced unrolled model of
--layers layers (make_jaxpr's eqns: each with its own params, literals and
source lines), against make_jaxpr. With --big-gib, a program closing
over a constant of that many GiB: `jp.save` and `jp.load` each in a fresh
process, their time and peak resident memory (ru_maxrss) above the data.
With --fresh N, issue 32's first loads, each in a fresh process
(tools/bench_fresh.py: make_jaxpr against jp.loads with and without the
verdict cache, typecheck=False, pickle.loads, dumps+loads against
jax.export; a Dask worker's first task; import time).
"""
from __future__ import annotations

import argparse
import importlib
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import jax
import jax.numpy as jnp

import jaxpr_proto as jp
from bench_programs import mlp_sgd_step, unrolled_fn
from jaxpr_proto import compat

_loading = importlib.import_module("jaxpr_proto.check.loading")  # (jp.check shadows the package)


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


def _rounds(steps: list, repeat):
  """{name: best time} of each (name, step), all run in turn, round after
  round: a spell of this machine running slower slows every step alike,
  not the one that it meets. Steps named None run untimed."""
  best = {k: float("inf") for k, _ in steps if k is not None}
  for _ in range(repeat):
    for k, step in steps:
      t = time.perf_counter()
      step()
      if k is not None:
        best[k] = min(best[k], time.perf_counter() - t)
  return best


def bench(name, fn, args, repeat):
  def trace():
    jax.clear_caches()
    return jax.make_jaxpr(fn)(*args)

  def export():
    jax.clear_caches()
    return jax.export.export(jax.jit(fn))(*args)

  def cold_loads(**kw):
    jp.clear_caches()  # as make_jaxpr's jax.clear_caches(): as in a fresh process
    return jp.loads(data, **kw)

  def new_file_loads():
    _loading.forget_passed()  # as for bytes not loaded before; the other memos kept
    return jp.loads(data)

  cj = trace()
  data = jp.dumps(cj)
  cj2, cj3 = cold_loads(), jp.loads(data)
  assert str(cj2) == str(cj) == str(cj3)
  pdata = pickle.dumps(cj2)
  exported = export()
  ser = exported.serialize()
  again, enc = lambda: jp.loads(data), lambda: jp.dumps(cj)
  # (encoding and loading again are timed with the memos that a first run of
  # each fills: cold_loads empties them)
  t = _rounds([
      ("trace", trace), (None, enc), ("enc", enc),
      ("trusted", lambda: cold_loads(typecheck=False)), ("dec", cold_loads),
      ("warm", new_file_loads), (None, again), ("again", again), ("pload", lambda: pickle.loads(pdata)),
      ("floor", lambda: floor(cj)), ("pdump", lambda: pickle.dumps(cj2)),
      ("export", export), ("ser", exported.serialize), ("deser", lambda: jax.export.deserialize(ser))],
      repeat)
  t_trace, t_enc, t_dec, t_warm, t_again, t_dec_trusted, t_floor = (
      t["trace"], t["enc"], t["dec"], t["warm"], t["again"], t["trusted"], t["floor"])
  t_pdump, t_pload, t_export, t_ser, t_deser = t["pdump"], t["pload"], t["export"], t["ser"], t["deser"]
  n_eqns = sum(1 for _ in _all_eqns(cj.jaxpr))

  ms = lambda t: f"{t * 1e3:8.2f} ms"
  print(f"\n== {name}: {len(cj.jaxpr.eqns)} top-level eqns, {n_eqns} in all")
  print(f"  jaxpr-proto   encode {ms(t_enc)}   decode {ms(t_dec)}   {len(data):8d} bytes")
  print(f"  (warm)                           decode {ms(t_warm)}   bytes not loaded before; the memos kept")
  print(f"  (again)                          decode {ms(t_again)}   the same bytes again: checked before")
  print(f"  (trusted)                        decode {ms(t_dec_trusted)}   typecheck=False")
  print(f"  floor                            {ms(t_floor)}   JAX's constructors and check_jaxpr alone")
  print(f"  make_jaxpr    trace  {ms(t_trace)}   (caches cleared)")
  print(f"  jax.export    serial {ms(t_ser)}   deser  {ms(t_deser)}   {len(ser):8d} bytes   "
        f"(export itself {ms(t_export)}, caches cleared)")
  print(f"  pickle        dumps  {ms(t_pdump)}   loads  {ms(t_pload)}   {len(pdata):8d} bytes")
  print(f"  ratios: re-trace/decode {t_trace / t_dec:6.1f}x (warm {t_trace / t_warm:5.1f}x, "
        f"again {t_trace / t_again:5.1f}x, trusted {t_trace / t_dec_trusted:5.1f}x, "
        f"floor {t_trace / t_floor:5.1f}x)   "
        f"(dumps+loads)/(export serialize+deserialize) {(t_enc + t_dec) / (t_ser + t_deser):5.1f}x "
        f"(again {(t_enc + t_again) / (t_ser + t_deser):5.1f}x)   "
        f"export-deser/decode {t_deser / t_dec:6.2f}x   "
        f"export-bytes/jaxpb-bytes {len(ser) / len(data):5.2f}x   "
        f"pickle-bytes/jaxpb-bytes {len(pdata) / len(data):5.2f}x")
  return dict(name=name, encode=t_enc, decode=t_dec, bytes=len(data), trace=t_trace,
              export_ser=t_ser, export_deser=t_deser, export_bytes=len(ser))


def floor(cj):
  """What a decoder spends that builds the jaxprs and has JAX check them:
  the same jaxprs built afresh with JAX's constructors (params, avals and
  source info reused, not decoded), and JAX's own type check of them."""
  from jax.extend.core import ClosedJaxpr, Jaxpr, Literal, Var
  core = compat.core

  def rebuild(j):
    env = {}
    def new(v):
      env[v] = Var(v.aval)
      return env[v]
    def use(a):
      return Literal(a.val, a.aval) if isinstance(a, Literal) else env[a]
    constvars, invars = [new(v) for v in j.constvars], [new(v) for v in j.invars]
    eqns = [core.new_jaxpr_eqn([use(a) for a in e.invars], [new(v) for v in e.outvars],
                               e.primitive, {k: param(p) for k, p in e.params.items()},
                               e.effects, e.source_info, e.ctx) for e in j.eqns]
    return Jaxpr(constvars, invars, [use(a) for a in j.outvars], eqns, j.effects, j.debug_info)

  def param(p):
    if isinstance(p, ClosedJaxpr):
      return ClosedJaxpr(rebuild(p.jaxpr), p.consts)
    if isinstance(p, Jaxpr):
      return rebuild(p)
    return tuple(map(param, p)) if type(p) is tuple else p

  out = ClosedJaxpr(rebuild(cj.jaxpr), cj.consts)
  core.check_jaxpr(out.jaxpr)
  return out


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


def chain(n: int, lanes: int = 128):
  """A ClosedJaxpr of n elementwise eqns (sin, cos, neg, in turn) in `lanes`
  dependent chains (one chain of a million loads too, but XLA's CPU compiler
  crashes on chains past check.bounds.XLA_CPU_CHAIN ops), built
  from one traced step: tracing a million eqns would dominate."""
  from jax.extend.core import ClosedJaxpr, Var
  step = jax.make_jaxpr(lambda x: -jnp.cos(jnp.sin(x)))(jnp.float32(0)).jaxpr
  heads = [step.invars[0]] * min(lanes, n)
  eqns = []
  for k in range(n):
    lane = k % len(heads)
    y = Var(heads[lane].aval)
    eqns.append(step.eqns[(k // len(heads)) % 3].replace(invars=[heads[lane]], outvars=[y]))
    heads[lane] = y
  return ClosedJaxpr(step.replace(outvars=heads, eqns=eqns), ())


def bench_eqns(sizes, repeat, lanes=128):
  print(f"\n== {'one chain' if lanes == 1 else f'{lanes} chains'} of elementwise eqns "
        "(jp.dumps; jp.loads(typecheck=False))")
  base = None
  for n in sizes:
    cj = chain(n, lanes)
    r = repeat if n <= 100_000 else 1
    t_enc, _, data = _best(lambda: jp.dumps(cj), r)
    t_dec, _, cj2 = _best(lambda: jp.clear_caches() or jp.loads(data, typecheck=False), r)
    assert len(cj2.jaxpr.eqns) == n
    per = (t_enc / n, t_dec / n)
    base = base or per
    print(f"  {n:>9,} eqns: dumps {n / t_enc:>9,.0f} eqns/s   loads {n / t_dec:>9,.0f} eqns/s   "
          f"{len(data) / n:5.1f} bytes/eqn   time per eqn vs {sizes[0]:,}: "
          f"dumps {per[0] / base[0]:4.2f}x, loads {per[1] / base[1]:4.2f}x")


def unrolled(layers: int, lanes: int = 8):
  """A traced program of lanes * layers * 3 eqns and a few, as unrolled
  models give: `lanes` models side by side (one chain of a million would be
  beyond what XLA's CPU compiler compiles, check.bounds.XLA_CPU_CHAIN), each
  layer a matmul, a bias that is a
  literal of its own, and a tanh. Returns it and make_jaxpr's time."""
  f, args = unrolled_fn(layers, lanes)
  t = time.perf_counter()
  cj = jax.make_jaxpr(f)(*args)
  return cj, time.perf_counter() - t


def bench_unrolled(layers: int, repeat: int):
  cj, t_trace = unrolled(layers)
  n = len(cj.jaxpr.eqns)
  r = max(1, min(repeat, 3))
  t_enc, _, data = _best(lambda: jp.dumps(cj), r)
  t_fast, _, _ = _best(lambda: jp.clear_caches() or jp.loads(data, typecheck=False), r)
  t_dec, _, cj2 = _best(lambda: jp.clear_caches() or jp.loads(data), r)
  t_again, _, cj3 = _best(lambda: jp.loads(data), r)
  assert str(cj2) == str(cj) == str(cj3)
  print(f"\n== traced unrolled models (8 x {layers:,} layers: matmul, add of a literal, tanh), {n:,} eqns")
  print(f"  make_jaxpr {n / t_trace:>9,.0f} eqns/s   jp.dumps {n / t_enc:>9,.0f} eqns/s   "
        f"jp.loads(typecheck=False) {n / t_fast:>9,.0f} eqns/s   jp.loads {n / t_dec:>9,.0f} eqns/s "
        f"(again {n / t_again:>9,.0f} eqns/s)   {len(data) / n:5.1f} bytes/eqn")
  print(f"  ratios: make_jaxpr/loads {t_trace / t_dec:5.1f}x (typecheck=False {t_trace / t_fast:5.1f}x, "
        f"again {t_trace / t_again:5.1f}x)")


# One step (save or load) of a program closing over a constant of `nbytes`, in a
# fresh process: prints its time, the resident size after importing JAX, and
# the peak resident size while the step ran (tests/test_external.py runs it too).
PEAK_SCRIPT = textwrap.dedent("""
    import resource, sys, threading, time
    import numpy as np, jax, jax.numpy as jnp
    import jaxpr_proto as jp
    path, what, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
    def rss():  # resident now
      with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
    base = rss()  # after importing JAX, before the data
    if what == "save":  # (tracing may copy the data; only the save is watched)
      w = jnp.ones(nbytes // 4, jnp.float32)
      cj = jax.make_jaxpr(lambda x: x + w[:4])(np.zeros(4, np.float32))
    peak, done = [rss()], []
    def watch():
      while not done:
        peak.append(rss())
        time.sleep(0.001)
    watcher = threading.Thread(target=watch)
    watcher.start()
    t = time.perf_counter()
    if what == "save":
      jp.save(cj, path)
    else:
      cj = jp.load(path)  # checks every byte's SHA-256, so all of it is read
      assert sum(np.asarray(c).nbytes for c in cj.consts) >= nbytes
    t = time.perf_counter() - t
    done.append(1)
    watcher.join()
    print(t, base, max(peak + [rss()]))
""")


def measure_peak(path: str, what: str, nbytes: int) -> tuple[float, int, int]:
  """(seconds, resident bytes after importing JAX, peak resident bytes) of
  `jp.save` ("save") or `jp.load` ("load") of PEAK_SCRIPT's program."""
  r = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, path, what, str(nbytes)],
                     capture_output=True, text=True, timeout=3600,
                     env={**os.environ, "JAX_PLATFORMS": "cpu"})
  if r.returncode:
    raise RuntimeError(f"jp.{what} of a {nbytes:,}-byte constant failed:\n{r.stderr[-3000:]}")
  t, base, peak = r.stdout.split()
  return float(t), int(base), int(peak)


def bench_big(gib: float):
  nbytes = int(gib * 2**30) // 4 * 4
  print(f"\n== a program closing over a {gib} GiB constant (each step in a fresh process)")
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "big.jaxpb")
    for what in ("save", "load"):
      t, base, peak = measure_peak(path, what, nbytes)
      print(f"  jp.{what}: {t:6.2f} s   peak resident "
            f"{(peak - base) / 2**30:5.2f} GiB above the process after importing JAX "
            f"(the data is {nbytes / 2**30:.2f} GiB)")
    files = sorted(os.listdir(d))
    print("  files: " + ", ".join(f"{f} {os.path.getsize(os.path.join(d, f)):,} bytes" for f in files))


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--repeat", type=int, default=7,
                  help="best of N for the rows of many eqns; the programs, a few ms "
                       "per step, take best of 4N, less swayed by a noisy machine")
  ap.add_argument("--eqns", default="1000,10000,100000,1000000",
                  help="sizes of the eqn-chain rows, comma-separated ('' for none)")
  ap.add_argument("--layers", type=int, default=4_000,
                  help="layers of each of the 8 traced unrolled models (0 for none)")
  ap.add_argument("--big-gib", type=float, default=0.0,
                  help="also save and load a program with a constant of this many GiB")
  ap.add_argument("--lanes", default="1,100",
                  help="independent chains in the eqn-chain rows, comma-separated")
  ap.add_argument("--fresh", type=int, default=0,
                  help="also issue 32's first loads in fresh processes, medians of this many "
                       "(tools/bench_fresh.py)")
  args = ap.parse_args(argv)
  print(f"jax {jax.__version__}, backend {jax.default_backend()}, best of {4 * args.repeat} "
        f"(programs) and {args.repeat} (many eqns)")
  for name, fn, fargs in (mlp_sgd_step(), demo_program(), transformer_block_grad()):
    bench(name, fn, fargs, 4 * args.repeat)
  if args.eqns:
    for lanes in args.lanes.split(","):
      bench_eqns([int(n) for n in args.eqns.split(",")], args.repeat, int(lanes))
  if args.layers:
    bench_unrolled(args.layers, args.repeat)
  if args.big_gib:
    bench_big(args.big_gib)
  if args.fresh:
    import bench_fresh
    bench_fresh.main(["--runs", str(args.fresh)])


if __name__ == "__main__":
  main()
