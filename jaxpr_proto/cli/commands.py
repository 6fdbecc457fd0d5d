"""The `jaxpr-proto` command line tool (also `python -m jaxpr_proto`): the
`cmd_*` functions, the argument parser and `main`.

Exit status: 0 on success, 1 when a check fails or a file cannot be read
(and for `diff`, when the programs differ), 2 for a usage error. Errors go to
stderr, one readable line each; a .jaxpr text that does not parse is named
as compilers name a place, `path:line:column: message`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback

import jaxpr_proto
from jaxpr_proto.check import checker
from jaxpr_proto.cli import jaxpr_diff, run, view
from jaxpr_proto.cli.argspec import parse_arg_specs
from jaxpr_proto.cli.eqn_counts import eqn_counts
from jaxpr_proto.cli.exits import (EXIT_FAIL, EXIT_OK, EXIT_USAGE, PROG, CheckFailed,
                                   UsageError)
from jaxpr_proto.cli.import_target import import_function, import_modules
from jaxpr_proto.cli.inputs import decode, naming_file, read_module, read_program
from jaxpr_proto.cli.printing import avals_str, first_line, ms
from jaxpr_proto.cli.progress import progress_for
from jaxpr_proto.errors import Error, UnknownPrimitiveError
from jaxpr_proto.wire import external, files, info, jaxpr_text
from jaxpr_proto.wire.versions import FORMAT_MAJOR, FORMAT_MINOR


def _out(text: str = "") -> None:
  sys.stdout.write(text + "\n")


def _err(text: str) -> None:
  sys.stdout.flush()  # (what stdout holds came first: into one pipe, it stays first)
  sys.stderr.write(text + "\n")


def _form_of(path) -> str:
  """The form a path's extension names (by jaxpr_proto.wire.files.form_of)."""
  form = files.form_of(path, None)
  if form is None:
    raise UsageError(f"{path}: unknown extension; use one of "
                     f"{', '.join(files.EXTENSIONS)}")
  return form


# --- commands ------------------------------------------------------------------

def cmd_dump(args) -> int:
  with progress_for([args.file], 2) as progress:
    m = read_module(args.file, progress)
    if args.format == "jaxpr":
      program = decode(m, args.file, progress, unresolved="placeholder")
      progress.close()
      cj = program.closed_jaxpr
      if args.source_info:
        text = cj.pretty_print(source_info=True, name_stack=True)
      else:
        text = str(cj)
      text = "\n".join(_signature_lines(program) + [text])
    elif args.format == "text":
      with naming_file(args.file):  # (a Module that no text holds)
        text = jaxpr_text.format_module(m, debug_info=args.source_info).rstrip("\n")
    elif args.format == "txtpb":
      text = files.to_text(m).rstrip("\n")
    else:
      text = files.to_json(m).rstrip("\n")
  _out(text)
  return EXIT_OK


def _signature_lines(program, head: str = "function ", indent: str = "  ") -> list[str]:
  """A Function's signature as dump and load print it, before the jaxpr
  (nothing for a plain ClosedJaxpr)."""
  sig = program.signature
  if sig is not None:
    return sig.lines(head, indent)
  if program.unread_signature:
    return [f"{head}{program.module.function.name} (signature not shown: "
            f"{program.unread_signature}; --import the module that defines it)"]
  return []


def _signature_for_diff(program) -> list[str]:
  sig = program.signature
  if sig is not None:
    return sig.diff_lines()
  return _signature_lines(program)


def cmd_convert(args) -> int:
  from jaxpr_proto.cli import convert
  if convert.handles(args.output):  # StableHLO, jax.export, ONNX: by jax.export and jax2onnx
    return convert.cmd_convert(args)
  if args.poly is not None:
    raise UsageError("--poly is for .mlir, .jaxexport and .onnx outputs")
  src_form, dst_form = _form_of(args.input), _form_of(args.output)
  with progress_for([args.input], 2) as progress:
    m = read_module(args.input, progress)
    progress.stage(f"writing {os.path.basename(args.output)}")
    with naming_file(args.input):  # (a Module that no .jaxpr text holds)
      size = files.write_module(m, args.output, dst_form)
    copied = _copy_data_files(m, args.input, args.output)
  _out(f"{args.input} ({src_form}) -> {args.output} ({dst_form}, {size:,} bytes)")
  for name in copied:
    _out(f"  with its data file {name}")
  return EXIT_OK


