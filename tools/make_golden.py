"""Writes the test corpus as .jaxpb files, with recorded inputs and outputs.

    python tools/make_golden.py                       # tests/golden/v<major>.<minor>/
    python tools/make_golden.py --out DIR [--programs a,b,c] [--no-debug-info]
    python tools/make_golden.py --future              # tests/golden/future/
    python tools/make_golden.py --verify DIR [--json OUT] [--programs a,b] [--no-run]

For each program of tests/corpus.py that this JAX can trace and this
jaxpr_proto can write, DIR gets

* ``<name>.jaxpb`` -- the traced ClosedJaxpr, written with `jp.save`;
* ``<name>.npz``   -- the flat inputs (``in_<i>``) and the outputs that
  evaluating the *original* jaxpr gave (``out_<i>``);

and ``MANIFEST.json`` records, per file: its sha256, the JAX and format
versions that wrote it, how to rebuild each input and output (PRNG keys are
stored as key data plus the implementation name; float0 arrays by shape), and
the programs that were skipped and why.

The golden directory of a *released* format version is frozen: never
regenerate it, add a directory for the new version instead. The same script
is what tests/test_cross_jax.py runs under an older JAX (the script imports
nothing of the test suite but corpus.py, and runs under every supported JAX).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxpr_proto as jp  # noqa: E402
from jaxpr_proto.wire import files, versions  # noqa: E402


def eval_closed_jaxpr(cj, flat_args):
  """Runs a ClosedJaxpr (jit-compiled) on flat arguments; returns flat outputs."""
  fun = jax.extend.core.jaxpr_as_fun(cj)
  return list(jax.jit(fun)(*flat_args))


# --- flat values <-> npz entries ----------------------------------------------

def _is_key(x) -> bool:
  return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def describe(x, aval=None):
  """(array to store, JSON description) of one flat input or output."""
  if aval is not None and type(aval).__name__ == "AbstractToken":
    return None, {"kind": "token"}
  if _is_key(x):
    impl = str(jax.random.key_impl(x))
    return np.asarray(jax.random.key_data(x)), {"kind": "key", "impl": impl}
  dt = getattr(x, "dtype", None)
  if dt is not None and dt == jax.dtypes.float0:
    return None, {"kind": "float0", "shape": list(np.shape(x))}
  if aval is not None and not hasattr(x, "dtype") and hasattr(aval, "dtype"):  # a Python scalar
    x = np.asarray(x, dtype=aval.dtype)
  a = np.asarray(x)
  desc = {"kind": "array", "dtype": a.dtype.name, "shape": list(a.shape)}
  if not _is_numpy_dtype(a.dtype):  # ml_dtypes types: stored as raw unsigned ints
    a = np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")
  return a, desc


def _is_numpy_dtype(dt) -> bool:
  return dt.type.__module__ == "numpy" and dt.kind in "biufc"


def rebuild(arr, desc):
  if desc["kind"] == "key":
    return jax.random.wrap_key_data(jnp.asarray(arr), impl=desc["impl"])
  if desc["kind"] == "float0":
    return np.zeros(desc["shape"], jax.dtypes.float0)
  if desc["kind"] == "token":
    return jax.lax.create_token()
  return _as_dtype(arr, desc)


def _as_dtype(arr, desc):
  dt = _dtype(desc["dtype"])
  return arr if arr.dtype == dt else arr.view(dt)


def _dtype(name):
  import ml_dtypes
  return np.dtype(getattr(ml_dtypes, name, None) or name)


def save_npz(path, inputs, in_desc, outputs, out_desc):
  arrays = {}
  for prefix, vals in (("in", inputs), ("out", outputs)):
    for i, a in enumerate(vals):
      if a is not None:
        arrays[f"{prefix}_{i}"] = a
  with open(path, "wb") as f:
    np.savez(f, **arrays)


def load_npz(path, entry):
  with np.load(path, allow_pickle=False) as z:
    ins = [rebuild(z[f"in_{i}"] if f"in_{i}" in z else None, d)
           for i, d in enumerate(entry["inputs"])]
    outs = [_as_dtype(z[f"out_{i}"], d) if d["kind"] == "array" else
            z[f"out_{i}"] if f"out_{i}" in z else None
            for i, d in enumerate(entry["outputs"])]
  return ins, outs


def _program_inputs(p, cj):
  leaves = jax.tree.leaves(p.args)
  if len(leaves) != len(cj.in_avals):
    raise ValueError(f"{len(leaves)} argument leaves for {len(cj.in_avals)} inputs")
  return leaves


def _corpus():
  """The test corpus module (importing it registers its host callbacks'
  names, which its golden files call): `tests.corpus`, the one module the
  test suite imports too (a second copy would register the names again)."""
  if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
  from tests import corpus  # noqa: the test corpus
  return corpus


def write_corpus(out: pathlib.Path, names=None, debug_info=True, log=print):
  corpus = _corpus()
  out.mkdir(parents=True, exist_ok=True)
  entries, skipped = {}, {}
  for p in corpus.PROGRAMS:
    if names is not None and p.name not in names:
      continue
    t0 = time.time()
    try:
      cj = corpus.trace(p)
    except Exception as e:
      skipped[p.name] = f"trace: {type(e).__name__}: {e}"[:300]
      continue
    path = out / f"{p.name}.jaxpb"
    try:
      jp.save(cj, path, debug_info=debug_info)  # big constants: a data file beside it
      data = path.read_bytes()
      jp.load(path)  # only files this version can read back
    except Exception as e:
      skipped[p.name] = f"jaxpr_proto: {type(e).__name__}: {e}"[:300]
      _discard(path)
      continue
    entry = {"sha256": hashlib.sha256(data).hexdigest(), "symbolic": p.symbolic is not None}
    ins, outs, in_desc, out_desc = [], [], [], []
    if p.symbolic is None:
      try:
        flat = _program_inputs(p, cj)
        for x, aval in zip(flat, cj.in_avals):
          a, d = describe(x, aval)
          ins.append(a), in_desc.append(d)
        results = eval_closed_jaxpr(cj, [rebuild(a, d) for a, d in zip(ins, in_desc)])
        for y, aval in zip(results, cj.out_avals):
          a, d = describe(y, aval)
          outs.append(a), out_desc.append(d)
        save_npz(out / f"{p.name}.npz", ins, in_desc, outs, out_desc)
      except Exception as e:
        skipped[p.name] = f"evaluate: {type(e).__name__}: {e}"[:300]
        _discard(path)
        continue
    entry["inputs"], entry["outputs"] = in_desc, out_desc
    entries[p.name] = entry
    log(f"{p.name}: {len(data)} bytes, {time.time() - t0:.1f}s")
  manifest = {
      "format_version": f"{versions.FORMAT_MAJOR}.{versions.FORMAT_MINOR}",
      "jax_version": jax.__version__,
      "jaxpr_proto_version": jp.__version__,
      "debug_info": debug_info,
      "programs": entries,
      "skipped": skipped,
  }
  (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
  return manifest


# --- reading back: decode, check, run, compare ---------------------------------

def compare(got, want, descs, rtol=1e-4, atol=1e-5) -> str | None:
  """None if the outputs match the recorded ones, else what differs."""
  if len(got) != len(descs):
    return f"{len(got)} outputs, recorded {len(descs)}"
  for i, (g, w, d) in enumerate(zip(got, want, descs)):
    if d["kind"] == "token":
      continue
    if d["kind"] == "float0":
      if list(np.shape(g)) != d["shape"]:
        return f"output {i}: float0 shape {np.shape(g)}, recorded {d['shape']}"
      continue
    if d["kind"] == "key":
      g = np.asarray(jax.random.key_data(g))
      if g.shape != w.shape or not np.array_equal(g, w):
        return f"output {i}: key data differs"
      continue
    g = np.asarray(g)
    w = _as_dtype(w, d)
    if list(g.shape) != d["shape"] or g.dtype.name != d["dtype"]:
      return f"output {i}: {g.dtype.name}{list(g.shape)}, recorded {d['dtype']}{d['shape']}"
    if _is_numpy_dtype(g.dtype) and g.dtype.kind in "fc":
      if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
        err = np.nanmax(np.abs(g.astype(np.complex128) - w.astype(np.complex128)))
        return f"output {i}: differs by up to {err:.3g}"
    elif not _is_numpy_dtype(g.dtype):  # ml_dtypes floats: compare as float32
      gf, wf = g.astype(np.float32), w.astype(np.float32)
      if not np.allclose(gf, wf, rtol=1e-2, atol=1e-2, equal_nan=True):
        return f"output {i}: differs"
    elif not np.array_equal(g, w):
      return f"output {i}: differs at {int(np.argmax(g.reshape(-1) != w.reshape(-1)))}"
  return None


def _discard(path: pathlib.Path) -> None:
  """Removes a program's files (the .jaxpb and its data file)."""
  for f in (path, path.with_name(path.name + ".data")):
    f.unlink(missing_ok=True)


