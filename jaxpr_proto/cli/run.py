"""`jaxpr-proto run`: jit a file's program and run it on the default device,
with inputs from .npz/.npy files or random ones. A jp.Function takes its
inputs by argument path (`p/w`, `batch/x`) and writes its outputs by path;
a plain ClosedJaxpr by argument name and as out_0, out_1, ..."""
from __future__ import annotations

import sys
import time

import numpy as np

from jaxpr_proto.check import bounds
from jaxpr_proto.cli.arrays import load_inputs, random_inputs, write_outputs
from jaxpr_proto.cli.exits import EXIT_OK, CheckFailed, UsageError
from jaxpr_proto.cli.inputs import read_program
from jaxpr_proto.cli.printing import avals_str, ms
from jaxpr_proto.cli.progress import progress_for


def add_arguments(p) -> None:
  p.add_argument("file", metavar="FILE")
  g = p.add_mutually_exclusive_group()
  g.add_argument("--inputs", nargs="+", metavar="IN",
                 help=".npz and/or .npy files: arrays named by argument path (a saved "
                      "jp.Function: p/w, batch/x, as `dump` lists them) or argument name, "
                      "or arr_0, arr_1, ... and .npy files in argument order")
  g.add_argument("--random", type=int, nargs="?", const=0, metavar="SEED",
                 help="random inputs from a seeded generator (default seed 0)")
  p.add_argument("--outputs", metavar="OUT.npz",
                 help="save the outputs: by path for a jp.Function (as `dump` lists them), "
                      "else out_0, out_1, ...")
  p.add_argument("--repeat", type=int, default=1, metavar="N",
                 help="run N times and report the best time")


def _out(text: str) -> None:
  sys.stdout.write(text + "\n")


def names(program) -> tuple[list[str] | None, dict, list[str]]:
  """(input names, static leaves by path, output names) of a Program: a
  Function's paths; a ClosedJaxpr's argument names (where its debug info has
  them, each its own) and out_0, out_1, ..."""
  sig = program.signature
  if sig is not None:
    return sig.input_paths, dict(sig.static), sig.output_paths
  cj = program.closed_jaxpr
  dbg = cj.jaxpr.debug_info
  arg_names = list(dbg.arg_names) if dbg is not None and dbg.arg_names else []
  if len(arg_names) != len(cj.in_avals) or not all(arg_names):
    arg_names = None
  return arg_names, {}, [f"out_{k}" for k in range(len(cj.out_avals))]


def cmd_run(args) -> int:
  import jax
  from jaxpr_proto import compat
  with progress_for([args.file], 4) as progress:
    program = read_program(args.file, progress)
    cj = program.closed_jaxpr
    in_avals = cj.in_avals
    in_names, static, out_names = names(program)
    progress.stage("preparing inputs")
    if args.inputs:
      inputs = load_inputs(args.inputs, in_avals, in_names, static)
    elif args.random is not None:
      inputs = random_inputs(in_avals, args.random)
    elif in_avals:
      raise UsageError(f"the program takes {len(in_avals)} inputs ({avals_str(in_avals)}); "
                       "give --inputs FILE.npz or --random [SEED]")
    else:
      inputs = []
    progress.stage("compiling")
    device = jax.devices()[0]
    f = jax.jit(compat.jaxpr_as_fun(cj))
    t0 = time.perf_counter()
    lowered = f.lower(*inputs)
    if device.platform == "cpu":  # (measured there: docs/limits.md)
      chain = bounds.compiled_chain(lowered.compiler_ir("stablehlo"))
      if chain > bounds.XLA_CPU_CHAIN:
        raise CheckFailed(
            f"{args.file}: not compiled: the program has a chain of {chain:,} dependent "
            f"ops, and XLA's CPU compiler crashes (a stack overflow) on chains past about "
            f"21,000, so `run` compiles chains of at most {bounds.XLA_CPU_CHAIN:,}; the file "
            f"itself is sound (see docs/limits.md)")
    compiled = lowered.compile()
    t_compile = time.perf_counter() - t0
    progress.stage("running")
    times = []
    outs = None
    for _ in range(max(args.repeat, 1)):
      t0 = time.perf_counter()
      outs = jax.block_until_ready(compiled(*inputs))
      times.append(time.perf_counter() - t0)
  outs = [np.asarray(o) for o in outs]
  _out(f"device        {device.platform}:{device.id} ({device.device_kind})")
  _out(f"inputs        {avals_str(in_avals)}")
  _out(f"outputs       {avals_str(cj.out_avals)}")
  _out(f"compile       {ms(t_compile)}")
  run = f"{ms(min(times))}" + (f" (best of {len(times)}, median "
                               f"{ms(sorted(times)[len(times) // 2])})" if len(times) > 1 else "")
  _out(f"run           {run}")
  if args.outputs:
    write_outputs(args.outputs, out_names, outs)
    _out(f"wrote         {args.outputs} ({', '.join(out_names)})")
  return EXIT_OK
