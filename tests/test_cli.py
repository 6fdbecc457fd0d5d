"""The `jaxpr-proto` command: every command's success paths, a bad file, a
missing file and a usage error; exit codes 0 / 1 / 2; errors on stderr.

Most tests call `cli.main(argv)` in-process (fast); a couple run the real
console script and `python -m jaxpr_proto`.
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto.cli import commands as cli
from jaxpr_proto.cli import progress
from jaxpr_proto.wire import info
from jaxpr_proto.wire import files as tf
from tests.test_textforms import args_of, traced

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  d = tmp_path_factory.mktemp("cli")
  out = {}
  for name in ("mlp", "scan", "cond", "custom_vjp"):
    p = d / f"{name}.jaxpb"
    jp.save(traced(name), p)
    out[name] = str(p)
  m = jp.encode(traced("mlp"))
  for form in (tf.TEXT, tf.JSON, tf.JAXPR):
    p = d / f"mlp.{form}"
    tf.write_module(m, p)
    out[f"mlp.{form}"] = str(p)

  # A program that decodes but does not type-check: sin's result gets a wrong shape.
  m = jp.encode(jax.make_jaxpr(lambda x: jnp.sin(x) + 1.0)(np.ones(3, np.float32)))
  bad_aval = len(m.avals)
  m.avals.add().shaped_array.CopyFrom(m.avals[m.jaxprs[0].invars[0].aval].shaped_array)
  del m.avals[bad_aval].shaped_array.shape[:]
  m.avals[bad_aval].shaped_array.shape.add(constant=7)
  m.jaxprs[0].eqns[0].outvars[0].var.aval = bad_aval
  p = d / "illtyped.jaxpb"
  p.write_bytes(m.SerializeToString(deterministic=True))
  out["illtyped"] = str(p)

  # A primitive this process does not know.
  m = jp.encode(traced("scan"))
  m.primitives[0].namespace = "mylib"
  m.namespaces.add(namespace="mylib", version="1.0")
  p = d / "unknown_prim.jaxpb"
  p.write_bytes(m.SerializeToString(deterministic=True))
  out["unknown_prim"] = str(p)

  (d / "bad.jaxpb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f")     # truncated field
  (d / "empty.jaxpb").write_bytes(b"")                           # no format_version
  (d / "bad.json").write_text("{")
  # A jaxpr text with a stray character, at (line, column) bad_text_at.
  text = jp.format(traced("mlp"))
  at = text.index("\n", text.index("= dot_general"))
  (d / "bad.jaxpr").write_text(text[:at] + " $" + text[at:])
  out["bad_text_at"] = (text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at) + 1)
  out.update(bad=str(d / "bad.jaxpb"), empty=str(d / "empty.jaxpb"),
             bad_json=str(d / "bad.json"), bad_text=str(d / "bad.jaxpr"),
             missing=str(d / "missing.jaxpb"), dir=str(d))
  return out


def run_cli(capsys, *argv):
  code = cli.main([str(a) for a in argv])
  out, err = capsys.readouterr()
  return code, out, err


# --- generic: help, usage errors, missing and bad files ------------------------------

COMMANDS = ["dump", "convert", "load", "check", "info", "run", "diff", "trace", "view", "demo"]


def test_help(capsys):
  code, out, _ = run_cli(capsys, "--help")
  assert code == 0
  for c in COMMANDS:
    assert c in out
  for c in COMMANDS:
    code, out, err = run_cli(capsys, c, "--help")
    assert code == 0 and out.startswith(f"usage: jaxpr-proto {c}"), (c, err)


def test_version(capsys):
  code, out, _ = run_cli(capsys, "--version")
  assert code == 0 and jp.__version__ in out


USAGE_ERRORS = [
    [],
    ["nope"],
    ["dump"],
    ["dump", "{mlp}", "--format", "xml"],
    ["dump", "{mlp}", "extra"],
    ["convert", "{mlp}"],
    ["convert", "{mlp}", "{dir}/out.yaml"],
    ["convert", "{dir}/in.bin", "{dir}/out.json"],
    ["load"],
    ["check"],
    ["info", "{mlp}", "--bogus"],
    ["run", "{mlp}"],
    ["run", "{mlp}", "--random", "1", "--inputs", "x.npz"],
    ["run", "{mlp}", "--random", "one"],
    ["run", "{mlp}", "--inputs", "{dir}/x.csv"],
    ["diff", "{mlp}"],
    ["trace", "os:getcwd", "-o", "{dir}/t.jaxpb"],
    ["trace", "nocolon", "--args", "f32[]", "-o", "{dir}/t.jaxpb"],
    ["trace", "os:getcwd", "--args", "q99[3]", "-o", "{dir}/t.jaxpb"],
    ["trace", "os:getcwd", "--args", "f32[3],", "-o", "{dir}/t.jaxpb"],
    ["trace", "os:getcwd", "--args", "f32[3", "-o", "{dir}/t.jaxpb"],
    ["trace", "os:getcwd", "--args", "f64[3]", "-o", "{dir}/t.jaxpb"],
    ["trace", "os:getcwd", "--args", "f32[]", "-o", "{dir}/t.npy"],
    ["demo", "--bogus"],
]


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=lambda a: " ".join(a) or "(none)")
def test_usage_error(capsys, files, argv):
  code, out, err = run_cli(capsys, *(a.format(**files) for a in argv))
  assert code == 2, (out, err)
  assert "error" in err and out == ""
  assert "Traceback" not in err


def _argv_for(cmd, path, files):
  return {
      "dump": ["dump", path],
      "convert": ["convert", path, os.path.join(files["dir"], "out.txtpb")],
      "load": ["load", path],
      "check": ["check", path],
      "info": ["info", path],
      "run": ["run", path, "--random"],
      "diff": ["diff", files["mlp"], path],
      "view": ["view", path, "-o", os.path.join(files["dir"], "out.html")],
  }[cmd]


FILE_COMMANDS = ["dump", "convert", "load", "check", "info", "run", "diff", "view"]


@pytest.mark.parametrize("cmd", FILE_COMMANDS)
def test_missing_file(capsys, files, cmd):
  code, out, err = run_cli(capsys, *_argv_for(cmd, files["missing"], files))
  assert code == 1
  assert "missing.jaxpb" in err and "No such file" in err
  assert err.startswith("jaxpr-proto: error: ") and err.count("\n") == 1


@pytest.mark.parametrize("cmd", FILE_COMMANDS)
@pytest.mark.parametrize("which,expected", [
    ("bad", "not a valid .jaxpb file"),
    ("empty", "not a jaxpr-proto file"),
    ("bad_json", "not a valid jaxpr-proto JSON file"),
    ("bad_text", "unexpected character '$'"),
])
def test_bad_file(capsys, files, cmd, which, expected):
  code, out, err = run_cli(capsys, *_argv_for(cmd, files[which], files))
  assert code == 1, (out, err)
  assert expected in err and os.path.basename(files[which]) in err
  assert "Traceback" not in err


@pytest.mark.parametrize("cmd", FILE_COMMANDS)
def test_bad_text_is_named_by_line_and_column(capsys, files, cmd):
  """A .jaxpr that does not parse: one line `path:line:column: message`
  (check: a failed check, that line on stderr), exit 1."""
  line, column = files["bad_text_at"]
  where = f"{files['bad_text']}:{line}:{column}: unexpected character '$'"
  code, out, err = run_cli(capsys, *_argv_for(cmd, files["bad_text"], files))
  assert code == 1, (out, err)
  if cmd == "check":
    assert err == where + "\n"
    assert out == f"{files['bad_text']}: FAILED (1 problem: the text does not parse)\n"
  else:
    assert err == f"jaxpr-proto: error: {where}\n"


def test_unknown_primitive_is_readable(capsys, files):
  # Running needs the primitive: refused, saying how to register it.
  code, out, err = run_cli(capsys, "load", files["unknown_prim"])
  assert code == 1
  assert err.startswith("jaxpr-proto: error: ")
  assert "mylib" in err and "register_primitive" in err
  # Showing it does not: dump prints the eqn as a placeholder (unresolved="placeholder").
  code, out, err = run_cli(capsys, "dump", files["unknown_prim"])
  assert code == 0, err
  name = jp.parse(pathlib.Path(files["unknown_prim"]).read_bytes()).primitives
  assert any(p.namespace == "mylib" and p.name in out for p in name)
  # The text forms need no decoding, so they still work.
  code, out, err = run_cli(capsys, "dump", files["unknown_prim"], "--format", "txtpb")
  assert code == 0 and 'namespace: "mylib"' in out
  code, out, err = run_cli(capsys, "info", files["unknown_prim"])
  assert code == 0 and "mylib::" in out


# --- dump ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mlp", "scan", "cond", "custom_vjp"])
def test_dump_prints_like_jax(capsys, files, name):
  code, out, err = run_cli(capsys, "dump", files[name])
  assert code == 0 and err == ""
  assert out == str(traced(name)) + "\n"


def test_dump_forms(capsys, files):
  m = jp.encode(traced("mlp"))
  code, out, _ = run_cli(capsys, "dump", files["mlp"], "--format", "txtpb")
  assert code == 0 and tf.from_text(out) == m
  code, out, _ = run_cli(capsys, "dump", files["mlp"], "--format", "json")
  assert code == 0 and json.loads(out)["formatVersion"]["major"] == 1
  assert tf.from_json(out) == m
  # Text-form inputs print the same program.
  for key in ("mlp.txtpb", "mlp.json"):
    code, out, _ = run_cli(capsys, "dump", files[key])
    assert code == 0 and out == str(traced("mlp")) + "\n"


def test_dump_text(capsys, files):
  """--format text: the jaxpr text (jp.format), without source locations
  unless --source-info; a .jaxpr file dumps as the program it holds."""
  m = jp.encode(traced("mlp"))
  code, out, _ = run_cli(capsys, "dump", files["mlp"], "--format", "text")
  assert code == 0 and out == jp.format(m, debug_info=False)
  assert "loc(" not in out and jp.parse(out) == jp.encode(traced("mlp"), debug_info=False)
  code, out, _ = run_cli(capsys, "dump", files["mlp"], "--format", "text", "--source-info")
  assert code == 0 and out == jp.format(m) == pathlib.Path(files["mlp.jaxpr"]).read_text()
  code, out, _ = run_cli(capsys, "dump", files["mlp.jaxpr"])
  assert code == 0 and out == str(traced("mlp")) + "\n"


def test_dump_source_info(capsys, files):
  code, out, _ = run_cli(capsys, "dump", files["mlp"], "--source-info")
  assert code == 0
  assert "test_textforms.py" in out and "(mlp)" in out


# --- convert --------------------------------------------------------------------------

def test_convert_round_trip_is_exact(capsys, files, tmp_path):
  src = pathlib.Path(files["custom_vjp"])
  chain = [tmp_path / "a.txtpb", tmp_path / "b.json", tmp_path / "c.txtpb", tmp_path / "d.jaxpb"]
  prev = src
  for dst in chain:
    code, out, err = run_cli(capsys, "convert", prev, dst)
    assert code == 0 and err == ""
    assert str(dst) in out and "bytes" in out
    prev = dst
  assert chain[-1].read_bytes() == src.read_bytes()
  assert str(jp.load(chain[-1])) == str(traced("custom_vjp"))


def test_convert_to_and_from_jaxpr_is_exact(capsys, files, tmp_path):
  """.jaxpb -> .jaxpr -> .jaxpb gives the same bytes, as do the protobuf
  text forms through .jaxpr; the .jaxpr is jp.format's text."""
  for src in (files["scan"], files["custom_vjp"], files["mlp.txtpb"], files["mlp.json"]):
    name = pathlib.Path(src).name
    text, back = tmp_path / f"{name}.jaxpr", tmp_path / f"{name}.jaxpb"
    code, out, err = run_cli(capsys, "convert", src, text)
    assert code == 0 and err == "" and "(jaxpr, " in out, err
    m = tf.read_module(src)
    assert text.read_text() == jp.format(m)
    code, out, err = run_cli(capsys, "convert", text, back)
    assert code == 0 and err == "", err
    assert back.read_bytes() == tf.to_bytes(m, tf.BINARY)
    if src.endswith(".jaxpb"):
      assert back.read_bytes() == pathlib.Path(src).read_bytes()
    code, out, err = run_cli(capsys, "convert", text, tmp_path / f"{name}.txtpb")
    assert code == 0 and tf.read_module(tmp_path / f"{name}.txtpb") == m