def _copy_data_files(m, src, dst) -> list[str]:
  """The data files of `m`'s external arrays, copied beside `dst` when it is
  in another folder (the locations stay as they are: relative names)."""
  src_dir, dst_dir = (os.path.dirname(os.path.abspath(p)) for p in (src, dst))
  locations = info.external_data(m)
  if src_dir == dst_dir or not locations:
    return []
  import shutil
  for loc in locations:
    external.check_location(loc, "")
    os.makedirs(os.path.dirname(os.path.join(dst_dir, loc)), exist_ok=True)
    shutil.copyfile(os.path.join(src_dir, loc), os.path.join(dst_dir, loc), follow_symlinks=False)
  return sorted(locations)


def cmd_load(args) -> int:
  import jax.extend.core as jex_core
  with progress_for([args.file], 3) as progress:
    program = read_program(args.file, progress)
    m, cj = program.module, program.closed_jaxpr
    progress.stage("checking")
    t0 = time.perf_counter()
    try:
      jex_core.check_jaxpr(cj.jaxpr)
      problem = None
    except Exception as e:  # JaxprTypeError and friends
      problem = f"{type(e).__name__}: {e}"
    t_check = time.perf_counter() - t0
  top, total, counts = eqn_counts(cj)
  p = m.producer
  _out(f"file          {args.file} ({os.path.getsize(args.file):,} bytes)")
  _out(f"format        {m.format_version.major}.{m.format_version.minor}")
  _out(f"producer      jaxpr_proto {p.jaxpr_proto_version or '?'}, jax {p.jax_version or '?'}, "
       f"jaxlib {p.jaxlib_version or '?'}")
  for line in _signature_lines(program, "function      ", " " * 14):
    _out(line)
  _out(f"eqns          {top} top-level, {total} including sub-jaxprs")
  _out(f"in avals      {avals_str(cj.in_avals)}")
  _out(f"out avals     {avals_str(cj.out_avals)}")
  _out(f"consts        {len(cj.consts)}")
  _out("by primitive (including sub-jaxprs):")
  width = max((len(k) for k in counts), default=0)
  for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
    _out(f"  {k:<{width}}  {v:>6}")
  if problem is not None:
    _out("check_jaxpr   FAILED")
    raise CheckFailed(f"{args.file}: jax.extend.core.check_jaxpr: {problem}")
  _out(f"check_jaxpr   ok ({ms(t_check)})")
  return EXIT_OK


def _run_checks(m, path, structure: bool = False) -> tuple[list[str], str]:
  """-> (problems, one line each, and what checked), by jaxpr_proto.check.checker;
  external arrays are read from the folder of `path`. With `structure`,
  primitives and callbacks this process lacks are taken as placeholders."""
  try:
    report = checker.check(m, source=external.Folder.beside(path), placeholders=structure)
  except Error as e:
    return [_describe(e)], "jaxpr_proto.check.checker"
  problems = [f"[{stage}] {where or '<module>'}: {msg}"
              for (where, msg), stage in zip(report.errors, report.error_stages)]
  if report.truncated:
    problems.append(f"... and {report.truncated} more")
  return problems, "jaxpr_proto.check.checker (" + ", ".join(report.stages) + ")"


def cmd_check(args) -> int:
  failed = False
  with progress_for(args.files, len(args.files) * 2) as progress:
    for path in args.files:  # every file is reported, whatever the ones before it gave
      try:
        m = read_module(path, progress)
      except jaxpr_text.TextError as e:  # a failed check: the text does not parse
        progress.close()
        _err(_located(e, path))
        _out(f"{path}: FAILED (1 problem: the text does not parse)")
        failed = True
        continue
      except (Error, OSError) as e:  # as `main` reports it, and on to the next file
        progress.close()
        why = _located(e, path) if isinstance(e, Error) else f"{path}: {e.strerror or e}"
        _err(f"{PROG}: error: {why}")
        _out(f"{path}: FAILED (not read)")
        failed = True
        continue
      progress.stage(f"checking {os.path.basename(path)}")
      problems, what = _run_checks(m, path, args.structure)
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
  with progress_for([args.file], 2) as progress:
    m = read_module(args.file, progress)
    progress.stage("measuring")
    n = len(m.jaxprs)
    data = info.module_info(m, progress=lambda k: progress.update(k, n))
  size = os.path.getsize(args.file)
  if args.json:
    _out(json.dumps({"file": args.file, "file_bytes": size, **data}, indent=2))
  else:
    _out(info.format_info(data, args.file, size))
  return EXIT_OK


