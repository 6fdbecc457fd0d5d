"""The `jaxpr-proto` command line tool (also `python -m jaxpr_proto`).

Exit status: 0 on success, 1 when a check fails or a file cannot be read
(and for `diff`, when the programs differ), 2 for a usage error. Errors go to
stderr, one readable line each.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import re
import sys
import time
import traceback

import numpy as np

import jaxpr_proto
from jaxpr_proto import textforms
from jaxpr_proto.errors import Error, UnknownPrimitiveError

PROG = "jaxpr-proto"
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

# Files at least this large show a progress bar (when stderr is a terminal).
PROGRESS_MIN_BYTES = 1 << 20


class UsageError(Exception):
  """A bad argument that argparse could not catch (exit status 2)."""


class CheckFailed(Exception):
  """A failed check: the message goes to stderr (exit status 1)."""


# --- progress ------------------------------------------------------------------

class Progress:
  """A one-line progress bar on a terminal; silent on anything else.

  `stage(name)` moves on to the next of `total` stages; `update(done, of)`
  reports progress within the current stage.
  """

  def __init__(self, total: int, stream=None, *, enabled: bool | None = None,
               width: int = 30):
    self.stream = stream if stream is not None else sys.stderr
    if enabled is None:
      enabled = _isatty(self.stream)
    self.enabled = enabled
    self.total = max(total, 1)
    self.width = width
    self.done = 0
    self.name = ""
    self._last = 0.0
    self._shown = False

  def stage(self, name: str) -> None:
    if self.name:
      self.done += 1
    self.name = name
    self._draw(0.0, force=True)

  def update(self, done: int, of: int) -> None:
    self._draw(done / of if of else 1.0)

  def _draw(self, frac: float, force: bool = False) -> None:
    if not self.enabled:
      return
    now = time.monotonic()
    if not force and now - self._last < 0.1:
      return
    self._last = now
    overall = min((self.done + frac) / self.total, 1.0)
    n = int(overall * self.width)
    bar = "#" * n + "-" * (self.width - n)
    self.stream.write(f"\r{PROG}: [{bar}] {overall * 100:3.0f}% {self.name}\x1b[K")
    self.stream.flush()
    self._shown = True

  def close(self) -> None:
    if self.enabled and self._shown:
      self.stream.write("\r\x1b[K")
      self.stream.flush()
      self._shown = False

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _isatty(stream) -> bool:
  try:
    return bool(stream.isatty())
  except (AttributeError, ValueError):
    return False


def _progress_for(paths, stages: int) -> Progress:
  size = 0
  for p in paths:
    with contextlib.suppress(OSError):
      size += os.path.getsize(p)
  return Progress(stages, enabled=_isatty(sys.stderr) and size >= PROGRESS_MIN_BYTES)


# --- reading -------------------------------------------------------------------

def _read_module(path, progress: Progress | None = None):
  """Any form (by extension) -> Module, with `path` attached to errors."""
  try:
    if progress is not None:
      progress.stage(f"reading {os.path.basename(path)}")
    return textforms.read_module(path)
  except Error as e:
    e.file = path
    raise


def _decode(m, path, progress: Progress | None = None):
  try:
    if progress is not None:
      progress.stage(f"decoding {os.path.basename(path)}")
    return jaxpr_proto.decode(m)
  except Error as e:
    e.file = path
    raise


def _read_program(path, progress: Progress | None = None):
  """-> (Module, ClosedJaxpr)."""
  m = _read_module(path, progress)
  return m, _decode(m, path, progress)


def _out(text: str = "") -> None:
  sys.stdout.write(text + "\n")


def _err(text: str) -> None:
  sys.stderr.write(text + "\n")


def _avals(avals) -> str:
  from jaxpr_proto.jaxpr_diff import _aval_str
  return ", ".join(_aval_str(a) for a in avals) or "-"


def _ms(seconds: float) -> str:
  return f"{seconds * 1e3:.1f} ms"


# --- commands ------------------------------------------------------------------

def cmd_dump(args) -> int:
  with _progress_for([args.file], 2) as progress:
    m = _read_module(args.file, progress)
    if args.format == "jaxpr":
      cj = _decode(m, args.file, progress)
      progress.close()
      if args.source_info:
        text = cj.pretty_print(source_info=True, name_stack=True)
      else:
        text = str(cj)
    elif args.format == "txtpb":
      text = textforms.to_text(m).rstrip("\n")
    else:
      text = textforms.to_json(m).rstrip("\n")
  _out(text)
  return EXIT_OK


def cmd_convert(args) -> int:
  src_form = textforms.form_of(args.input, None)
  dst_form = textforms.form_of(args.output, None)
  for p, f in ((args.input, src_form), (args.output, dst_form)):
    if f is None:
      raise UsageError(f"{p}: unknown extension; use one of "
                       f"{', '.join(textforms.EXTENSIONS)}")
  with _progress_for([args.input], 2) as progress:
    m = _read_module(args.input, progress)
    progress.stage(f"writing {os.path.basename(args.output)}")
    size = textforms.write_module(m, args.output, dst_form)
  _out(f"{args.input} ({src_form}) -> {args.output} ({dst_form}, {size:,} bytes)")
  return EXIT_OK


def _eqn_counts(jaxpr):
  import jax.extend.core as jex_core
  from collections import Counter
  counts: Counter = Counter()

  def walk(j):
    n = 0
    for e in j.eqns:
      counts[e.primitive.name] += 1
      n += 1
      for sub in jex_core.jaxprs_in_params(e.params):
        n += walk(sub)
    return n

  total = walk(jaxpr)
  return len(jaxpr.eqns), total, counts


def cmd_load(args) -> int:
  import jax.extend.core as jex_core
  with _progress_for([args.file], 3) as progress:
    m, cj = _read_program(args.file, progress)
    progress.stage("checking")
    t0 = time.perf_counter()
    try:
      jex_core.check_jaxpr(cj.jaxpr)
      problem = None
    except Exception as e:  # JaxprTypeError and friends
      problem = f"{type(e).__name__}: {e}"
    t_check = time.perf_counter() - t0
  top, total, counts = _eqn_counts(cj.jaxpr)
  p = m.producer
  _out(f"file          {args.file} ({os.path.getsize(args.file):,} bytes)")
  _out(f"format        {m.format_version.major}.{m.format_version.minor}")
  _out(f"producer      jaxpr_proto {p.jaxpr_proto_version or '?'}, jax {p.jax_version or '?'}, "
       f"jaxlib {p.jaxlib_version or '?'}")
  _out(f"eqns          {top} top-level, {total} including sub-jaxprs")
  _out(f"in avals      {_avals(cj.in_avals)}")
  _out(f"out avals     {_avals(cj.out_avals)}")
  _out(f"consts        {len(cj.consts)}")
  _out("by primitive (including sub-jaxprs):")
  width = max((len(k) for k in counts), default=0)
  for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
    _out(f"  {k:<{width}}  {v:>6}")
  if problem is not None:
    _out("check_jaxpr   FAILED")
    raise CheckFailed(f"{args.file}: jax.extend.core.check_jaxpr: {problem}")
  _out(f"check_jaxpr   ok ({_ms(t_check)})")
  return EXIT_OK


def _run_checks(m, path) -> tuple[list[str], str]:
  """-> (problems as "path: message", what checked), by jaxpr_proto.checker."""
  from jaxpr_proto import checker
  try:
    report = checker.check(m)
  except Error as e:
    return [_describe(e)], "jaxpr_proto.checker"
  problems = [f"[{stage}] {where or '<module>'}: {msg}"
              for (where, msg), stage in zip(report.errors, report.error_stages)]
  if report.truncated:
    problems.append(f"... and {report.truncated} more")
  return problems, "jaxpr_proto.checker (" + ", ".join(report.stages) + ")"


def cmd_check(args) -> int:
  failed = False
  with _progress_for(args.files, len(args.files) * 2) as progress:
    for path in args.files:
      m = _read_module(path, progress)
      progress.stage(f"checking {os.path.basename(path)}")
      problems, what = _run_checks(m, path)
      progress.close()
      if problems:
        failed = True
        for p in problems:
          _err(f"{path}: {p}")
        _out(f"{path}: FAILED ({len(problems)} problem{'s' * (len(problems) != 1)})")
      else:
        _out(f"{path}: ok ({what})")
  return EXIT_FAIL if failed else EXIT_OK


def cmd_info(args) -> int:
  from jaxpr_proto import info
  with _progress_for([args.file], 2) as progress:
    m = _read_module(args.file, progress)
    progress.stage("measuring")
    n = len(m.jaxprs)
    data = info.module_info(m, progress=lambda k: progress.update(k, n))
  size = os.path.getsize(args.file)
  if args.json:
    _out(json.dumps({"file": args.file, "file_bytes": size, **data}, indent=2))
  else:
    _out(info.format_info(data, args.file, size))
  return EXIT_OK


# --- run -----------------------------------------------------------------------

def _load_inputs(paths, in_avals, arg_names):
  arrays, names = [], []
  for path in paths:
    if path.endswith(".npy"):
      arrays.append(np.load(path, allow_pickle=False))
      names.append(os.path.basename(path))
      continue
    if not path.endswith(".npz"):
      raise UsageError(f"{path}: inputs must be .npz or .npy files")
    with np.load(path, allow_pickle=False) as z:
      keys = list(z.files)
      if keys and all(re.fullmatch(r"arr_\d+", k) for k in keys):
        keys.sort(key=lambda k: int(k[4:]))
      elif arg_names and set(keys) == set(arg_names) and len(keys) == len(arg_names):
        keys = list(arg_names)
      arrays.extend(z[k] for k in keys)
      names.extend(keys)
  if len(arrays) != len(in_avals):
    raise CheckFailed(f"the program takes {len(in_avals)} inputs ({_avals(in_avals)}); "
                      f"got {len(arrays)}")
  for k, (x, a, name) in enumerate(zip(arrays, in_avals, names)):
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    if shape is None or tuple(x.shape) != tuple(shape) or x.dtype != dtype:
      got = f"{x.dtype}[{','.join(map(str, x.shape))}]"
      raise CheckFailed(f"input {k} ({name}): expected {_avals([a])}, got {got}")
  return arrays


def _random_inputs(in_avals, seed: int):
  import ml_dtypes
  rng = np.random.default_rng(seed)
  out = []
  for k, a in enumerate(in_avals):
    shape = getattr(a, "shape", None)
    try:
      dt = np.dtype(getattr(a, "dtype", None))
    except TypeError:  # PRNG keys and other extended dtypes
      dt = None
    if dt is None or shape is None or not all(isinstance(d, int) for d in shape):
      raise CheckFailed(f"input {k}: cannot make a random {_avals([a])}; use --inputs")
    if dt == np.bool_:
      x = rng.random(shape) < 0.5
    elif np.issubdtype(dt, np.complexfloating):
      x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    elif "int" in dt.name:  # int8..uint64, and ml_dtypes' int2/int4/uint2/uint4
      info = ml_dtypes.iinfo(dt)
      x = rng.integers(max(int(info.min), 0), min(int(info.max), 9) + 1, shape)
    elif "float" in dt.name and dt.itemsize > 0:
      x = rng.standard_normal(shape)
    else:
      raise CheckFailed(f"input {k}: cannot make a random {_avals([a])}; use --inputs")
    out.append(np.asarray(x).astype(dt))
  return out


def cmd_run(args) -> int:
  import jax
  import jax.extend.core as jex_core
  with _progress_for([args.file], 4) as progress:
    m, cj = _read_program(args.file, progress)
    in_avals = cj.in_avals
    progress.stage("preparing inputs")
    if args.inputs:
      names = None
      dbg = cj.jaxpr.debug_info
      if dbg is not None and dbg.arg_names is not None and all(dbg.arg_names):
        names = list(dbg.arg_names)
      inputs = _load_inputs(args.inputs, in_avals, names)
    elif args.random is not None:
      inputs = _random_inputs(in_avals, args.random)
    elif in_avals:
      raise UsageError(f"the program takes {len(in_avals)} inputs ({_avals(in_avals)}); "
                       "give --inputs FILE.npz or --random [SEED]")
    else:
      inputs = []
    progress.stage("compiling")
    device = jax.devices()[0]
    f = jax.jit(jex_core.jaxpr_as_fun(cj))
    t0 = time.perf_counter()
    compiled = f.lower(*inputs).compile()
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
  _out(f"inputs        {_avals(in_avals)}")
  _out(f"outputs       {_avals(cj.out_avals)}")
  _out(f"compile       {_ms(t_compile)}")
  run = f"{_ms(min(times))}" + (f" (best of {len(times)}, median "
                                f"{_ms(sorted(times)[len(times) // 2])})" if len(times) > 1 else "")
  _out(f"run           {run}")
  if args.outputs:
    from io import BytesIO
    buf = BytesIO()
    np.savez(buf, **{f"out_{k}": o for k, o in enumerate(outs)})
    jaxpr_proto.api.write_atomic(args.outputs, buf.getvalue())
    _out(f"wrote         {args.outputs} ({', '.join(f'out_{k}' for k in range(len(outs)))})")
  return EXIT_OK


# --- diff ----------------------------------------------------------------------

def cmd_diff(args) -> int:
  from jaxpr_proto import jaxpr_diff
  with _progress_for([args.a, args.b], 4) as progress:
    _, a = _read_program(args.a, progress)
    _, b = _read_program(args.b, progress)
  d = jaxpr_diff.diff(a, b)
  _out(jaxpr_diff.format_diff(d, args.a, args.b))
  return EXIT_OK if d.same else EXIT_FAIL


# --- trace ---------------------------------------------------------------------

_DTYPE_NAMES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bfloat16",
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn",
    "float6_e2m3fn", "float6_e3m2fn", "int2", "int4", "uint2", "uint4",
]


def _dtype_table() -> dict:
  import ml_dtypes
  from jaxpr_proto import _jax
  table = {}
  for name in _DTYPE_NAMES:
    try:
      dt = np.dtype(getattr(ml_dtypes, name, None) or name)
    except TypeError:
      continue
    table[name] = dt
    with contextlib.suppress(Exception):
      table[_jax.short_dtype_name(dt)] = dt
  return table


_SPEC = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*(?:\[([^\]]*)\])?\s*")


def parse_arg_specs(text: str):
  """'f32[8,3],i32[]' -> [jax.ShapeDtypeStruct]; symbolic dims share one scope."""
  import jax
  table = _dtype_table()
  specs, pos = [], 0
  text = text.strip()
  raw = []
  while pos < len(text):
    mt = _SPEC.match(text, pos)
    if not mt or mt.end() == pos:
      raise UsageError(f"bad --args at {text[pos:]!r}; expected e.g. 'f32[8,3],i32[]'")
    name, dims = mt.group(1), mt.group(2)
    if name not in table:
      raise UsageError(f"unknown dtype {name!r} in --args; known: "
                       + ", ".join(sorted(k for k in table if len(k) <= 5)))
    dims = [d.strip() for d in dims.split(",")] if dims and dims.strip() else []
    raw.append((table[name], dims, name))
    pos = mt.end()
    if pos < len(text):
      if text[pos] != ",":
        raise UsageError(f"bad --args at {text[pos:]!r}; separate arguments with ','")
      pos += 1
      if pos >= len(text):
        raise UsageError("bad --args: trailing ','")
  x64 = jax.config.jax_enable_x64
  scope = None
  for dt, dims, name in raw:
    if dt.itemsize == 8 and dt.kind in "iuf" or dt == np.complex128:
      if not x64:
        raise UsageError(f"--args {name}: 64-bit types need JAX_ENABLE_X64=1")
    if all(re.fullmatch(r"\d+", d) for d in dims):
      shape = tuple(int(d) for d in dims)
    else:
      if any(not d for d in dims):
        raise UsageError(f"bad --args shape [{','.join(dims)}]")
      from jax import export
      if scope is None:
        scope = export.SymbolicScope()
      try:
        shape = export.symbolic_shape(",".join(dims), scope=scope)
      except Exception as e:
        raise UsageError(f"bad symbolic shape [{','.join(dims)}]: {e}") from None
    specs.append(jax.ShapeDtypeStruct(shape, dt))
  return specs


def _import_function(target: str):
  if ":" not in target:
    raise UsageError(f"expected MODULE:FUNCTION, got {target!r}")
  mod_name, _, attr = target.rpartition(":")
  if not mod_name or not attr:
    raise UsageError(f"expected MODULE:FUNCTION, got {target!r}")
  if mod_name.endswith(".py") or os.sep in mod_name:
    if not os.path.isfile(mod_name):
      raise CheckFailed(f"{mod_name}: no such file")
    name = "_jaxpr_proto_trace_" + re.sub(r"\W", "_", os.path.basename(mod_name)[:-3])
    spec = importlib.util.spec_from_file_location(name, mod_name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
  else:
    if "" not in sys.path and os.getcwd() not in sys.path:
      sys.path.insert(0, os.getcwd())  # as `python -m` does
    try:
      module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
      raise CheckFailed(f"cannot import {mod_name!r}: {e}") from None
  obj = module
  for part in attr.split("."):
    try:
      obj = getattr(obj, part)
    except AttributeError:
      raise CheckFailed(f"{mod_name} has no attribute {attr!r}") from None
  if not callable(obj):
    raise CheckFailed(f"{target} is not callable")
  return obj


def cmd_trace(args) -> int:
  import jax
  out_form = textforms.form_of(args.output, None)
  if out_form is None:
    raise UsageError(f"{args.output}: unknown extension; use one of "
                     f"{', '.join(textforms.EXTENSIONS)}")
  specs = parse_arg_specs(args.args)
  fn = _import_function(args.target)
  t0 = time.perf_counter()
  cj = jax.make_jaxpr(fn)(*specs)
  t_trace = time.perf_counter() - t0
  t0 = time.perf_counter()
  m = jaxpr_proto.encode(cj, debug_info=not args.no_debug_info)
  t_encode = time.perf_counter() - t0
  size = textforms.write_module(m, args.output, out_form)
  top, total, _ = _eqn_counts(cj.jaxpr)
  _out(f"traced {args.target}({_avals(cj.in_avals)}) -> {_avals(cj.out_avals)}")
  _out(f"  {top} eqns ({total} including sub-jaxprs); make_jaxpr {_ms(t_trace)}, "
       f"encode {_ms(t_encode)}")
  _out(f"wrote {args.output} ({out_form}, {size:,} bytes)")
  return EXIT_OK


def cmd_demo(args) -> int:
  from jaxpr_proto import demo
  return EXIT_OK if demo.run(sys.stdout, keep=args.keep) else EXIT_FAIL


# --- the parser ------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(
      prog=PROG,
      description="Inspect, convert, check and run jaxpr-proto files (.jaxpb, and "
                  "their text forms .txtpb and .json).",
      epilog="Exit status: 0 success, 1 failed check or unreadable file "
             "(diff: the programs differ), 2 usage error.")
  ap.add_argument("--version", action="version",
                  version=f"%(prog)s {jaxpr_proto.__version__} (format "
                          f"{_format_version()})")
  ap.add_argument("--traceback", action="store_true",
                  help="show the Python traceback of unexpected errors")
  sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

  def add(name, func, help, **kw):
    p = sub.add_parser(name, help=help, description=help, **kw)
    p.set_defaults(func=func)
    return p

  p = add("dump", cmd_dump, "print a program: as JAX prints it, or as protobuf text or JSON")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--format", choices=("jaxpr", "txtpb", "json"), default="jaxpr",
                 help="jaxpr: str(closed_jaxpr) (the default); txtpb, json: the "
                      "whole Module message, undecoded")
  p.add_argument("--source-info", action="store_true",
                 help="with --format jaxpr: show source locations and name stacks")

  p = add("convert", cmd_convert, "convert between .jaxpb, .txtpb and .json, by extension "
          "(exact: the Module is unchanged)")
  p.add_argument("input", metavar="IN")
  p.add_argument("output", metavar="OUT")

  p = add("load", cmd_load, "decode a program, run jax's check_jaxpr, print a summary")
  p.add_argument("file", metavar="FILE")

  p = add("check", cmd_check, "check files (decode and type-check); exit 1 on problems")
  p.add_argument("files", metavar="FILE", nargs="+")

  p = add("info", cmd_info, "eqn counts, bytes by section, sharing, versions "
          "(reads the message only; nothing is decoded)")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--json", action="store_true", help="print JSON for machine use")

  p = add("run", cmd_run, "jit and run a program on the default device")
  p.add_argument("file", metavar="FILE")
  g = p.add_mutually_exclusive_group()
  g.add_argument("--inputs", nargs="+", metavar="IN",
                 help=".npz (arr_0, arr_1, ... or the argument names) and/or .npy files, "
                      "in argument order")
  g.add_argument("--random", type=int, nargs="?", const=0, metavar="SEED",
                 help="random inputs from a seeded generator (default seed 0)")
  p.add_argument("--outputs", metavar="OUT.npz", help="save the outputs (out_0, out_1, ...)")
  p.add_argument("--repeat", type=int, default=1, metavar="N",
                 help="run N times and report the best time")

  p = add("diff", cmd_diff, "structural diff of two programs: eqns added, removed, changed; "
          "exit 1 when they differ")
  p.add_argument("a", metavar="A")
  p.add_argument("b", metavar="B")

  p = add("trace", cmd_trace, "trace a Python function given abstract argument specs",
          epilog="example: jaxpr-proto trace mymodel:loss --args 'f32[8,3],i32[]' -o loss.jaxpb")
  p.add_argument("target", metavar="MODULE:FUNCTION",
                 help="an importable module (or a path to a .py file) and a function in it")
  p.add_argument("--args", required=True, metavar="SPECS",
                 help="comma-separated dtype[dims], such as 'f32[8,3],i32[]' (short names "
                      "as JAX prints them, or long ones like float32; a dim may be a "
                      "symbolic name such as b)")
  p.add_argument("-o", "--output", required=True, metavar="OUT",
                 help="the file to write: .jaxpb, .txtpb or .json")
  p.add_argument("--no-debug-info", action="store_true",
                 help="leave out source locations and argument names")

  p = add("demo", cmd_demo, "trace an MLP training step, save, load, and compare runs "
          "and gradients bitwise")
  p.add_argument("--keep", metavar="PATH", help="also keep the .jaxpb at PATH")
  return ap


def _format_version() -> str:
  from jaxpr_proto.versions import FORMAT_MAJOR, FORMAT_MINOR
  return f"{FORMAT_MAJOR}.{FORMAT_MINOR}"


def _describe(e: Error) -> str:
  """A jp.Error as one readable line."""
  msg = e.message if getattr(e, "message", None) else str(e)
  where = f" (at {e.path})" if getattr(e, "path", "") else ""
  hint = ""
  if isinstance(e, UnknownPrimitiveError):
    hint = "; register it in this process with jaxpr_proto.register_primitive(...)"
  return f"{msg}{where}{hint}"


def main(argv=None) -> int:
  parser = build_parser()
  try:
    args = parser.parse_args(argv)
  except SystemExit as e:  # --help, --version, or a usage error (2)
    return e.code if isinstance(e.code, int) else EXIT_USAGE
  sub = f"{PROG} {args.command}"
  try:
    return args.func(args)
  except UsageError as e:
    _err(f"{sub}: error: {e}")
    return EXIT_USAGE
  except CheckFailed as e:
    _err(f"{PROG}: {e}")
    return EXIT_FAIL
  except Error as e:
    file = getattr(e, "file", None)
    _err(f"{PROG}: error: {file + ': ' if file else ''}{_describe(e)}")
    return EXIT_FAIL
  except OSError as e:
    if isinstance(e, BrokenPipeError):  # such as `jaxpr-proto dump f | head`
      with contextlib.suppress(OSError):
        sys.stdout = open(os.devnull, "w")
      return EXIT_OK
    name = f"{e.filename}: " if e.filename else ""
    _err(f"{PROG}: error: {name}{e.strerror or e}")
    return EXIT_FAIL
  except KeyboardInterrupt:
    _err(f"{PROG}: interrupted")
    return 130
  except Exception as e:
    if args.traceback:
      traceback.print_exc()
    _err(f"{PROG}: error: {type(e).__name__}: {e}")
    return EXIT_FAIL


if __name__ == "__main__":
  raise SystemExit(main())