def verify_dir(d: pathlib.Path, names=None, run=True) -> dict:
  """Loads, checks and (with `run`) runs every program of a golden directory;
  returns {name: "ok" or the problem}, plus "_meta"."""
  manifest = json.loads((d / "MANIFEST.json").read_text())
  results = {}
  for name, entry in sorted(manifest["programs"].items()):
    if names is not None and name not in names:
      continue
    results[name] = _verify_one(d, name, entry, run)
  results["_meta"] = {"jax_version": jax.__version__, "written_by": manifest["jax_version"]}
  return results


def _verify_one(d, name, entry, run) -> str:
  path = d / f"{name}.jaxpb"
  if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
    return "file changed (sha256 differs from MANIFEST.json)"
  _corpus()  # its callbacks, by name
  try:
    cj = jp.load(path)  # with its data file, where it has one
  except Exception as e:
    return f"load: {type(e).__name__}: {e}"[:500]
  try:
    report = jp.check(path)
  except Exception as e:
    return f"check raised {type(e).__name__}: {e}"[:500]
  if not report.ok:
    return f"check: {report.format()}"[:1000]
  if not run or entry["symbolic"]:
    return "ok"
  try:
    ins, want = load_npz(d / f"{name}.npz", entry)
    got = eval_closed_jaxpr(cj, ins)
  except Exception as e:
    return f"run: {type(e).__name__}: {e}"[:500]
  problem = compare(got, want, entry["outputs"])
  return "ok" if problem is None else f"outputs: {problem}"


