"""`convert` to formats that are not jaxpr-proto's own, by the output's
extension: .mlir (StableHLO text) and .jaxexport (a serialized
`jax.export.Exported`), both by `jax.export`, and .onnx by `jax2onnx` (the
[onnx] extra). The program is read and decoded as every command reads it
(jaxpr_proto.cli.inputs); only the glue between it and those libraries is here.

`--poly` gives the inputs symbolic dims, as `jax.export.symbolic_shape`
spells them: one spec for every input ('b,...'), or one per flat input (the
order `jaxpr-proto load` lists them) separated by ';' ('b,3;b'). `_` keeps
an input's dim and `...` the rest of them. Without `--poly`, the program's
own avals are used, symbolic dims included (a file traced with
`jaxpr-proto trace --args 'f32[b,3]'`).
"""
from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys

from jaxpr_proto import function
from jaxpr_proto.cli.eqn_counts import eqn_counts
from jaxpr_proto.cli.exits import EXIT_OK, CheckFailed, UsageError
from jaxpr_proto.cli.inputs import read_program
from jaxpr_proto.cli.printing import avals_str, first_line
from jaxpr_proto.cli.progress import progress_for
from jaxpr_proto.wire import files

STABLEHLO, EXPORTED, ONNX = ".mlir", ".jaxexport", ".onnx"
EXTENSIONS = (STABLEHLO, EXPORTED, ONNX)

# The ONNX opset jax2onnx targets by default.
ONNX_OPSET = 23


def handles(path) -> bool:
  return os.path.splitext(os.fspath(path))[1].lower() in EXTENSIONS


def cmd_convert(args) -> int:
  ext = os.path.splitext(args.output)[1].lower()
  with progress_for([args.input], 3) as progress:
    program = read_program(args.input, progress).value
    progress.stage(f"converting to {ext}")
    if ext == ONNX:
      data = onnx_model(program, args.poly).SerializeToString()
      what = f"ONNX, opset {ONNX_OPSET}"
    else:
      with _export_failing_as(program):
        exp = export(program, args.poly)
        if ext == STABLEHLO:
          data, what = exp.mlir_module().encode(), "StableHLO text"
        else:
          data, what = bytes(exp.serialize()), "serialized jax.export.Exported"
    progress.stage(f"writing {os.path.basename(args.output)}")
    files.write_atomic(args.output, data)
  sys.stdout.write(f"{args.input} -> {args.output} ({what}, {len(data):,} bytes)\n")
  return EXIT_OK


# Primitives jax.export cannot serialize: host callbacks (what JAX says,
# "serialization of host_callbacks is not yet implemented", does not name them).
_NOT_EXPORTED = ("debug_callback", "io_callback", "pure_callback")


@contextlib.contextmanager
def _export_failing_as(program):
  """jax.export's failures in one line (exit 1), naming the eqns it cannot
  export where the program has them."""
  try:
    yield
  except (UsageError, CheckFailed):
    raise
  except Exception as e:
    counts = eqn_counts(_parts(program)[0])[2]
    calls = [name for name in _NOT_EXPORTED if name in counts]
    why = f" (the program calls {', '.join(calls)}: host callbacks)" if calls else ""
    raise CheckFailed(f"jax.export cannot export this program{why}: {type(e).__name__}: "
                      f"{first_line(e)}") from None


# --- the program as a function of its inputs -------------------------------------

def _parts(program):
  """-> (closed jaxpr, in_tree, out_tree): a Function's pytree signature, or
  flat positional inputs and a list of outputs for a plain ClosedJaxpr. A
  Function with static leaves takes its flat inputs (an export's arguments
  are arrays; the static leaves are in its program already)."""
  import jax
  if isinstance(program, function.Function):
    if not program.static_leaves:
      return program.closed_jaxpr, program.in_tree, program.out_tree
    cj, out_tree = program.closed_jaxpr, program.out_tree
  else:
    cj, out_tree = program, jax.tree.structure([0] * len(program.jaxpr.outvars))
  return cj, jax.tree.structure(((0,) * len(cj.jaxpr.invars), {})), out_tree