# --- diff ----------------------------------------------------------------------

def cmd_diff(args) -> int:
  with progress_for([args.a, args.b], 4) as progress:
    a = read_program(args.a, progress, unresolved="placeholder")
    b = read_program(args.b, progress, unresolved="placeholder")
  d = jaxpr_diff.diff(a.closed_jaxpr, b.closed_jaxpr,
                      texts=(jaxpr_diff.text_of(a.module), jaxpr_diff.text_of(b.module)))
  d.signature = jaxpr_diff.diff_lines(_signature_for_diff(a), _signature_for_diff(b))
  _out(jaxpr_diff.format_diff(d, args.a, args.b))
  return EXIT_OK if d.same else EXIT_FAIL


# --- trace ---------------------------------------------------------------------

def cmd_trace(args) -> int:
  """Writes a jp.Function: the file keeps the argument names and the
  outputs' structure, which `run` writes them by."""
  out_form = _form_of(args.output)
  specs = parse_arg_specs(args.args)
  fn = import_function(args.target)
  t0 = time.perf_counter()
  f = jaxpr_proto.trace(fn)(*specs)
  t_trace = time.perf_counter() - t0
  t0 = time.perf_counter()
  size = jaxpr_proto.api.save_as(f, args.output, out_form, debug_info=not args.no_debug_info)
  t_encode = time.perf_counter() - t0
  cj = f.closed_jaxpr
  top, total, _ = eqn_counts(cj)
  _out(f"traced {args.target}({avals_str(cj.in_avals)}) -> {avals_str(cj.out_avals)}")
  _out(f"  {top} eqns ({total} including sub-jaxprs); trace {ms(t_trace)}, "
       f"encode and write {ms(t_encode)}")
  _out(f"wrote {args.output} ({out_form}, {size:,} bytes)")
  return EXIT_OK


def cmd_demo(args) -> int:
  from jaxpr_proto.cli import demo  # builds its example with jax.numpy; only `demo` needs it
  return EXIT_OK if demo.run(sys.stdout, keep=args.keep) else EXIT_FAIL