def test_convert_a_module_no_text_holds(capsys, files, tmp_path):
  m = jp.encode(traced("mlp"))
  m.params[0].name = "bad name"
  (tmp_path / "odd.jaxpb").write_bytes(m.SerializeToString(deterministic=True))
  code, out, err = run_cli(capsys, "convert", tmp_path / "odd.jaxpb", tmp_path / "odd.jaxpr")
  assert code == 1 and out == "" and not (tmp_path / "odd.jaxpr").exists()
  assert err == (f"jaxpr-proto: error: {tmp_path / 'odd.jaxpb'}: this Module has no jaxpr "
                 "text: param name 'bad name'\n")


def test_a_hand_edited_text_checks_and_runs(capsys, files, tmp_path):
  """A .jaxpr edited by hand (tanh made sin) checks, runs as the edited
  program, and diffs against the original as that one eqn."""
  text = pathlib.Path(files["mlp.jaxpr"]).read_text()
  assert text.count("= tanh[") == 1
  edited = tmp_path / "edited.jaxpr"
  edited.write_text(text.replace("= tanh[", "= sin["))
  code, out, err = run_cli(capsys, "check", edited)
  assert code == 0 and out.startswith(f"{edited}: ok"), err
  np.savez(tmp_path / "in.npz", *args_of("mlp"))
  code, out, err = run_cli(capsys, "run", edited, "--inputs", tmp_path / "in.npz",
                           "--outputs", tmp_path / "out.npz")
  assert code == 0, err

  def mlp_sin(w1, b1, w2, x):
    return jnp.sin(jax.nn.relu(x @ w1 + b1) @ w2).sum()

  want = jax.jit(mlp_sin)(*args_of("mlp"))
  with np.load(tmp_path / "out.npz") as z:
    assert z["out_0"].tobytes() == np.asarray(want).tobytes()
  code, out, err = run_cli(capsys, "diff", files["mlp.jaxpr"], edited)
  assert code == 1 and "@@ ~eqn 5 -> 5: primitive tanh -> sin\n" in out
  assert "\n-   n:f32[5,2] = tanh[accuracy=None] m\n+   n:f32[5,2] = sin[accuracy=None] m\n" in out