def input_specs(program, poly: str | None):
  """The flat inputs as jax.ShapeDtypeStructs: the program's avals, or with
  `poly` their shapes made symbolic (a UsageError when it does not fit)."""
  import jax
  cj = _parts(program)[0]
  for k, a in enumerate(cj.in_avals):
    if not hasattr(a, "shape") or not hasattr(a, "dtype"):  # (a token, a ref)
      raise CheckFailed(f"input {k} is {avals_str([a])}: only arrays can be converted")
  specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False))
           for a in cj.in_avals]
  if poly is None:
    return specs
  if not all(_static(s) for s in specs):
    raise UsageError(f"the program has symbolic dims already ({avals_str(cj.in_avals)}): "
                     "convert it without --poly")
  parts = [s.strip() for s in poly.split(";")]
  if len(parts) > 1 and len(parts) != len(specs):
    raise UsageError(f"--poly has {len(parts)} specs; the program takes {len(specs)} inputs "
                     f"({avals_str(cj.in_avals)}): give one for each, or one for all")
  shapes = _shapes(specs, parts, f"--poly {poly!r} does not fit the inputs "
                                 f"({avals_str(cj.in_avals)})")
  for k, (s, a) in enumerate(zip(shapes, specs)):
    # (jax.export takes any shape; these must be the program's, dims made symbolic)
    if len(s.shape) != len(a.shape) or any(
        isinstance(d, int) and d != e for d, e in zip(s.shape, a.shape)):
      raise UsageError(f"--poly {poly!r} does not fit the inputs ({avals_str(cj.in_avals)}): "
                       f"input {k} would be {_dims(s.shape)}, not {_dims(a.shape)}")
  _check_other_sizes(cj, specs, shapes, poly)
  return [jax.ShapeDtypeStruct(s.shape, a.dtype, weak_type=a.weak_type)
          for s, a in zip(shapes, specs)]


def _shapes(specs, parts, problem):
  """jax.export.symbolic_args_specs: one spec for all inputs, or one each."""
  import jax
  try:
    return jax.export.symbolic_args_specs(specs, parts if len(parts) > 1 else parts[0])
  except Exception as e:  # (a bad spec, or one whose rank or dims do not fit)
    raise UsageError(f"{problem}: {first_line(e)}") from None


# The names in a shape spec that are functions, not dim vars.
_SPEC_FUNCTIONS = {"mod", "floordiv", "max", "min", "non_negative"}


def _check_other_sizes(cj, specs, shapes, poly):
  """The eqns of a program traced with concrete shapes hold its sizes (a
  reshape to [24] of an [8,3] input). With symbolic inputs, jax.export keeps
  such a size where it need not compare it, and the export would only run
  for the traced size: lowering the program with every dim var at another size
  finds them."""
  import jax
  from jax.extend.core import jaxpr_as_fun
  size = 2 + max((d for s in specs for d in s.shape), default=0)  # (no traced size)

  def at(d):  # 2*b -> 2*10 -> 20, by jax.export's own parser
    if isinstance(d, int):
      return d
    text = re.sub(r"[A-Za-z_]\w*", lambda m: m[0] if m[0] in _SPEC_FUNCTIONS else str(size),
                  str(d))
    return jax.export.symbolic_shape(text)[0]
  try:
    # (lowered: the MLIR verifier checks what JAX's shape rules leave out, reshapes)
    jax.jit(jaxpr_as_fun(cj)).lower(*(jax.ShapeDtypeStruct(tuple(map(at, s.shape)), s.dtype)
                                      for s in shapes))
  except Exception as e:
    raise UsageError(f"--poly {poly!r} does not fit the program, whose eqns fix the sizes "
                     f"of its inputs (with the dims at {size}: {first_line(e)}); trace it "
                     "with symbolic dims instead: jaxpr-proto trace --args 'f32[b,3]'") from None


def _dims(shape) -> str:
  return "[" + ",".join(map(str, shape)) + "]"


def _signature(cj, in_tree):
  """A Python signature with the argument names the program was traced with
  (so that jax.export labels the inputs as the original did), or None where
  the stored names do not say them."""
  import jax
  dbg = cj.jaxpr.debug_info
  names = list(dbg.arg_names) if dbg is not None and dbg.arg_names else []
  if len(names) != len(cj.jaxpr.invars) or not all(names):
    return None
  args_tree, kwargs_tree = jax.tree_util.treedef_children(in_tree)
  params, k = [], 0
  for sub in jax.tree_util.treedef_children(args_tree):
    leaves = names[k:k + sub.num_leaves]
    k += sub.num_leaves
    heads = {re.match(r"[A-Za-z_]\w*|", n)[0] for n in leaves}  # params['w'] -> params
    if len(heads) != 1 or "" in heads:  # (an argument without leaves has no name)
      return None
    params.append(inspect.Parameter(heads.pop(), inspect.Parameter.POSITIONAL_OR_KEYWORD))
  kw = kwargs_tree.node_data()
  for key in (kw[1] if kw else ()):
    if not (isinstance(key, str) and key.isidentifier()):
      return None
    params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY))
  try:
    return inspect.Signature(params)
  except ValueError:  # (the same name twice)
    return None