# --- the parser ------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(
      prog=PROG,
      description="Inspect, convert, check and run jaxpr-proto files (.jaxpb, the "
                  "jaxpr text .jaxpr, and protobuf's text forms .txtpb and .json).",
      epilog="Exit status: 0 success, 1 failed check or unreadable file "
             "(diff: the programs differ), 2 usage error.")
  ap.add_argument("--version", action="version",
                  version=f"%(prog)s {jaxpr_proto.__version__} (format "
                          f"{FORMAT_MAJOR}.{FORMAT_MINOR})")
  ap.add_argument("--traceback", action="store_true",
                  help="show the Python traceback of unexpected errors")
  sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

  def add(name, func, help, **kw):
    p = sub.add_parser(name, help=help, description=help, **kw)
    p.set_defaults(func=func)
    return p

  def imports(p):
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (a name, or a .py file), so that what it "
                        "registers (jp.register_callback, jp.register_primitive, "
                        "jp.register_pytree_node) binds the names the file uses; repeatable")

  p = add("dump", cmd_dump, "print a program: as JAX prints it, as its jaxpr text, or as "
          "protobuf text or JSON")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--format", choices=("jaxpr", "text", "txtpb", "json"), default="jaxpr",
                 help="jaxpr: str(closed_jaxpr) (the default); text: the jaxpr text "
                      "(jp.format, docs/text_syntax.md), which parses back; txtpb, json: "
                      "the whole Module message. text, txtpb and json are undecoded")
  p.add_argument("--source-info", action="store_true",
                 help="with --format jaxpr or text: show source locations and name stacks "
                      "(text: as a .jaxpr file holds them)")
  imports(p)

  p = add("convert", cmd_convert, "convert between .jaxpb, .jaxpr, .txtpb and .json, by "
          "extension (exact: the Module is unchanged); or to .mlir (StableHLO text), .jaxexport "
          "(serialized jax.export.Exported) or .onnx (by jax2onnx)")
  p.add_argument("input", metavar="IN")
  p.add_argument("output", metavar="OUT")
  p.add_argument("--poly", metavar="SPECS",
                 help="for .mlir, .jaxexport, .onnx: symbolic input dims as jax.export "
                      "spells them, one spec for all inputs ('b,...') or one per flat "
                      "input separated by ';' ('b,3;b'); _ keeps a dim, ... the rest")
  imports(p)

  p = add("load", cmd_load, "decode a program, run jax's check_jaxpr, print a summary")
  p.add_argument("file", metavar="FILE")
  imports(p)

  p = add("check", cmd_check, "check files (decode and type-check); exit 1 on problems")
  p.add_argument("files", metavar="FILE", nargs="+")
  p.add_argument("--structure", action="store_true",
                 help="take primitives and callbacks this process lacks as placeholders: "
                      "check the rest (structure, params), not JAX's types")
  imports(p)

  p = add("info", cmd_info, "eqn counts, bytes by section, sharing, versions "
          "(reads the message only; nothing is decoded)")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--json", action="store_true", help="print JSON for machine use")

  p = add("run", run.cmd_run, "jit and run a program on the default device")
  run.add_arguments(p)
  imports(p)

  p = add("diff", cmd_diff, "structural diff of two programs: eqns added, removed, changed; "
          "exit 1 when they differ")
  p.add_argument("a", metavar="A")
  p.add_argument("b", metavar="B")
  imports(p)

  p = add("trace", cmd_trace, "trace a Python function given abstract argument specs, and "
          "save it as a jp.Function (jp.trace)",
          epilog="example: jaxpr-proto trace mymodel:loss --args 'f32[8,3],i32[]' -o loss.jaxpb")
  p.add_argument("target", metavar="MODULE:FUNCTION",
                 help="an importable module (or a path to a .py file) and a function in it")
  p.add_argument("--args", required=True, metavar="SPECS",
                 help="comma-separated dtype[dims], such as 'f32[8,3],i32[]' (short names "
                      "as JAX prints them, or long ones like float32; a dim may be a "
                      "symbolic name such as b)")
  p.add_argument("-o", "--output", required=True, metavar="OUT",
                 help="the file to write: .jaxpb, .jaxpr, .txtpb or .json")
  p.add_argument("--no-debug-info", action="store_true",
                 help="leave out source locations and argument names")

  p = add("view", view.cmd_view, "write one self-contained HTML page that shows a program "
          "as an interactive graph")
  view.add_arguments(p)

  p = add("demo", cmd_demo, "trace an MLP training step, save, load, and compare runs "
          "and gradients bitwise")
  p.add_argument("--keep", metavar="PATH", help="also keep the .jaxpb at PATH")
  return ap


# What the command line can do about an error: (applies(error), hint).
_HINTS = (
    (lambda e: isinstance(e, UnknownPrimitiveError),
     "; here, --import a module that does so"),
    (lambda e: "not registered in this process" in e.message or "not known in this process"
     in e.message, "; here, --import the module that registers it"),
    (lambda e: "saved as pickled code" in e.message,
     "; jaxpr-proto never unpickles code: dump, diff, view and check --structure show the file"),
)


def _describe(e: Error) -> str:
  """A jp.Error as one readable line."""
  msg = e.message if getattr(e, "message", None) else str(e)
  where = f" (at {e.path})" if getattr(e, "path", "") else ""
  hint = next((h for applies, h in _HINTS if applies(e)), "")
  return " ".join(f"{msg}{where}{hint}".split("\n"))


def _located(e: Error, file: str | None) -> str:
  """A jp.Error of a file as one line: `file: message (at path)`, and a
  .jaxpr text's error where it is, `file:line:column: message`."""
  if isinstance(e, jaxpr_text.TextError) and e.line and file:
    return " ".join(f"{file}:{e.line}:{e.column}: {e.message}".split("\n"))
  return f"{file}: {_describe(e)}" if file else _describe(e)


def main(argv=None) -> int:
  parser = build_parser()
  try:
    args = parser.parse_args(argv)
  except SystemExit as e:  # --help, --version, or a usage error (2)
    return e.code if isinstance(e.code, int) else EXIT_USAGE
  sub = f"{PROG} {args.command}"
  try:
    import_modules(getattr(args, "imports", ()))
    return args.func(args)
  except UsageError as e:
    _err(f"{sub}: error: {e}")
    return EXIT_USAGE
  except CheckFailed as e:
    _err(f"{PROG}: {e}")
    return EXIT_FAIL
  except Error as e:
    _err(f"{PROG}: error: {_located(e, getattr(e, 'file', None))}")
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
    _err(f"{PROG}: error: {type(e).__name__}: {first_line(e)}")
    return EXIT_FAIL