# --- files of future versions ----------------------------------------------------

def write_future(out: pathlib.Path) -> None:
  """Files that a reader of this version must refuse, or accept, clearly:

  * v2.0_future_major.jaxpb: format 2.0 (with fields v1 does not know);
  * v1.99_future_minor.jaxpb: format 1.99 with an unknown field: loads;
  * v1.0_future_feature.jaxpb: needs the feature "future_feature";
  * jax_future_param.jaxpb: written by "JAX 0.99.0", whose `sin` has a param
    this JAX lacks."""
  from jaxpr_proto.v1 import jaxpr_pb2 as pb
  out.mkdir(parents=True, exist_ok=True)
  cj = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(np.float32(1.5))
  base = jp.encode(cj, debug_info=False)
  # An unknown field (number 1000, a string): what a later schema could add.
  payload = b"from the future"
  unknown = b"\xc2\x3e" + bytes([len(payload)]) + payload

  def write(name, m, extra=b""):
    files.write_atomic(out / name, m.SerializeToString(deterministic=True) + extra)

  m = pb.Module()
  m.CopyFrom(base)
  m.format_version.major, m.format_version.minor = 2, 0
  write("v2.0_future_major.jaxpb", m, unknown)
  m = pb.Module()
  m.CopyFrom(base)
  m.format_version.minor = 99
  write("v1.99_future_minor.jaxpb", m, unknown)
  m = pb.Module()
  m.CopyFrom(base)
  m.required_features.append("future_feature")
  write("v1.0_future_feature.jaxpb", m)
  m = pb.Module()
  m.CopyFrom(base)
  for ns in m.namespaces:
    ns.version = "0.99.0"
  m.producer.jax_version = "0.99.0"
  sin = next(k for k, p in enumerate(m.primitives) if p.name == "sin")
  m.params.add(name="approximation", value=pb.Value(str="fast"))
  for e in m.jaxprs[m.closed_jaxprs[m.root].jaxpr].eqns:
    if e.primitive == sin:
      e.params.append(len(m.params) - 1)
  write("jax_future_param.jaxpb", m)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--out", type=pathlib.Path,
                  default=ROOT / "tests" / "golden" / f"v{versions.FORMAT_MAJOR}.{versions.FORMAT_MINOR}")
  ap.add_argument("--programs", default=None, help="comma-separated program names")
  ap.add_argument("--no-debug-info", action="store_true")
  ap.add_argument("--quiet", action="store_true")
  ap.add_argument("--future", action="store_true", help="write tests/golden/future/")
  ap.add_argument("--verify", type=pathlib.Path, default=None, help="read back a golden directory")
  ap.add_argument("--json", type=pathlib.Path, default=None, help="--verify: write the results here")
  ap.add_argument("--no-run", action="store_true", help="--verify: only load and check")
  args = ap.parse_args(argv)
  names = set(args.programs.split(",")) if args.programs else None
  if args.future:
    write_future(ROOT / "tests" / "golden" / "future")
    return 0
  if args.verify is not None:
    results = verify_dir(args.verify, names, run=not args.no_run)
    if args.json:
      args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    bad = {k: v for k, v in results.items() if k != "_meta" and v != "ok"}
    print(f"{len(results) - 1 - len(bad)} ok, {len(bad)} failed", file=sys.stderr)
    for k, v in bad.items():
      print(f"  {k}: {v}", file=sys.stderr)
    return 1 if bad else 0
  m = write_corpus(args.out, names, debug_info=not args.no_debug_info,
                   log=(lambda *a: None) if args.quiet else print)
  print(f"wrote {len(m['programs'])} programs to {args.out}; skipped {len(m['skipped'])}",
        file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