# --- load ---------------------------------------------------------------------------

def test_load_summary(capsys, files):
  code, out, err = run_cli(capsys, "load", files["scan"])
  assert code == 0 and err == ""
  cj = traced("scan")
  n_sub = sum(len(s.eqns) for e in cj.jaxpr.eqns
              for s in jax.extend.core.jaxprs_in_params(e.params))
  assert "format        1.0" in out
  assert f"jax {jax.__version__}" in out
  assert f"{len(cj.jaxpr.eqns)} top-level, {len(cj.jaxpr.eqns) + n_sub} including sub-jaxprs" in out
  assert "in avals      f32[6], f32[3]" in out
  assert "out avals     f32[3], f32[6,3]" in out
  assert "scan" in out and "sin" in out
  assert "check_jaxpr   ok" in out


def test_load_fails_check(capsys, files):
  code, out, err = run_cli(capsys, "load", files["illtyped"])
  assert code == 1
  # The type error is caught by the decoder or by JAX's check_jaxpr after it.
  assert "illtyped.jaxpb" in err or "check_jaxpr" in err
  assert "inconsistently typed" in err or "FAILED" in out


# --- check --------------------------------------------------------------------------

def test_check(capsys, files):
  code, out, err = run_cli(capsys, "check", files["mlp"], files["cond"], files["mlp.json"])
  assert code == 0 and err == ""
  assert out.count(": ok") == 3
  code, out, err = run_cli(capsys, "check", files["mlp"], files["illtyped"])
  assert code == 1
  assert "illtyped.jaxpb" in err and "FAILED" in out
  code, out, err = run_cli(capsys, "check", files["unknown_prim"])
  assert code == 1 and "mylib" in err


