"""Every command on every kind of file: the cases are COMMANDS x FILE_KINDS
(tests/cli_kinds.py), so a new command or a new kind is covered at once.

Each command either does its job, checked by what it printed or wrote
(the dump holds the kind's primitives and signature, run's outputs equal the
original function's bit for bit, a converted file reads back, ...), or, where
the kind says it cannot (running a primitive this process lacks, exporting a
host callback), exits 1 with one line on stderr and no traceback. The CLI
runs in this process (`main(argv)`); what needs a fresh process (binding
callbacks only by --import, a pytree library not imported) is at the end.
"""
from __future__ import annotations

import base64
import dataclasses
import importlib.util
import json
import os
import textwrap

import jax
import numpy as np
import pytest

import jaxpr_proto as jp
from jaxpr_proto.cli import commands as cli
from jaxpr_proto.cli.printing import without_addresses
from jaxpr_proto.wire import files
from tests import cli_kinds
from tests.cli_kinds import FILE_KINDS, KINDS
from tests.helpers import run_json

JAX_MINOR = tuple(int(p) for p in jax.__version__.split(".")[:2])

def _available(kind) -> bool:
  return kind.needs is None or importlib.util.find_spec(kind.needs) is not None


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  d = tmp_path_factory.mktemp("kinds")
  cli_kinds.build_all(str(d), [k for k in FILE_KINDS if _available(k)])
  return str(d)


@dataclasses.dataclass
class Ran:
  code: int
  out: str
  err: str


@dataclasses.dataclass
class Case:
  """One command on one kind: its file, the folder of files, a scratch
  folder, and the CLI to call."""
  kind: cli_kinds.Kind
  dir: str
  tmp: str
  capsys: object

  @property
  def file(self) -> str:
    return self.path(self.kind.name + self.kind.ext)

  def path(self, name: str) -> str:
    return os.path.join(self.dir, name)

  def imports(self) -> list[str]:
    return [a for m in self.kind.imports for a in ("--import", m.format(dir=self.dir))]

  def cli(self, *argv) -> Ran:
    code = cli.main([str(a) for a in argv])
    out, err = self.capsys.readouterr()
    return Ran(code, out, err)

  def expected(self) -> dict:
    with np.load(self.path(self.kind.name + ".expected.npz")) as z:
      return {k: z[k] for k in z.files}

  def inputs(self) -> dict:
    with np.load(self.path(self.kind.name + ".inputs.npz")) as z:
      return {k: z[k] for k in z.files}


def _squeezed(text: str) -> list[str]:
  return [" ".join(line.split()) for line in text.splitlines()]


def _bits(arrays: dict) -> dict:
  return {k: (np.asarray(v).dtype.str, np.asarray(v).shape, np.asarray(v).tobytes())
          for k, v in arrays.items()}


def _shows_signature(c: Case, out: str) -> None:
  lines = _squeezed(out)
  if not c.kind.function:
    assert not any(line.startswith("function ") for line in lines), out
    return
  assert any(line.startswith("function ") for line in lines), out
  for p in c.kind.inputs:
    assert any(line.startswith(f"in {p} ") for line in lines), (p, out)
  for p in c.kind.outputs:
    assert any(line.startswith(f"out {p} ") for line in lines), (p, out)
  for s in c.kind.static:
    assert s in lines, (s, out)


# --- the commands: (argv, check of what it did), by name ---------------------------

def dump(c: Case):
  r = c.cli("dump", c.file, *c.imports())
  assert r.code == 0, r.err
  for prim in c.kind.prims:
    assert prim in r.out, (prim, r.out)
  _shows_signature(c, r.out)
  assert "{ lambda" in r.out


def info(c: Case):
  r = c.cli("info", c.file)
  assert r.code == 0, r.err
  for prim in c.kind.prims:
    assert prim in r.out
  assert ("function " in r.out) == c.kind.function
  assert ("external " in r.out) == c.kind.data_file


def check(c: Case):
  r = c.cli("check", c.file, *c.imports())
  assert r.code == 0 and r.out.startswith(f"{c.file}: ok"), r.err


def check_structure(c: Case):
  r = c.cli("check", "--structure", c.file, *c.imports())
  assert r.code == 0 and r.out.startswith(f"{c.file}: ok"), r.err


def load(c: Case):
  r = c.cli("load", c.file, *c.imports())
  assert r.code == 0, r.err
  assert "check_jaxpr   ok" in r.out
  _shows_signature(c, r.out)


def _run(c: Case, inputs: dict):
  np.savez(os.path.join(c.tmp, "in.npz"), **inputs)
  out = os.path.join(c.tmp, "out.npz")
  r = c.cli("run", c.file, "--inputs", os.path.join(c.tmp, "in.npz"), "--outputs", out,
            *c.imports())
  assert r.code == 0, r.err
  with np.load(out) as z:
    assert list(z.files) == list(c.kind.outputs)
    got = {k: z[k] for k in z.files}
  assert _bits(got) == _bits(c.expected())


