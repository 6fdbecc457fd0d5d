"""First loads in a fresh process: issue 32's figures, side by side in one run.

    python tools/bench_fresh.py [--runs 5] [--layers 417] [--no-dask]

Each figure is taken in a process of its own, timing the call after the
imports (JAX and jaxpr_proto imported, the arguments made, before the
clock starts; `make_jaxpr`'s process imports JAX alone, since
jaxpr_proto's warm-up at import runs some of JAX's code): a Dask worker's first task, a server's first request. Beside
it, the same process's later program: another program of the same shape
(the MLP step with another learning rate; the unrolled model with other
literals), its bytes new to the process. Medians of --runs processes.

Programs: the MLP SGD step (8 layers of width 512, 146 eqns) and a traced
unrolled model of 8 x --layers layers (3 eqns each: 10,008 at 417). Rows:

* `make_jaxpr`: tracing the program, what a loader replaces;
* `jp.loads`: every check, no verdict cache;
* `jp.loads, cache filled`: every check, the verdict cache folder filled by
  another process (jp.config / JAXPR_PROTO_VERDICT_CACHE_DIR);
* `typecheck=False`;
* `pickle.loads`: a pickle of this writer, trusted (check.loading);
* `dumps + loads` against `Exported.serialize` + `jax.export.deserialize`
  (cache filled, as the goal asks);

then a Dask worker's first task unpickling the 10k-eqn program (a
jp.Function) against make_jaxpr in a fresh process, and `import
jaxpr_proto`'s time after `import jax`.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import textwrap

TOOLS = os.path.dirname(os.path.abspath(__file__))

# One figure in a fresh process: prints [first, later] seconds as JSON.
SCRIPT = textwrap.dedent("""
    import json, os, pickle, sys, time
    sys.path.insert(0, TOOLS)
    mode, program, folder = sys.argv[1:4]
    import jax
    if mode != "make_jaxpr":  # (its warm-up at import runs some of JAX's code too)
      import jaxpr_proto as jp
    import bench_fresh
    def read(name):
      with open(os.path.join(folder, f"{program}_{name}"), "rb") as f:
        return f.read()
    def timed(f):
      t = time.perf_counter()
      f()
      return time.perf_counter() - t
    if mode == "make_jaxpr":
      (fa, aa), (fb, ab) = (bench_fresh.program(program, k) for k in (0, 1))
      jax.block_until_ready((aa, ab))
      out = [timed(lambda: jax.make_jaxpr(fa)(*aa)), timed(lambda: jax.make_jaxpr(fb)(*ab))]
    elif mode in ("loads", "cached", "trusted"):
      kw = {"typecheck": False} if mode == "trusted" else {}
      a, b = read("0.jaxpb"), read("1.jaxpb")
      out = [timed(lambda: jp.loads(a, **kw)), timed(lambda: jp.loads(b, **kw))]
    elif mode == "pickle":
      a, b = read("0.pkl"), read("1.pkl")
      out = [timed(lambda: pickle.loads(a)), timed(lambda: pickle.loads(b))]
    elif mode == "roundtrip":  # [jp first, export first, jp later, export later]
      out = []
      for k in (0, 1):
        fn, args = bench_fresh.program(program, k)
        cj = jax.make_jaxpr(fn)(*args)
        exported = jax.export.export(jax.jit(fn))(*args)
        out += [timed(lambda: jp.loads(jp.dumps(cj))),
                timed(lambda: jax.export.deserialize(exported.serialize()))]
    print(json.dumps(out))
""").replace("TOOLS", repr(TOOLS))

IMPORT_SCRIPT = textwrap.dedent("""
    import json, time
    t0 = time.perf_counter()
    import jax
    t1 = time.perf_counter()
    import jaxpr_proto
    t2 = time.perf_counter()
    print(json.dumps([t1 - t0, t2 - t1]))
