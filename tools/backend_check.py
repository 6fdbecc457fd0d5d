"""Files written on one backend, loaded and run on another.

    # where the files are written (a CPU, say):
    .venv/bin/python tools/make_golden.py --out DIR
    # where they are read (a TPU, say):
    python tools/backend_check.py DIR [--json OUT]

Each program of DIR (a corpus program, as tools/make_golden.py wrote it
with its inputs) is loaded here with `jp.load`, and the same program of
tests/corpus.py is traced here; both run here, on the recorded inputs,
and their outputs must agree bit for bit (a program that cannot run here,
an op the backend lacks, must fail the same way when traced here). The
recorded outputs are not compared: another backend computes other bits.

Verdicts: `same` (bit for bit), `close` (within rtol 1e-5, atol 1e-6: XLA
compiled the two alike but not identically), `differs`, `both_fail` (the
backend cannot run the program, traced here or loaded), `load_fails`,
`loaded_fails` (the original runs here, the loaded one does not).
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

import jaxpr_proto as jp  # noqa: E402
import make_golden  # noqa: E402  (tools/make_golden.py)


def _bits(outs):
  out = []
  for o in outs:
    if not hasattr(o, "dtype"):  # a token: no bits to compare
      out.append(np.zeros(0))
      continue
    if isinstance(o, jax.Array) and jax.dtypes.issubdtype(o.dtype, jax.dtypes.prng_key):
      o = jax.random.key_data(o)
    out.append(np.asarray(o))
  return out


def check_one(d: pathlib.Path, name: str, entry: dict) -> tuple[str, str]:
  corpus = make_golden._corpus()
  try:
    loaded = jp.load(d / f"{name}.jaxpb")
  except Exception as e:
    return "load_fails", f"{type(e).__name__}: {e}"[:300]
  ins, _ = make_golden.load_npz(d / f"{name}.npz", entry)
  try:
    want = _bits(make_golden.eval_closed_jaxpr(corpus.trace(corpus.get(name)), ins))
  except Exception as e:
    try:
      make_golden.eval_closed_jaxpr(loaded, ins)
    except Exception:
      return "both_fail", f"{type(e).__name__}: {e}"[:300]
    return "differs", f"the original fails here ({type(e).__name__}: {e}), the loaded one runs"[:300]
  try:
    got = _bits(make_golden.eval_closed_jaxpr(loaded, ins))
  except Exception as e:
    return "loaded_fails", f"{type(e).__name__}: {e}"[:300]
  if len(got) != len(want):
    return "differs", f"{len(got)} outputs, {len(want)} traced here"
  verdict = "same"
  for i, (g, w) in enumerate(zip(got, want)):
    if g.dtype != w.dtype or g.shape != w.shape:
      return "differs", f"output {i}: {g.dtype}{g.shape}, traced here {w.dtype}{w.shape}"
    if g.tobytes() == w.tobytes():
      continue
    if g.dtype.kind in "fc" and np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True):
      verdict = "close"
      continue
    return "differs", f"output {i} differs"
  return verdict, ""


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("dir", type=pathlib.Path, help="files written by tools/make_golden.py --out")
  ap.add_argument("--json", type=pathlib.Path, default=None)
  a = ap.parse_args(argv)
  manifest = json.loads((a.dir / "MANIFEST.json").read_text())
  rows = {}
  for name, entry in sorted(manifest["programs"].items()):
    if entry.get("symbolic"):
      continue
    rows[name] = check_one(a.dir, name, entry)
  counts = collections.Counter(v for v, _ in rows.values())
  print(f"written by JAX {manifest['jax_version']} ({manifest.get('platform', '?')}), read on "
        f"{jax.devices()[0].platform} ({jax.devices()[0].device_kind}): {len(rows)} programs, "
        + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
  for name, (v, msg) in rows.items():
    if v not in ("same", "close"):
      print(f"  {v}: {name}: {' '.join(msg.split())[:200]}")
  if a.json:
    a.json.write_text(json.dumps(rows, indent=1))
  bad = sum(n for v, n in counts.items() if v in ("differs", "load_fails", "loaded_fails"))
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