def run(c: Case):
  """By path (or argument name), in any order."""
  _run(c, dict(reversed(list(c.inputs().items()))))


def run_in_order(c: Case):
  _run(c, {f"arr_{k}": x for k, x in enumerate(c.inputs().values())})


def diff(c: Case):
  r = c.cli("diff", c.file, c.file, *c.imports())
  assert r.code == 0 and r.out.rstrip().endswith("no differences"), r.out + r.err
  r = c.cli("diff", c.file, c.path(c.kind.name + "_variant" + c.kind.ext), *c.imports())
  assert r.code == 1 and r.err == "", r.err
  assert c.kind.diff_shows in r.out, r.out


def view(c: Case):
  """The page holds the file's bytes and its jaxpr text (jp.format, debug
  info left out), as JSON."""
  page = os.path.join(c.tmp, "page.html")
  r = c.cli("view", c.file, "-o", page)
  assert r.code == 0, r.err
  m = files.read_module(c.file)
  text = json.dumps(jp.format(m, debug_info=False), ensure_ascii=False).replace("<", "\\u003c")
  with open(page, encoding="utf-8") as f:
    html = f.read()
  assert base64.b64encode(files.to_bytes(m, files.BINARY)).decode("ascii") in html
  assert f'"text":{text}' in html

def _convert_own(ext):
  def convert(c: Case):
    out = os.path.join(c.tmp, "elsewhere", c.kind.name + ext)  # (another folder)
    os.makedirs(os.path.dirname(out))
    r = c.cli("convert", c.file, out)
    assert r.code == 0, r.err
    assert files.read_module(out) == files.read_module(c.file)
    data = [n for n in os.listdir(os.path.dirname(out)) if n.endswith(".data")]
    assert bool(data) == c.kind.data_file, data
    r = c.cli("dump", out, *c.imports())  # and it reads as the original does
    assert r.code == 0 and r.out == c.cli("dump", c.file, *c.imports()).out
    if ext == ".jaxpr":  # the text is jp.format's, and back to .jaxpb gives the same bytes
      m = files.read_module(c.file)
      with open(out, encoding="utf-8") as f:
        assert f.read() == jp.format(m)
      back = os.path.join(c.tmp, "elsewhere", "back.jaxpb")
      assert c.cli("convert", out, back).code == 0
      with open(back, "rb") as f:
        assert f.read() == files.to_bytes(m, files.BINARY)
  convert.__name__ = f"convert_{ext[1:]}"
  return convert


def convert_mlir(c: Case):
  out = os.path.join(c.tmp, "f.mlir")
  r = c.cli("convert", c.file, out, *c.imports())
  assert r.code == 0, r.err
  with open(out) as f:
    text = f.read()
  assert "func.func public @main" in text and "stablehlo." in text


def convert_jaxexport(c: Case):
  out = os.path.join(c.tmp, "f.jaxexport")
  r = c.cli("convert", c.file, out, *c.imports())
  assert r.code == 0, r.err
  with open(out, "rb") as f:
    exp = jax.export.deserialize(bytearray(f.read()))
  args, kwargs = jax.tree.unflatten(exp.in_tree, list(c.inputs().values()))
  got = jax.tree.leaves(exp.call(*args, **kwargs))
  assert _bits(dict(zip(c.kind.outputs, got))) == _bits(c.expected())


def convert_onnx(c: Case):
  onnx = pytest.importorskip("onnx")
  pytest.importorskip("jax2onnx")
  out = os.path.join(c.tmp, "f.onnx")
  r = c.cli("convert", c.file, out, *c.imports())
  if r.code == 1 and "no attribute 'ClosedJaxpr'" in r.err and JAX_MINOR >= (0, 12):
    assert r.err.count("\n") == 1  # (as test_convert: one line, exit 1)
    pytest.xfail(f"jax2onnx cannot convert a nested jit under JAX 0.12: {r.err.strip()}")
  assert r.code == 0, r.err
  model = onnx.load(out)
  assert len(model.graph.input) == len(c.kind.inputs)
  assert len(model.graph.output) == len(c.kind.outputs)


def trace(c: Case):
  """`trace` writes the kind's file from the user's module: the same program."""
  target, specs = c.kind.trace
  out = os.path.join(c.tmp, "traced" + c.kind.ext)
  r = c.cli("trace", target.format(dir=c.dir), "--args", specs, "-o", out)
  assert r.code == 0, r.err
  assert os.path.exists(out + ".data") == c.kind.data_file
  mine, theirs = (without_addresses(c.cli("dump", p, *c.imports()).out) for p in (out, c.file))
  assert mine == theirs and mine.startswith("function ")


COMMANDS = [dump, info, check, check_structure, load, run, run_in_order, diff, view,
            _convert_own(".jaxpb"), _convert_own(".jaxpr"), _convert_own(".txtpb"),
            _convert_own(".json"), convert_mlir, convert_jaxexport, convert_onnx, trace]
# Which kinds a command applies to (all, unless here).
APPLIES = {"trace": lambda kind: kind.trace is not None}


