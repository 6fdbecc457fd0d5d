""".jaxpb files read by non-Python tools, which must see what Python sees.

* `buf convert` (Go) decodes .jaxpb to JSON;
* `protoc --decode` (C++, the one grpcio-tools ships) decodes it to text;
* `tools/js/read_jaxpb.mjs` (JavaScript, protobufjs) reads it and counts
  (where node and npm are installed; tools/js/node_modules is installed with
  `npm ci` on first use);

each must report the same primitive names and eqn counts as
`jaxpr_proto.wire.info` (what `jaxpr-proto info` prints). Also: docs/schema.md is
fresh.
"""
from __future__ import annotations

import collections
import json
import pathlib
import subprocess
import sys

import jax
import pytest
from google.protobuf import json_format

import jaxpr_proto as jp
from jaxpr_proto.wire import info
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from tests.test_textforms import PROGRAMS, traced
from tests import helpers

ROOT = pathlib.Path(__file__).resolve().parent.parent
JS_DIR = ROOT / "tools" / "js"


def _demo_program():
  from jaxpr_proto.cli import demo
  return demo.trace()[0]


@pytest.fixture(scope="module")
def jaxpb_files(tmp_path_factory):
  d = tmp_path_factory.mktemp("xlang")
  out = {}
  for name in sorted(PROGRAMS):
    out[name] = d / f"{name}.jaxpb"
    jp.save(traced(name), out[name])
  out["demo"] = d / "demo.jaxpb"
  jp.save(_demo_program(), out["demo"])
  out["external_data"] = d / "external_data.jaxpb"  # its 4 MiB constant in a data file
  jp.save(_external_data_program(), out["external_data"])
  assert (d / "external_data.jaxpb.data").is_file()
  return out


def _external_data_program():
  import jax.numpy as jnp
  import numpy as np
  w = np.arange(1 << 20, dtype=np.float32)
  return jax.make_jaxpr(lambda x: jnp.sin(x) * jnp.asarray(w)[:3].sum())(jnp.ones(3))


def python_view(path) -> dict:
  m = jp.parse(pathlib.Path(path).read_bytes())
  return info.module_info(m)


def _prim_name(p: dict) -> str:
  ns, name = p.get("namespace", ""), p.get("name", "")
  return name if ns == "jax" else f"{ns}::{name}"


_buf = helpers.buf


NAMES = sorted(PROGRAMS) + ["demo", "external_data"]


# --- Go: buf convert -----------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_buf_convert_reads_the_same_program(jaxpb_files, name):
  path = jaxpb_files[name]
  proc = subprocess.run(
      [_buf(), "convert", "proto", "--type", "jaxpr_proto.v1.Module",
       "--from", f"{path}#format=binpb", "--to", "-#format=json"],
      cwd=ROOT, capture_output=True, text=True, timeout=240)
  assert proc.returncode == 0, proc.stderr
  doc = json.loads(proc.stdout)
  prims = [_prim_name(p) for p in doc.get("primitives", [])]
  eqns = [e for j in doc.get("jaxprs", []) for e in j.get("eqns", [])]
  by_prim = collections.Counter(prims[e.get("primitive", 0)] for e in eqns)
  want = python_view(path)
  assert len(eqns) == want["eqns"]["stored"]
  assert dict(by_prim) == want["by_primitive"]
  root = doc["closedJaxprs"][doc.get("root", 0)].get("jaxpr", 0)
  assert len(doc["jaxprs"][root].get("eqns", [])) == want["eqns"]["root"]
  # Go's JSON is proto3 JSON that Python reads back as the same message.
  assert json_format.Parse(proc.stdout, pb.Module()) == jp.parse(path.read_bytes())


# --- C++: protoc --decode ---------------------------------------------------------------

def _parse_protoc_text(text: str):
  """Primitive names and per-eqn primitive indices from protoc's text output.

  protoc indents two spaces per level: `jaxprs {` at column 0, its `eqns {` at
  2, an eqn's `primitive: N` at 4 (absent when N is 0); `primitives {` at 0
  with `namespace:` / `name:` at 2.
  """
  prims: list[dict] = []
  eqn_prims: list[int] = []
  block = None
  for line in text.splitlines():
    indent = len(line) - len(line.lstrip(" "))
    s = line.strip()
    if indent == 0:
      block = s.split(" ")[0] if s.endswith("{") else None
      if block == "primitives":
        prims.append({})
    elif block == "primitives" and indent == 2 and ":" in s:
      key, _, val = s.partition(": ")
      prims[-1][key] = json.loads(val)
    elif block == "jaxprs" and indent == 2 and s == "eqns {":
      eqn_prims.append(0)
    elif block == "jaxprs" and indent == 4 and s.startswith("primitive: "):
      eqn_prims[-1] = int(s.split(": ")[1])
  return [_prim_name(p) for p in prims], eqn_prims