def test_check_reports_every_file(capsys, files):
  """A bad or missing file does not hide the files after it."""
  code, out, err = run_cli(capsys, "check", files["bad"], files["mlp"], files["missing"], files["empty"])
  assert code == 1
  lines = out.splitlines()
  assert [line.split(": ")[0] for line in lines] == [files[k] for k in ("bad", "mlp", "missing", "empty")]
  assert [line.split(": ")[1].split(" ")[0] for line in lines] == ["FAILED", "ok", "FAILED", "FAILED"]
  assert f"jaxpr-proto: error: {files['bad']}: not a valid .jaxpb file" in err
  assert f"jaxpr-proto: error: {files['missing']}: No such file" in err
  assert f"jaxpr-proto: error: {files['empty']}: not a jaxpr-proto file" in err


# --- info ---------------------------------------------------------------------------

def test_info_text_and_json(capsys, files):
  code, out, err = run_cli(capsys, "info", files["cond"])
  assert code == 0 and err == ""
  for word in ("format", "producer", "by primitive", "bytes by section", "sharing", "cond"):
    assert word in out
  code, out, err = run_cli(capsys, "info", files["cond"], "--json")
  assert code == 0
  doc = json.loads(out)
  size = os.path.getsize(files["cond"])
  assert doc["file_bytes"] == size == doc["bytes"]["total"]
  assert sum(v for k, v in doc["bytes"].items() if k != "total") == size
  assert set(doc["bytes"]) == {"total", *info.SECTIONS}
  assert doc["format_version"] == "1.0" and doc["producer"]["jax"] == jax.__version__
  assert doc["eqns"]["stored"] == sum(doc["by_primitive"].values())
  assert doc["by_primitive"]["cond"] == 2  # the cond and the switch


def test_info_counts_sharing(capsys, tmp_path):
  inner = jax.jit(lambda v: jnp.sin(v) * 2.0 + 1.0)

  def f(x):
    return inner(x) + inner(x * 3.0) + inner(x - 1.0)

  cj = jax.make_jaxpr(f)(np.ones(4, np.float32))
  path = tmp_path / "shared.jaxpb"
  jp.save(cj, path)
  code, out, _ = run_cli(capsys, "info", path, "--json")
  doc = json.loads(out)
  assert doc["sharing"]["shared"] == 1
  assert doc["sharing"]["referring_eqns"] == 3
  assert doc["sharing"]["eqns_saved"] == 2 * 3
  assert doc["eqns"]["expanded"] == doc["eqns"]["root"] + 3 * 3
  assert doc["eqns"]["stored"] == doc["eqns"]["root"] + 3
  code, out, _ = run_cli(capsys, "info", path)
  assert "1 shared by 3 eqns" in out


def test_info_expanded_matches_jax_walk():
  from jaxpr_proto.cli import demo
  cj, _ = demo.trace()
  doc = info.module_info(jp.encode(cj))
  assert (doc["eqns"]["root"], doc["eqns"]["expanded"]) == demo.count_eqns(cj)


# --- run ----------------------------------------------------------------------------

def test_run_with_npz_and_npy(capsys, files, tmp_path):
  args = args_of("mlp")
  inputs = tmp_path / "in.npz"
  np.savez(inputs, *args)
  out_path = tmp_path / "out.npz"
  code, out, err = run_cli(capsys, "run", files["mlp"], "--inputs", inputs,
                           "--outputs", out_path, "--repeat", "2")
  assert code == 0, err
  assert "outputs       f32[]" in out and "compile" in out and "run " in out
  expected = jaxpr_as_fun(traced("mlp"))(*args)
  with np.load(out_path) as z:
    np.testing.assert_allclose(z["out_0"], expected[0], rtol=1e-6)
  # .npy files, one per input, in order (mixed with an .npz).
  npys = []
  for k, a in enumerate(args[:2]):
    npys.append(tmp_path / f"a{k}.npy")
    np.save(npys[-1], a)
  np.savez(tmp_path / "rest.npz", *args[2:])
  code, out, err = run_cli(capsys, "run", files["mlp"], "--inputs", *npys, tmp_path / "rest.npz")
  assert code == 0, err