""")

LAYERS = 417


def program(name: str, variant: int):
  """(function, arguments) of a program: variant 0 and a later one, 1."""
  sys.path.insert(0, TOOLS)
  import bench_programs
  if name == "mlp":
    _, fn, args = bench_programs.mlp_sgd_step(lr=0.01 * (variant + 1))
    return fn, args
  return bench_programs.unrolled_fn(LAYERS, offset=0.001 * (variant + 1))


def _run(script, *args, env=None):
  r = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                     text=True, timeout=900, env={**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})})
  if r.returncode:
    raise RuntimeError(r.stderr[-3000:])
  return json.loads(r.stdout.strip().splitlines()[-1])


def _median(script, runs, *args, env=None):
  got = [_run(script, *args, env=env) for _ in range(runs)]
  return [statistics.median(col) for col in zip(*got)]


def _write_programs(folder, name):
  import jax
  import jaxpr_proto as jp
  for k in (0, 1):
    fn, args = program(name, k)
    cj = jax.make_jaxpr(fn)(*args)
    with open(os.path.join(folder, f"{name}_{k}.jaxpb"), "wb") as f:
      f.write(jp.dumps(cj))
    with open(os.path.join(folder, f"{name}_{k}.pkl"), "wb") as f:
      f.write(pickle.dumps(cj))
    n = len(cj.jaxpr.eqns)
  return n


def bench_program(name, folder, runs):
  n = _write_programs(folder, name)
  cache = {"JAXPR_PROTO_VERDICT_CACHE_DIR": os.path.join(folder, f"verdicts_{name}")}
  _run(SCRIPT, "loads", name, folder, env=cache)  # (another process fills it)
  _run(SCRIPT, "roundtrip", name, folder, env=cache)
  modes = {"make_jaxpr": ("make_jaxpr", None), "jp.loads": ("loads", None),
           "jp.loads, cache filled": ("cached", cache), "typecheck=False": ("trusted", None),
           "pickle.loads": ("pickle", None), "roundtrip": ("roundtrip", cache)}
  got = {row: [] for row in modes}
  for _ in range(runs):  # (round after round: a slower spell of the machine slows every row alike)
    for row, (mode, env) in modes.items():
      got[row].append(_run(SCRIPT, mode, name, folder, env=env))
  rows = {row: [statistics.median(col) for col in zip(*v)] for row, v in got.items()}
  rt = rows.pop("roundtrip")
  base = rows["make_jaxpr"]
  ms = lambda t: f"{t * 1e3:8.2f} ms"
  print(f"\n== {name}: {n:,} top-level eqns; fresh process (first) and its later program, "
        f"medians of {runs} processes")
  for row, (first, later) in rows.items():
    print(f"  {row:<24} first {ms(first)} ({base[0] / first:5.1f}x)   "
          f"later {ms(later)} ({base[1] / later:5.1f}x)")
  print(f"  dumps + loads / (export serialize + deserialize), cache filled: "
        f"first {rt[0] / rt[1]:4.2f}x ({ms(rt[0])} / {ms(rt[1])})   "
        f"later {rt[2] / rt[3]:4.2f}x ({ms(rt[2])} / {ms(rt[3])})")
  return rows


DASK_TASK = textwrap.dedent("""
    def first_unpickle(blob):
      import pickle, time
      t = time.perf_counter()
      f = pickle.loads(blob)
      return time.perf_counter() - t, len(f.closed_jaxpr.jaxpr.eqns)
""")


def bench_dask(folder, runs):
  """A Dask worker's first task: unpickling the 10k-eqn program (a
  jp.Function), in a worker process of a new LocalCluster each run."""
  try:
    from distributed import Client, LocalCluster
  except ImportError:
    print("\n== Dask: not installed (pip install 'jaxpr-proto[dask]')")
    return
  import jaxpr_proto as jp
  import jax
  fn, args = program("unrolled", 0)
  blob = pickle.dumps(jp.trace(fn)(*args))
  ns: dict = {}
  exec(DASK_TASK, ns)  # (a function pickled by value: the worker needs no module of ours)
  times = []
  for _ in range(runs):
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
      client.run(lambda: __import__("jaxpr_proto"))  # (imports before the clock, as above)
      t, n = client.submit(ns["first_unpickle"], blob, pure=False).result()
      times.append(t)
  trace = _median(SCRIPT, runs, "make_jaxpr", "unrolled", folder)[0]
  t = statistics.median(times)
  print(f"\n== Dask worker, first task: unpickling the {n:,}-eqn jp.Function "
        f"{t * 1e3:8.2f} ms; make_jaxpr in a fresh process {trace * 1e3:8.2f} ms "
        f"({trace / t:4.1f}x)")


def bench_import(runs):
  """Import times from bytecode, as an installed package has it (pip writes
  .pyc files; a cache folder stands in for them here), and compiled from
  source (where PYTHONDONTWRITEBYTECODE is set, as in some sandboxes)."""
  with tempfile.TemporaryDirectory() as cache:
    env = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": cache}
    _run(IMPORT_SCRIPT, env=env)  # (writes the bytecode)
    t = _median(IMPORT_SCRIPT, runs, env=env)
  src = _median(IMPORT_SCRIPT, runs, env={"PYTHONDONTWRITEBYTECODE": "1"})
  print(f"\n== imports, from bytecode: `import jax` {t[0] * 1e3:7.1f} ms, then `import "
        f"jaxpr_proto` {t[1] * 1e3:7.1f} ms (budget 145 ms); compiled from source: "
        f"{src[0] * 1e3:7.1f} ms and {src[1] * 1e3:7.1f} ms; medians of {runs} processes")


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--runs", type=int, default=5, help="processes per figure (median)")
  ap.add_argument("--no-dask", action="store_true")
  ap.add_argument("--only", default="", help="comma-separated: mlp, unrolled, dask, import")
  args = ap.parse_args(argv)
  only = set(filter(None, args.only.split(","))) or {"mlp", "unrolled", "dask", "import"}
  import jax
  print(f"jax {jax.__version__}, backend cpu, fresh processes")
  with tempfile.TemporaryDirectory() as folder:
    for name in ("mlp", "unrolled"):
      if name in only:
        bench_program(name, folder, args.runs)
    if "dask" in only and not args.no_dask:
      bench_dask(folder, args.runs)
  if "import" in only:
    bench_import(args.runs)


if __name__ == "__main__":
  main()