@pytest.mark.parametrize("name", NAMES)
def test_protoc_decode_reads_the_same_program(jaxpb_files, name):
  path = jaxpb_files[name]
  with open(path, "rb") as f:
    proc = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "--decode=jaxpr_proto.v1.Module",
         "-Iproto", "jaxpr_proto/v1/jaxpr.proto"],
        cwd=ROOT, stdin=f, capture_output=True, timeout=240)
  assert proc.returncode == 0, proc.stderr.decode()
  prims, eqn_prims = _parse_protoc_text(proc.stdout.decode("utf-8"))
  want = python_view(path)
  assert len(eqn_prims) == want["eqns"]["stored"]
  assert dict(collections.Counter(prims[i] for i in eqn_prims)) == want["by_primitive"]
  assert prims == info.primitive_names(jp.parse(path.read_bytes()))


# --- JavaScript: tools/js/read_jaxpb.mjs --------------------------------------------------

def _announce(config, line: str) -> None:
  """A line on the terminal, past pytest's output capture (xdist workers too)."""
  capman = config.pluginmanager.getplugin("capturemanager")
  with capman.global_and_fixture_disabled():
    sys.stderr.write(f"\njaxpr-proto tests: {line}\n")
    sys.stderr.flush()


# The first JavaScript test may wait for `npm ci` (its own, or the other xdist
# worker's).
_NPM_CI_TIMEOUT = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def node(request) -> str:
  """node, with tools/js's dependencies: `npm ci` runs once when they are
  missing (under a lock on tools/js: pytest-xdist workers share it)."""
  return helpers.js_node("the JavaScript reader's tests",
                         lambda line: _announce(request.config, line))


def _read_js(node, *args, check=True):
  proc = subprocess.run([node, str(JS_DIR / "read_jaxpb.mjs"), *map(str, args)],
                        capture_output=True, text=True, timeout=120)
  if check:
    assert proc.returncode == 0, proc.stderr
  return proc


@_NPM_CI_TIMEOUT
@pytest.mark.parametrize("name", NAMES)
def test_js_reader_counts_match(node, jaxpb_files, name):
  path = jaxpb_files[name]
  got = json.loads(_read_js(node, "--json", path).stdout)
  want = python_view(path)
  assert got["eqns"] == want["eqns"]
  assert got["by_primitive"] == want["by_primitive"]
  assert list(got["by_primitive"]) == list(want["by_primitive"])  # same order, too
  assert got["format_version"] == want["format_version"]
  assert got["producer"] == want["producer"]


@_NPM_CI_TIMEOUT
def test_js_reader_prints_jaxpr_syntax(node, jaxpb_files):
  out = _read_js(node, jaxpb_files["mlp"]).stdout
  cj = traced("mlp")
  assert "jaxprs[0] = { lambda ; a:f32[3,4] b:f32[4] c:f32[4,2] d:f32[5,3]. let" in out
  for e in cj.jaxpr.eqns:
    assert f" = {e.primitive.name}" in out
  want = python_view(jaxpb_files["mlp"])["eqns"]
  assert (f"eqns: {want['root']} in the root jaxpr, {want['expanded']} counting each "
          f"sub-jaxpr use, {want['stored']} stored") in out
  # Literals print like JAX's (the shortest float32 form).
  out = _read_js(node, jaxpb_files["scan"]).stdout
  assert "0.5:f32[]" in out and "2.0:f32[]" in out


@_NPM_CI_TIMEOUT
def test_js_reader_errors(node, tmp_path, jaxpb_files):
  proc = _read_js(node, tmp_path / "missing.jaxpb", check=False)
  assert proc.returncode == 1 and "missing.jaxpb" in proc.stderr
  bad = tmp_path / "bad.jaxpb"
  bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
  proc = _read_js(node, bad, check=False)
  assert proc.returncode == 1 and "bad.jaxpb" in proc.stderr
  empty = tmp_path / "empty.jaxpb"
  empty.write_bytes(b"")
  proc = _read_js(node, empty, check=False)
  assert proc.returncode == 1 and "not a jaxpr-proto file" in proc.stderr
  proc = _read_js(node, check=False)
  assert proc.returncode == 2 and "usage" in proc.stderr


def test_js_package_is_pinned():
  pkg = json.loads((JS_DIR / "package.json").read_text())
  version = pkg["dependencies"]["protobufjs"]
  assert version[0].isdigit(), "pin protobufjs to an exact version"
  lock = json.loads((JS_DIR / "package-lock.json").read_text())
  assert lock["packages"]["node_modules/protobufjs"]["version"] == version


# --- the schema reference ---------------------------------------------------------------

def test_schema_docs_are_fresh():
  proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schema_docs.py"), "--check"],
                        capture_output=True, text=True, timeout=240)
  assert proc.returncode == 0, proc.stderr


def test_schema_docs_cover_every_message_and_field():
  text = (ROOT / "docs" / "schema.md").read_text()
  for msg in pb.DESCRIPTOR.message_types_by_name.values():
    assert f"### {msg.name}\n" in text
    for field in msg.fields:
      assert f"| {field.number} | `{field.name}` |" in text, (msg.name, field.name)
  for enum in pb.DESCRIPTOR.enum_types_by_name.values():
    assert f"### {enum.name}\n" in text
    for v in enum.values:
      assert f"| {v.number} | `{v.name}` |" in text