def test_run_random_and_arg_names(capsys, files, tmp_path):
  code, out, err = run_cli(capsys, "run", files["cond"], "--random", "3")
  assert code == 0, err
  assert "inputs        f32[3], i32[]" in out
  # An .npz keyed by the argument names, in any order.
  x, i = args_of("cond")
  np.savez(tmp_path / "named.npz", i=i, x=x)
  code, out, err = run_cli(capsys, "run", files["cond"], "--inputs", tmp_path / "named.npz")
  assert code == 0, err


def test_run_rejects_wrong_inputs(capsys, files, tmp_path):
  np.savez(tmp_path / "few.npz", np.ones(3, np.float32))
  code, _, err = run_cli(capsys, "run", files["cond"], "--inputs", tmp_path / "few.npz")
  assert code == 1 and "takes 2 inputs" in err
  np.savez(tmp_path / "wrong.npz", np.array([0.5, 0.1, 2.0]), np.int32(0))
  code, _, err = run_cli(capsys, "run", files["cond"], "--inputs", tmp_path / "wrong.npz")
  assert code == 1 and "expected f32[3]" in err and "float64" in err
  assert "values [1] 0.1 float32 cannot hold exactly" in err  # names what does not fit
  np.savez(tmp_path / "big.npz", np.ones(3, np.float32), np.int64(2**40))
  code, _, err = run_cli(capsys, "run", files["cond"], "--inputs", tmp_path / "big.npz")
  assert code == 1 and "expected i32[]" in err and "1099511627776" in err
  np.savez(tmp_path / "sign.npz", np.ones(3, np.float32), np.uint32(2**31 + 7))
  code, _, err = run_cli(capsys, "run", files["cond"], "--inputs", tmp_path / "sign.npz")
  assert code == 1 and "2147483655" in err  # not wrapped to a negative int32


def test_run_converts_inputs_exactly(capsys, files, tmp_path):
  """A value that converts exactly is converted: a step count saved with
  np.asarray(0) is int64 for an i32[] input; float64 halves fit f32."""
  np.savez(tmp_path / "exact.npz", np.array([0.5, -1.0, 2.0]), np.asarray(1))
  assert np.load(tmp_path / "exact.npz")["arr_1"].dtype == np.int64
  code, out, err = run_cli(capsys, "run", files["cond"], "--inputs", tmp_path / "exact.npz",
                           "--outputs", tmp_path / "out.npz")
  assert code == 0, err
  x, i = args_of("cond")
  want = jaxpr_as_fun(traced("cond"))(np.array([0.5, -1.0, 2.0], np.float32), np.int32(1))
  with np.load(tmp_path / "out.npz") as z:
    np.testing.assert_array_equal(z["out_0"], np.asarray(want[0]))


# --- diff ---------------------------------------------------------------------------

def test_diff(capsys, files, tmp_path):
  code, out, err = run_cli(capsys, "diff", files["mlp"], files["mlp.json"])
  assert code == 0 and "no differences" in out

  def mlp2(w1, b1, w2, x):
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.sin(h @ w2).sum(axis=0)   # tanh -> sin, sum over axis 0

  p = tmp_path / "mlp2.jaxpb"
  jp.save(jax.make_jaxpr(mlp2)(*args_of("mlp")), p)
  code, out, err = run_cli(capsys, "diff", files["mlp"], p)
  assert code == 1 and err == ""
  assert "primitive tanh -> sin" in out
  assert "-   " in out and "+   " in out
  assert "params axes" in out and "axes: (0, 1) -> (0,)" in out
  assert out.rstrip().splitlines()[-1].startswith("eqns: ")


def test_diff_recurses_into_sub_jaxprs(capsys, files, tmp_path):
  from jax import lax

  def scan2(xs, c0):
    def body(c, x):
      c = c * 0.5 + jnp.cos(x)
      return c, c * 2.0
    return lax.scan(body, c0, xs)

  p = tmp_path / "scan2.jaxpb"
  jp.save(jax.make_jaxpr(scan2)(*args_of("scan")), p)
  code, out, _ = run_cli(capsys, "diff", files["scan"], p)
  assert code == 1
  assert "params jaxpr" in out and "primitive sin -> cos" in out
  # In the jaxpr text: the body's variables named as the whole text names them.
  assert ("-   c:f32[3] d:f32[6,3] = scan[...] b a\n+   c:f32[3] d:f32[6,3] = scan[...] b a\n"
          "    jaxpr: eqns: 0 added, 0 removed, 1 changed\n") in out
  assert ("-   h:f32[] = sin[accuracy=None] f\n      +   h:f32[] = cos[accuracy=None] f\n"
          in out), out


def test_diff_prints_what_pastes_back(capsys, files, tmp_path):
  """Each eqn line of a diff is the eqn's line in the file's jaxpr text."""
  def mlp2(w1, b1, w2, x):
    return jnp.cos(jax.nn.relu(x @ w1 + b1) @ w2).sum() * 2.0

  p = tmp_path / "mlp2.jaxpb"
  jp.save(jax.make_jaxpr(mlp2)(*args_of("mlp")), p)
  code, out, _ = run_cli(capsys, "diff", files["mlp"], p)
  assert code == 1
  texts = {"-": jp.format(tf.read_module(files["mlp"]), debug_info=False),
           "+": jp.format(tf.read_module(p), debug_info=False)}
  eqn_lines = [line for line in out.splitlines() if line[:4] in ("-   ", "+   ") and " = " in line]
  assert any("cos[" in line for line in eqn_lines) and any("tanh[" in line for line in eqn_lines)
  for line in eqn_lines:
    assert f"\n    {line[4:]}\n" in texts[line[0]], line


