"""Saves Pallas kernels compiled for the TPU (Mosaic, interpret=False), loads
them in a fresh process that never sees their code, runs them there and
compares with the original's outputs, bit for bit.

    .venv/bin/python tools/pallas_tpu_check.py              # on a machine with a TPU
    .venv/bin/python tools/pallas_tpu_check.py --dir out/   # keep the files

Needs a TPU and JAX 0.10 (or another supported JAX) with libtpu. Exit status
0 when every kernel loads, prints as the original, re-encodes to the same
bytes and computes the same bits; 1 otherwise; 2 without a TPU.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def kernels():
  """{name: (function, args)}: TPU kernels with grids, block specs and index
  maps, VMEM scratch, SMEM operands, scalar prefetch, compiler params and
  cost estimates; all with interpret=False."""
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import tpu as pltpu

  def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

  def add(x, y):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // 8,), in_specs=[spec, spec], out_specs=spec)(x, y)

  def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
      acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
      o_ref[...] = acc_ref[...].astype(o_ref.dtype)

  def matmul(x, y, bm=128, bk=128, bn=128):
    (m, k), (_, n) = x.shape, y.shape
    return pl.pallas_call(
        matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary"),
            vmem_limit_bytes=32 << 20),
        cost_estimate=pl.CostEstimate(flops=2 * m * n * k, transcendentals=0,
                                      bytes_accessed=4 * (m * k + k * n + m * n)),
        name="tpu_matmul")(x, y)

  def gather_kernel(idx_ref, s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * s_ref[0] + s_ref[1]

  def gather_rows(idx, s, x):
    return pl.pallas_call(
        gather_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(x.shape[0] // 8,),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                      pl.BlockSpec((8, 128), lambda i, idx_ref: (idx_ref[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, idx_ref: (i, 0))),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(idx, s, x)

  rng = np.random.default_rng(0)
  f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
  return {
      "add": (add, (f32(16, 128), f32(16, 128))),
      "matmul": (matmul, (f32(256, 384), f32(384, 256))),
      "gather_rows": (gather_rows, (np.array([3, 1, 0, 2], np.int32),
                                    np.array([2.0, 0.5], np.float32), f32(32, 128))),
  }


def save(folder: str) -> dict:
  import jax
  import jaxpr_proto as jp
  out = {}
  for name, (fn, args) in kernels().items():
    f = jp.trace(fn)(*args)
    call = f.closed_jaxpr.jaxpr.eqns
    assert any(e.primitive.name == "pallas_call" and e.params["interpret"] is False
               for e in call), name
    jp.save(f, os.path.join(folder, f"{name}.jaxpb"))
    want = np.asarray(jax.jit(fn)(*args))
    np.savez(os.path.join(folder, f"{name}.npz"), want=want,
             **{f"arg{i}": np.asarray(a) for i, a in enumerate(args)})
    out[name] = str(f.closed_jaxpr)
  return out


def load(folder: str, names) -> dict:
  """In the fresh process: Pallas itself, never the kernels' code."""
  import jax
  import jax.experimental.pallas  # noqa: F401  (the pallas_call primitive)
  import jax.experimental.pallas.tpu  # noqa: F401  (the TPU backend's types)
  import jaxpr_proto as jp
  out = {}
  for name in names:
    path = os.path.join(folder, f"{name}.jaxpb")
    data = np.load(os.path.join(folder, f"{name}.npz"))
    args = [data[f"arg{i}"] for i in range(len(data.files) - 1)]
    try:
      f = jp.load(path)
      got = np.asarray(jax.jit(f)(*args))
      same = got.dtype == data["want"].dtype and got.shape == data["want"].shape and \
          got.tobytes() == data["want"].tobytes()
      with open(path, "rb") as fh:
        reencodes = jp.dumps(f) == fh.read()
      out[name] = {"text": str(f.closed_jaxpr), "same_bits": bool(same), "reencodes": reencodes,
                   "max_abs_diff": float(np.max(np.abs(got - data["want"]))) if got.shape ==
                   data["want"].shape else None}
    except Exception as e:  # reported, not raised: the other kernels still run
      out[name] = {"error": f"{type(e).__name__}: {e}"}
  return out


def _in_fresh_process(*args) -> dict:
  """The JSON a fresh process of this script prints (each holds the TPU in
  turn: libtpu lets one process have it)."""
  r = subprocess.run([sys.executable, os.path.abspath(__file__), *args], capture_output=True,
                     text=True, timeout=600)
  if r.returncode != 0:
    print(r.stderr[-4000:] or f"exit status {r.returncode}", file=sys.stderr)
    raise SystemExit(2 if r.returncode == 2 else 1)
  return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--dir", help="folder for the saved files (default: a temporary one)")
  ap.add_argument("--save", metavar="DIR", help=argparse.SUPPRESS)  # the writing process
  ap.add_argument("--load", metavar="DIR", help=argparse.SUPPRESS)  # the reading process
  ap.add_argument("--names", nargs="*", help=argparse.SUPPRESS)
  a = ap.parse_args(argv)
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  if a.load:
    print(json.dumps(load(a.load, a.names)))
    return 0
  if a.save:
    import jax
    platform = jax.devices()[0].platform
    if platform != "tpu":
      print(f"pallas_tpu_check: needs a TPU; this JAX {jax.__version__} runs on {platform}",
            file=sys.stderr)
      return 2
    print(json.dumps({"texts": save(a.save),
                      "where": f"JAX {jax.__version__} on {jax.devices()[0].device_kind}"}))
    return 0
  folder = a.dir or tempfile.mkdtemp(prefix="pallas_tpu_check_")
  os.makedirs(folder, exist_ok=True)
  wrote = _in_fresh_process("--save", folder)
  texts = wrote["texts"]
  got = _in_fresh_process("--load", folder, "--names", *texts)
  ok = True
  for name, text in texts.items():
    g = got.get(name, {"error": "not loaded"})
    good = "error" not in g and g["same_bits"] and g["reencodes"] and g["text"] == text
    ok &= good
    detail = g.get("error") or (f"same bits: {g['same_bits']}, prints alike: {g['text'] == text}, "
                                f"re-encodes: {g['reencodes']}, max |diff|: {g['max_abs_diff']}")
    print(f"{'ok  ' if good else 'FAIL'} {name}: {detail}")
  print(f"{wrote['where']}; files in {folder}")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
