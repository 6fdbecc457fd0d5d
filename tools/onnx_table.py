"""Prints the markdown table of which corpus programs (tests/corpus.py) go
through ONNX: each is traced, saved and loaded as jaxpr-proto bytes, converted
by jaxpr_proto.cli.convert.onnx_model (jax2onnx, then onnx.checker), run with
onnxruntime on the program's example arguments, and compared with JAX's
outputs of the loaded program within TOLERANCES.

  .venv/bin/python tools/onnx_table.py [NAME ...]

Needs the [onnx] extra. tests/test_convert.py checks the rows marked pass.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # (the comparison is on CPU)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

# (rtol, atol) by the output's dtype; integers, bools and the rest exactly.
# ONNX Runtime's kernels (sin, exp, matmul, reductions) are not XLA's, so
# floats agree only to a few ulps times the size of the computation.
TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12),
              "float16": (1e-2, 1e-3), "bfloat16": (2e-2, 1e-2),
              "complex64": (1e-4, 1e-5)}


def compare(got, want) -> str:
  """'' when the ONNX outputs match JAX's within TOLERANCES, else why not."""
  if len(got) != len(want):
    return f"{len(got)} outputs, JAX gives {len(want)}"
  for k, (g, w) in enumerate(zip(got, want)):
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape:
      return f"output {k}: shape {g.shape}, JAX gives {w.shape}"
    if g.dtype != w.dtype:
      return f"output {k}: dtype {g.dtype}, JAX gives {w.dtype}"
    tol = TOLERANCES.get(w.dtype.name)
    if tol is None:
      if not np.array_equal(g, w):
        return f"output {k} ({w.dtype}) differs"
      continue
    g64, w64 = g.astype(np.complex128 if w.dtype.kind == "c" else np.float64), \
        w.astype(np.complex128 if w.dtype.kind == "c" else np.float64)
    if not np.allclose(g64, w64, rtol=tol[0], atol=tol[1], equal_nan=True):
      err = np.nanmax(np.abs(g64 - w64))
      return f"output {k} ({w.dtype}) differs: max abs error {err:.3g}"
  return ""


def check(p) -> tuple[bool, str]:
  """One corpus program -> (passes, why not / note)."""
  import jax
  import jax.extend.core as jex_core

  import jaxpr_proto as jp
  from jaxpr_proto.cli import convert
  from jaxpr_proto.cli.exits import CheckFailed, UsageError
  from tests import corpus
  try:
    cj = jp.loads(jp.dumps(corpus.trace(p)))
  except jp.EncodeError:
    return False, "jaxpr-proto cannot save it (see tests/test_roundtrip.py)"
  try:
    model = convert.onnx_model(cj)
  except (CheckFailed, UsageError) as e:
    return False, str(e).removeprefix("ONNX: ")
  # (Python scalars as the program's dtypes, as JAX takes them)
  args = [np.asarray(x, a.dtype) for x, a in zip(jax.tree.leaves(p.args), cj.in_avals)]
  if p.symbolic:  # (a jaxpr with symbolic dims runs only when exported)
    want = convert.export(cj).call(*args)
  else:
    want = jax.jit(jex_core.jaxpr_as_fun(cj))(*args)
  want = [np.asarray(x) for x in want]
  try:
    got = convert.run_onnx(model, args)
  except Exception as e:
    return False, f"onnxruntime: {convert._first_line(e)}"
  problem = compare(got, want)
  return not problem, problem


def rows(names=None):
  from tests import corpus
  for p in corpus.PROGRAMS:
    if names and p.name not in names:
      continue
    try:
      ok, why = check(p)
    except Exception as e:  # (a bug here, or in a library: still a row of the table)
      ok, why = False, f"error: {type(e).__name__}: {str(e).strip().splitlines()[0]}"
    yield p.name, ok, why


def table(results) -> str:
  from importlib.metadata import version
  lines = ["| program | ONNX | reason |", "| --- | --- | --- |"]
  for name, ok, why in results:
    lines.append(f"| `{name}` | {'pass' if ok else 'fail'} | {why.replace('|', '/')} |")
  n_ok = sum(1 for _, ok, _ in results if ok)
  lines.append("")
  lines.append(f"{n_ok} of {len(results)} pass (jax2onnx {version('jax2onnx')}, "
               f"onnx {version('onnx')}, onnxruntime {version('onnxruntime')}, opset 23; "
               "(rtol, atol): " + ", ".join(f"{k} {v}" for k, v in TOLERANCES.items())
               + ", other dtypes exactly).")
  return "\n".join(lines)


def main(argv) -> int:
  results = []
  for name, ok, why in rows(set(argv)):
    print(f"{name}: {'pass' if ok else 'FAIL ' + why}", file=sys.stderr, flush=True)
    results.append((name, ok, why))
  print(table(results))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