# --- trace --------------------------------------------------------------------------

MODULE_SRC = textwrap.dedent("""
    import jax.numpy as jnp
    from jax import lax

    def f(x, i):
      return lax.cond(i > 0, jnp.sin, jnp.cos, x @ x.T), i + 1

    class Model:
      @staticmethod
      def apply(x):
        return x.sum(axis=-1)
""")


def _short(aval) -> str:
  return aval.str_short(short_dtypes=True)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
  name = f"user_mod_{os.getpid()}"
  (tmp_path / f"{name}.py").write_text(MODULE_SRC)
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(sys, "path", list(sys.path))
  yield name
  sys.modules.pop(name, None)


def test_trace_module_function(capsys, user_module, tmp_path):
  out_path = tmp_path / "f.jaxpb"
  code, out, err = run_cli(capsys, "trace", f"{user_module}:f", "--args", "f32[4,3], i32[]",
                           "-o", out_path)
  assert code == 0, err
  assert f"wrote {out_path}" in out
  f = jp.load(out_path)  # a jp.Function, with the argument names and the outputs' structure
  assert isinstance(f, jp.Function) and f.name == "f"
  assert [_short(a) for a in f.in_avals] == ["f32[4,3]", "i32[]"]
  assert [_short(a) for a in f.out_avals] == ["f32[4,4]", "i32[]"]
  mod = __import__(user_module)
  expected = jax.make_jaxpr(mod.f)(jax.ShapeDtypeStruct((4, 3), jnp.float32),
                                    jax.ShapeDtypeStruct((), jnp.int32))
  assert str(f.closed_jaxpr) == str(expected)
  x = np.arange(12, dtype=np.float32).reshape(4, 3)
  want = mod.f(x, np.int32(2))
  got = f(x, np.int32(2))
  assert type(got) is tuple and all(np.array_equal(a, b) for a, b in zip(got, want))
  code, out, err = run_cli(capsys, "dump", out_path)
  assert out.startswith("function f\n  in     x  f32[4,3]\n  in     i  i32[]\n"
                        "  out    0  f32[4,4]\n  out    1  i32[]\n{ lambda"), out


def test_trace_path_attr_forms(capsys, user_module, tmp_path):
  out_path = tmp_path / "apply.txtpb"
  code, out, err = run_cli(capsys, "trace", f"{tmp_path / user_module}.py:Model.apply",
                           "--args", "bfloat16[2,5]", "-o", out_path, "--no-debug-info")
  assert code == 0, err
  cj = jp.decode(tf.read_module(out_path))
  assert [_short(a) for a in cj.out_avals] == ["bf16[2]"]


def test_trace_symbolic(capsys, user_module, tmp_path):
  out_path = tmp_path / "sym.jaxpb"
  code, out, err = run_cli(capsys, "trace", f"{user_module}:Model.apply",
                           "--args", "f32[b,3]", "-o", out_path)
  assert code == 0, err
  assert "f32[b,3]" in out and "f32[b]" in out


def test_trace_errors(capsys, user_module, tmp_path):
  out_path = tmp_path / "x.jaxpb"
  code, _, err = run_cli(capsys, "trace", "no_such_module_xyz:f", "--args", "f32[]", "-o", out_path)
  assert code == 1 and "cannot import" in err
  code, _, err = run_cli(capsys, "trace", f"{user_module}:nope", "--args", "f32[]", "-o", out_path)
  assert code == 1 and "no attribute 'nope'" in err
  code, _, err = run_cli(capsys, "trace", f"{tmp_path}/missing.py:f", "--args", "f32[]",
                         "-o", out_path)
  assert code == 1 and "missing.py" in err
  # The function does not accept these args: a readable error, exit 1.
  code, _, err = run_cli(capsys, "trace", f"{user_module}:f", "--args", "f32[4,3]", "-o", out_path)
  assert code == 1 and err.startswith("jaxpr-proto: error: TypeError")
  assert not out_path.exists()


def test_parse_arg_specs():
  specs = cli.parse_arg_specs("f32[8,3],i32[], bool[2] ,u8[1,2,3],c64[],float16[4],bf16")
  assert [(s.shape, str(s.dtype)) for s in specs] == [
      ((8, 3), "float32"), ((), "int32"), ((2,), "bool"), ((1, 2, 3), "uint8"),
      ((), "complex64"), ((4,), "float16"), ((), "bfloat16")]
  assert cli.parse_arg_specs("") == []
  with pytest.raises(cli.UsageError, match="unknown dtype"):
    cli.parse_arg_specs("float33[2]")


# --- demo ---------------------------------------------------------------------------