def as_function(program):
  """The program as a Python function of its (pytree) arguments, as the
  Function was called (a plain ClosedJaxpr: of its flat inputs, returning a
  list), labelled with the original argument names where they are known."""
  import jax
  from jax.extend.core import jaxpr_as_fun
  cj, in_tree, out_tree = _parts(program)
  flat = jaxpr_as_fun(cj)

  def fun(*args, **kwargs):
    return jax.tree.unflatten(out_tree, flat(*jax.tree.leaves((args, kwargs))))

  fun.__name__ = getattr(program, "name", "") or "main"
  sig = _signature(cj, in_tree)
  if sig is not None:
    fun.__signature__ = sig
  return fun, in_tree


# --- jax.export ------------------------------------------------------------------

def export(program, poly: str | None = None):
  """The loaded program -> jax.export.Exported, for the default platform."""
  import jax
  fun, in_tree = as_function(program)
  args, kwargs = jax.tree.unflatten(in_tree, input_specs(program, poly))
  try:
    return jax.export.export(jax.jit(fun))(*args, **kwargs)
  except Exception as e:
    if poly is None:
      raise
    # The eqns fix a dim that --poly makes symbolic (a reshape to 8x3): the
    # program must be traced with symbolic dims instead.
    raise UsageError(f"--poly {poly!r} does not fit the program: {first_line(e)} (trace "
                     "it with symbolic dims instead: jaxpr-proto trace --args "
                     "'f32[b,3]')") from None


# --- ONNX ------------------------------------------------------------------------

def onnx_model(program, poly: str | None = None):
  """The loaded program -> onnx.ModelProto by jax2onnx, checked by
  onnx.checker. Inputs and outputs are the flat ones, named after the
  original arguments where they are known."""
  try:
    import jax2onnx
    import onnx
  except ImportError as e:
    raise CheckFailed(f"converting to ONNX needs {e.name}: "
                      "pip install 'jaxpr-proto[onnx]'") from None
  from jax.extend.core import jaxpr_as_fun
  cj = _parts(program)[0]
  # (jax2onnx makes a symbolic dim a dim_param; given by its name, a str, it
  # would be of another symbolic scope than the program's own dims)
  inputs = input_specs(program, poly)
  dtypes = {str(getattr(a, "dtype", "")) for a in (*cj.in_avals, *cj.out_avals)}
  kw = {}
  names = _input_names(cj)
  if names:
    kw["input_names"] = names
  try:
    model = jax2onnx.to_onnx(jaxpr_as_fun(cj), inputs=inputs, opset=ONNX_OPSET,
                             enable_double_precision=bool({"float64", "complex128"} & dtypes),
                             model_name=getattr(program, "name", "") or "main", **kw)
  except Exception as e:
    raise CheckFailed(f"ONNX: {onnx_problem(e, cj)}") from None
  try:
    onnx.checker.check_model(model, full_check=True)
  except Exception as e:
    raise CheckFailed(f"ONNX: jax2onnx made a model that onnx.checker refuses: "
                      f"{first_line(e)}") from None
  return model


def _static(s) -> bool:
  return all(isinstance(d, int) for d in s.shape)


def _input_names(cj):
  dbg = cj.jaxpr.debug_info
  names = list(dbg.arg_names) if dbg is not None and dbg.arg_names else []
  if len(names) != len(cj.jaxpr.invars) or not all(names) or len(set(names)) != len(names):
    return None
  return names


def onnx_problem(e: Exception, cj) -> str:
  """What jax2onnx's exception says, in one line; the primitive by name where
  it could not convert one."""
  from importlib.metadata import version
  text = first_line(e)
  known = eqn_counts(cj)[2]
  for name in sorted(known, key=len, reverse=True):
    if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text) and "primitive" in text.lower():
      why = "" if "No plugins registered" in text else f": {text}"
      return (f"jax2onnx {version('jax2onnx')} cannot convert the primitive "
              f"{name!r} ({known[name]} eqn{'s' * (known[name] != 1)}){why}")
  return f"jax2onnx failed: {type(e).__name__}: {text}"


def run_onnx(model, inputs) -> list:
  """Runs an ONNX model with onnxruntime (CPU) on flat numpy inputs."""
  import numpy as np
  import onnxruntime as ort
  opts = ort.SessionOptions()
  opts.log_severity_level = 3  # (errors only)
  sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
  feed = {i.name: np.asarray(x) for i, x in zip(sess.get_inputs(), inputs)}
  return sess.run(None, feed)