def _cases():
  for kind in FILE_KINDS:
    for command in COMMANDS:
      name = command.__name__
      if not APPLIES.get(name, lambda k: True)(kind):
        continue
      marks = [] if _available(kind) else [pytest.mark.skip(reason=f"{kind.needs} is not installed")]
      yield pytest.param(command, kind.name, id=f"{name}-{kind.name}", marks=marks)


def _fails_in_one_line(c: Case, command, why: str):
  argv = {"run": ["run", c.file, "--random"], "run_in_order": ["run", c.file, "--random"],
          "check": ["check", c.file], "load": ["load", c.file],
          "convert_mlir": ["convert", c.file, os.path.join(c.tmp, "f.mlir")],
          "convert_jaxexport": ["convert", c.file, os.path.join(c.tmp, "f.jaxexport")],
          "convert_onnx": ["convert", c.file, os.path.join(c.tmp, "f.onnx")],
          }[command.__name__]
  if command is convert_onnx:
    pytest.importorskip("jax2onnx")
  r = c.cli(*argv, *c.imports())
  assert r.code == 1, (r.out, r.err)
  assert "Traceback" not in r.err and why in r.err, r.err
  if command is not check:  # (check names the file on each problem's line)
    assert r.err.startswith("jaxpr-proto") and r.err.count("\n") == 1, r.err
  else:
    assert all(line.startswith(c.file) for line in r.err.splitlines()), r.err


@pytest.mark.parametrize("command,kind", list(_cases()))
def test_command_on_kind(command, kind, built, tmp_path, capsys):
  c = Case(KINDS[kind], built, str(tmp_path), capsys)
  why = c.kind.fails.get(command.__name__)
  if why is not None:
    _fails_in_one_line(c, command, why)
  else:
    command(c)


def test_every_command_and_kind_is_covered():
  """The matrix covers every command of the parser and every kind."""
  parser_commands = set(cli.build_parser()._subparsers._group_actions[0].choices)
  covered = {c.__name__.split("_")[0] for c in COMMANDS}
  assert parser_commands - {"demo"} <= covered | {"check"}
  assert {c.__name__ for c in COMMANDS} >= {"convert_jaxpb", "convert_jaxpr", "convert_txtpb",
                                           "convert_json", "convert_mlir", "convert_jaxexport",
                                           "convert_onnx"}
  assert {k.ext for k in FILE_KINDS} == set(files.EXTENSIONS)
  assert len({k.name for k in FILE_KINDS}) == len(FILE_KINDS)


# --- what a fresh process shows ----------------------------------------------------

FRESH = textwrap.dedent("""
    import sys, json, io, contextlib
    from jaxpr_proto.cli import commands
    out = []
    for argv in json.loads(sys.argv[1]):
      o, e = io.StringIO(), io.StringIO()
      with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        code = commands.main(argv)
      out.append([code, o.getvalue(), e.getvalue()])
    print(json.dumps(out))
""")


def test_fresh_process_binds_only_what_the_user_imports(built, tmp_path):
  """In a process that imported nothing of the writer's: a callback binds
  only by --import (run without it exits 1 in one line, saying so), and a
  Function of equinox modules shows its signature once equinox is imported."""
  d = built
  cb = KINDS["callbacks"]
  argvs = [
      ["run", f"{d}/callbacks.jaxpb", "--random"],
      ["run", f"{d}/callbacks.jaxpb", "--inputs", f"{d}/callbacks.inputs.npz",
       "--outputs", str(tmp_path / "cb.npz"), "--import", f"{d}/clitest_callbacks.py"],
      ["dump", f"{d}/unresolved.jaxpb"],
      ["run", f"{d}/unresolved.jaxpb", "--random"],
  ]
  has_eqx = _available(KINDS["equinox"])
  if has_eqx:
    argvs += [["dump", f"{d}/equinox.jaxpb"], ["run", f"{d}/equinox.jaxpb", "--random"],
              ["dump", f"{d}/equinox.jaxpb", "--import", "equinox"]]
  got = run_json(FRESH, json.dumps(argvs))
  for (code, out, err), argv in zip(got, argvs):
    assert "Traceback" not in err, (argv, err)
  (code, _, err), (code2, out2, err2) = got[0], got[1]
  assert code == 1 and err.count("\n") == 1 and "clitest.triple" in err and "--import" in err
  assert code2 == 0, err2
  with np.load(tmp_path / "cb.npz") as z:
    assert _bits({k: z[k] for k in z.files}) == _bits(
        Case(cb, d, str(tmp_path), None).expected())
  code, out, err = got[2]
  assert code == 0 and "triple_plus_one" in out, err
  code, out, err = got[3]
  assert code == 1 and err.count("\n") == 1 and "otherlib" in err
  if not has_eqx:
    return
  code, out, err = got[4]
  assert code == 0 and "signature not shown" in out and "equinox" in out and "--import" in out
  assert "{ lambda" in out
  code, out, err = got[5]
  assert code == 1 and err.count("\n") == 1 and "--import" in err
  code, out, err = got[6]
  assert code == 0 and "static 0/activation" in " ".join(out.split()), out