def test_demo(capsys, tmp_path):
  keep = tmp_path / "demo.jaxpb"
  code, out, err = run_cli(capsys, "demo", "--keep", keep)
  assert code == 0, out + err
  assert "outputs    agree bitwise" in out and "gradients  agree bitwise" in out
  assert "make_jaxpr" in out and "encode" in out and "decode" in out and "bytes" in out
  assert out.rstrip().endswith("OK")
  cj = jp.load(keep)
  assert any(e.primitive.name == "custom_vjp_call" for e in cj.jaxpr.eqns)
  assert any(e.primitive.name == "scan" for e in cj.jaxpr.eqns)


def test_demo_reports_disagreement(capsys, monkeypatch):
  from jaxpr_proto.cli import demo
  monkeypatch.setattr(demo, "bitwise_equal", lambda a, b: False)
  # A tiny program instead of the training step, to keep this fast.
  monkeypatch.setattr(demo, "trace", lambda: (traced("custom_vjp"), list(args_of("custom_vjp"))))
  monkeypatch.setattr(demo, "grad_fn", lambda cj: jax.grad(lambda *a: jaxpr_as_fun(cj)(*a)[0]))
  code, out, _ = run_cli(capsys, "demo")
  assert code == 1 and "DISAGREE" in out and out.rstrip().endswith("FAILED")


# --- progress -------------------------------------------------------------------------

class FakeTTY(io.StringIO):
  def isatty(self):
    return True


def test_progress_bar_only_on_a_terminal():
  tty, pipe = FakeTTY(), io.StringIO()
  for stream in (tty, pipe):
    with progress.Progress(2, stream) as p:
      p.stage("reading")
      p.update(5, 10)
      p.stage("decoding")
  assert "[" in tty.getvalue() and "%" in tty.getvalue() and "\r" in tty.getvalue()
  assert tty.getvalue().endswith("\r\x1b[K")  # the line is cleared at the end
  assert pipe.getvalue() == ""


def test_progress_in_commands(capsys, files, monkeypatch):
  monkeypatch.setattr(progress, "PROGRESS_MIN_BYTES", 0)
  fake = FakeTTY()
  monkeypatch.setattr(sys, "stderr", fake)
  assert cli.main(["info", files["scan"]]) == 0
  assert "measuring" in fake.getvalue()
  monkeypatch.undo()
  # Not a terminal (pytest captures stderr): silent.
  monkeypatch.setattr(progress, "PROGRESS_MIN_BYTES", 0)
  code, out, err = run_cli(capsys, "info", files["scan"])
  assert code == 0 and err == ""


# --- the real entry points ----------------------------------------------------------

def test_console_script(files):
  exe = pathlib.Path(sys.executable).parent / "jaxpr-proto"
  if not exe.exists():
    pytest.skip("the jaxpr-proto console script is not installed next to python")
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  proc = subprocess.run([str(exe), "info", "--json", files["mlp"]], capture_output=True,
                        text=True, timeout=120, cwd=ROOT, env=env)
  assert proc.returncode == 0, proc.stderr
  # (1.3: the MLP's relu calls name the first one's jaxpr, ClosedJaxpr.own_jaxpr)
  assert json.loads(proc.stdout)["format_version"] == "1.3"
  assert proc.stderr == ""  # no progress bar: stderr is not a terminal


def test_python_m(capsys, files, monkeypatch):
  import runpy
  monkeypatch.setattr(sys, "argv", ["python -m jaxpr_proto", "dump", files["missing"]])
  with pytest.raises(SystemExit) as e:
    runpy.run_module("jaxpr_proto", run_name="__main__", alter_sys=False)
  assert e.value.code == 1
  out, err = capsys.readouterr()
  assert out == "" and err.startswith("jaxpr-proto: error: ") and "No such file" in err


# --- jp.Function files: signature, inputs and outputs by path, --import ----------------

def _step(p, batch, *, lr):
  return {"loss": jnp.sum(jnp.sin(p["w"] * batch["x"])) * lr, "w": p["w"] - lr}


@pytest.fixture(scope="module")
def step_file(tmp_path_factory):
  d = tmp_path_factory.mktemp("function")
  args = ({"w": np.ones(3, np.float32)}, {"x": np.arange(3, dtype=np.float32)})
  f = jp.trace(_step)(*args, lr=np.float32(0.5))
  jp.save(f, d / "step.jaxpb")
  return str(d / "step.jaxpb"), f


def test_dump_function_prints_its_signature_then_its_jaxpr(capsys, step_file):
  path, f = step_file
  code, out, err = run_cli(capsys, "dump", path)
  assert code == 0, err
  assert out == ("function _step\n"
                 "  in     p/w      f32[3]\n"
                 "  in     batch/x  f32[3]\n"
                 "  in     lr       f32[]\n"
                 "  out    loss     f32[]\n"
                 "  out    w        f32[3]\n" + str(f.closed_jaxpr) + "\n")


