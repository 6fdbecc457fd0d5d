"""Writes the test corpus as .jaxpb files, with recorded inputs and outputs.

    python tools/make_golden.py                       # tests/golden/v<major>.<minor>/
    python tools/make_golden.py --out DIR [--programs a,b,c] [--no-debug-info]

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
from jaxpr_proto import versions  # noqa: E402


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


def write_corpus(out: pathlib.Path, names=None, debug_info=True, log=print):
  sys.path.insert(0, str(ROOT / "tests"))
  import corpus  # noqa: the test corpus
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
    try:
      data = jp.dumps(cj, debug_info=debug_info)
      jp.loads(data)  # only files this version can read back
    except Exception as e:
      skipped[p.name] = f"jaxpr_proto: {type(e).__name__}: {e}"[:300]
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
        continue
    entry["inputs"], entry["outputs"] = in_desc, out_desc
    jp.api.write_atomic(out / f"{p.name}.jaxpb", data)
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


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--out", type=pathlib.Path,
                  default=ROOT / "tests" / "golden" / f"v{versions.FORMAT_MAJOR}.{versions.FORMAT_MINOR}")
  ap.add_argument("--programs", default=None, help="comma-separated program names")
  ap.add_argument("--no-debug-info", action="store_true")
  ap.add_argument("--quiet", action="store_true")
  args = ap.parse_args(argv)
  names = set(args.programs.split(",")) if args.programs else None
  m = write_corpus(args.out, names, debug_info=not args.no_debug_info,
                   log=(lambda *a: None) if args.quiet else print)
  print(f"wrote {len(m['programs'])} programs to {args.out}; skipped {len(m['skipped'])}",
        file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