def test_run_function_says_which_inputs_do_not_fit(capsys, step_file, tmp_path):
  path, _ = step_file
  cases = [
      ({"p/w": np.ones(3, np.float32), "batch/y": np.ones(3, np.float32), "lr": np.float32(1)},
       "missing batch/x (f32[3]); not an input: batch/y; the inputs are p/w, batch/x, lr"),
      ({"p/w": np.ones(4, np.float32), "batch/x": np.ones(3, np.float32), "lr": np.float32(1)},
       "input 0 (p/w): expected f32[3], got float32[4]"),
      ({"p/w": np.ones(3, np.float32), "batch/x": np.ones(3, np.float32),
        "lr": np.float32(1), "arr_0": np.ones(3)},
       "not an input: arr_0"),
  ]
  for k, (arrays, says) in enumerate(cases):
    np.savez(tmp_path / f"in{k}.npz", **arrays)
    code, out, err = run_cli(capsys, "run", path, "--inputs", tmp_path / f"in{k}.npz")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert says in err and "Traceback" not in err, err
  # By name in one file and in order in another: one or the other.
  np.savez(tmp_path / "named.npz", **{"p/w": np.ones(3, np.float32)})
  np.savez(tmp_path / "ordered.npz", np.ones(3, np.float32))
  code, _, err = run_cli(capsys, "run", path, "--inputs", tmp_path / "named.npz",
                         tmp_path / "ordered.npz")
  assert code == 1 and "either by name" in err and err.count("\n") == 1


def test_run_closed_jaxpr_by_names_it_lacks_is_refused(capsys, files, tmp_path):
  """An .npz whose names are not the arguments' is refused, not taken in
  file order."""
  x, i = args_of("cond")
  np.savez(tmp_path / "other.npz", a=x, b=i)
  code, _, err = run_cli(capsys, "run", files["cond"], "--inputs", tmp_path / "other.npz")
  assert code == 1 and "missing x (f32[3]), i (i32[]); not an input: a, b" in err, err


def test_diff_compares_signatures(capsys, step_file, tmp_path):
  """The same eqns under other argument names differ by their signature."""
  path, f = step_file

  def _step(p, data, *, lr):  # batch -> data
    return {"loss": jnp.sum(jnp.sin(p["w"] * data["x"])) * lr, "w": p["w"] - lr}

  g = jp.trace(_step)({"w": np.ones(3, np.float32)}, {"x": np.ones(3, np.float32)},
                      lr=np.float32(0.5))
  jp.save(g, tmp_path / "renamed.jaxpb")
  code, out, err = run_cli(capsys, "diff", path, tmp_path / "renamed.jaxpb")
  assert code == 1 and err == ""
  assert "~ signature\n-   in batch/x f32[3]\n+   in data/x f32[3]\n" in out, out
  assert out.rstrip().endswith("eqns: 0 added, 0 removed, 0 changed, signature changed")
  # A plain ClosedJaxpr of the same eqns has no signature: that differs too.
  jp.save(f.closed_jaxpr, tmp_path / "plain.jaxpb")
  code, out, _ = run_cli(capsys, "diff", path, tmp_path / "plain.jaxpb")
  assert code == 1 and "-   function _step" in out and "signature changed" in out


def test_dump_function_whose_pytree_node_is_not_registered(capsys, tmp_path, monkeypatch):
  """Inspection shows a Function whose signature names a pytree node this
  process lacks by its jaxpr, saying what to --import; running it says so."""
  from jaxpr_proto.codec import names

  @jax.tree_util.register_dataclass
  @__import__("dataclasses").dataclass
  class Pair:
    a: jax.Array
    b: jax.Array

  names.register_pytree_node(Pair, "tests.test_cli.Pair")
  f = jp.trace(lambda p: p.a * p.b)(Pair(np.ones(2, np.float32), np.ones(2, np.float32)))
  jp.save(f, tmp_path / "pair.jaxpb")
  names.PYTREE_NODES.remove("tests.test_cli.Pair")  # (as in a process without the class)
  code, out, err = run_cli(capsys, "dump", tmp_path / "pair.jaxpb")
  assert code == 0, err
  first, rest = out.split("\n", 1)
  assert first.startswith("function <lambda> (signature not shown: pytree node type "
                          "'tests.test_cli.Pair' is not registered in this process")
  assert "--import the module that defines it" in first
  assert rest == str(f.closed_jaxpr) + "\n"
  code, out, err = run_cli(capsys, "run", tmp_path / "pair.jaxpb", "--random")
  assert code == 1 and err.count("\n") == 1 and "--import" in err, err


def test_import(capsys, step_file, tmp_path):
  path, _ = step_file
  code, _, err = run_cli(capsys, "run", path, "--random", "--import", "no_such_module_xyz")
  assert code == 1 and err == ("jaxpr-proto: cannot import 'no_such_module_xyz': No module "
                               "named 'no_such_module_xyz'\n")
  (tmp_path / "broken.py").write_text("raise RuntimeError('not today')\n")
  code, _, err = run_cli(capsys, "load", path, "--import", tmp_path / "broken.py")
  assert code == 1 and err.count("\n") == 1
  assert "importing" in err and "RuntimeError: not today" in err
  # A module that registers something: imported before the file is read.
  (tmp_path / "registers.py").write_text("import sys\nsys.modules[__name__].seen = True\n")
  code, _, err = run_cli(capsys, "load", path, "--import", tmp_path / "registers.py")
  assert code == 0, err
  assert any(getattr(m, "seen", False) for n, m in list(sys.modules.items())
             if n.endswith("registers"))
