"""The text forms of a Module (.txtpb, .json): exact, deterministic round trips.

`PROGRAMS` / `traced()` are also used by test_cli.py and test_cross_language.py.
"""
from __future__ import annotations

import functools
import json
import math
import pathlib
import re
import shutil
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxpr_proto as jp
from jaxpr_proto.wire import files as tf
from jaxpr_proto.v1 import jaxpr_pb2 as pb

ROOT = pathlib.Path(__file__).resolve().parent.parent


# --- a few real programs ------------------------------------------------------

@jax.custom_vjp
def clip_grad(x):
  return x


clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def mlp(w1, b1, w2, x):
  h = jax.nn.relu(x @ w1 + b1)
  return jnp.tanh(h @ w2).sum()


def scan_cumsum(xs, c0):
  def body(c, x):
    c = c * 0.5 + jnp.sin(x)
    return c, c * 2.0
  return lax.scan(body, c0, xs)


def cond_switch(x, i):
  y = lax.cond(i > 0, jnp.sin, jnp.cos, x)
  return lax.switch(i, [lambda v: v + 1.0, lambda v: v * 2.0, jnp.exp], y)


def custom_vjp_prog(x):
  return jnp.sum(clip_grad(x * 3.0) ** 2)


F32 = np.float32
PROGRAMS = {
    "mlp": (mlp, (np.ones((3, 4), F32), np.zeros(4, F32), np.ones((4, 2), F32),
                  np.ones((5, 3), F32))),
    "scan": (scan_cumsum, (np.arange(6, dtype=F32), np.zeros(3, F32))),
    "cond": (cond_switch, (np.ones(3, F32), np.int32(1))),
    "custom_vjp": (custom_vjp_prog, (np.linspace(-1, 1, 4, dtype=F32),)),
}


@functools.cache
def traced(name: str):
  fn, args = PROGRAMS[name]
  return jax.make_jaxpr(fn)(*args)


def args_of(name: str):
  return PROGRAMS[name][1]


# --- round trips --------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("form", [tf.TEXT, tf.JSON])
def test_round_trip_is_exact(name, form):
  m = jp.encode(traced(name))
  data = m.SerializeToString(deterministic=True)
  text = tf.to_bytes(m, form)
  assert tf.to_bytes(m, form) == text  # deterministic
  m2 = tf.from_bytes(text, form)
  assert m2 == m
  assert m2.SerializeToString(deterministic=True) == data
  # ... and through a second text round trip, still the same text.
  assert tf.to_bytes(m2, form) == text
  assert str(jp.decode(m2)) == str(traced(name))


def test_files_round_trip(tmp_path):
  m = jp.encode(traced("scan"))
  b0 = tmp_path / "a.jaxpb"
  b0.write_bytes(m.SerializeToString(deterministic=True))
  for src, dst in ((b0, "b.txtpb"), ("b.txtpb", "c.json"), ("c.json", "d.jaxpb")):
    tf.write_module(tf.read_module(tmp_path / src), tmp_path / dst)
  assert (tmp_path / "d.jaxpb").read_bytes() == b0.read_bytes()
  assert (tmp_path / "b.txtpb").read_text().startswith("# proto-file: jaxpr_proto/v1/jaxpr.proto")
  assert str(jp.load(tmp_path / "d.jaxpb")) == str(traced("scan"))


@pytest.mark.parametrize("ext,form", [(".jaxpb", tf.BINARY), (".txtpb", tf.TEXT), (".json", tf.JSON),
                                      (".jaxpr", tf.JAXPR), (".bin", tf.BINARY)])
def test_save_load_and_check_by_extension(tmp_path, ext, form):
  """jp.save writes the form a path's extension names, and jp.load and
  jp.check read it so (a .txtpb used to be written and read as .jaxpb bytes)."""
  cj = traced("scan")
  path = tmp_path / f"prog{ext}"
  jp.save(cj, path)
  assert tf.from_bytes(path.read_bytes(), form) == jp.encode(cj)
  assert str(jp.load(path)) == str(cj)
  assert jp.check(path).ok


def test_awkward_values_survive():
  """Floats at the edges, raw bytes, 64-bit and big ints, unicode."""
  m = pb.Module()
  m.format_version.major = 1
  m.strings.extend(["héllo \"world\"\n\t\x00", "∂/∂x", ""])
  c = m.closed_jaxprs.add()
  for x in [0.1, -0.0, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 1 / 3]:
    c.consts.add().float = x
  c.consts.add().float = math.nan
  c.consts.add().bytes = bytes(range(256))
  c.consts.add().int = -(2**63)
  c.consts.add().int = 2**63 - 1
  c.consts.add().big_int = str(3**90)
  c.consts.add().array.data = np.array([np.nan, -0.0, np.inf], np.float32).tobytes()
  data = m.SerializeToString(deterministic=True)
  for form in (tf.TEXT, tf.JSON):
    m2 = tf.from_bytes(tf.to_bytes(m, form), form)
    assert m2.SerializeToString(deterministic=True) == data, form


def test_json_is_plain_json_with_proto_names():
  m = jp.encode(traced("mlp"))
  doc = json.loads(tf.to_json(m))
  assert doc["formatVersion"]["major"] == 1
  names = [p["name"] for p in doc["primitives"]]
  assert "dot_general" in names and "max" in names or "custom_jvp_call" in names
  # Every eqn's primitive, as a jq query would list it.
  used = {doc["primitives"][e.get("primitive", 0)]["name"]
          for j in doc["jaxprs"] for e in j.get("eqns", [])}
  assert "dot_general" in used


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_readme_jq_query(tmp_path):
  readme = (ROOT / "README.md").read_text()
  match = re.search(r"^\$ jq -c '([^']+)' predict\.json$", readme, re.M)
  assert match, "README.md shows a jq query on predict.json"
  path = tmp_path / "mlp.json"
  tf.write_module(jp.encode(traced("mlp")), path)
  out = subprocess.run(["jq", "-c", match.group(1), str(path)], capture_output=True,
                       text=True, timeout=60, check=True).stdout
  from jaxpr_proto.wire import info
  assert json.loads(out) == info.module_info(jp.encode(traced("mlp")))["by_primitive"]


# --- errors -------------------------------------------------------------------

def test_bad_text_is_a_decode_error():
  with pytest.raises(jp.DecodeError, match="not a valid .txtpb"):
    tf.from_text("format_version { major: 1 }\nno_such_field: 3\n")
  with pytest.raises(jp.DecodeError, match="not a valid jaxpr-proto JSON"):
    tf.from_json('{"formatVersion": {"major": 1}, "noSuchField": 1}')
  with pytest.raises(jp.DecodeError, match="JSON"):
    tf.from_json("{not json")
  with pytest.raises(jp.DecodeError, match="UTF-8"):
    tf.from_bytes(b"\xff\xfe", tf.TEXT)


def test_header_check(tmp_path):
  with pytest.raises(jp.DecodeError, match="not a jaxpr-proto file"):
    tf.check_header(pb.Module())
  m = pb.Module()
  m.format_version.major = 2
  with pytest.raises(jp.VersionError):
    tf.check_header(m)
  p = tmp_path / "x.json"
  p.write_text('{"formatVersion": {"major": 2}}')
  with pytest.raises(jp.VersionError):
    tf.read_module(p)


def test_form_of():
  assert tf.form_of("a/b.JAXPB") == tf.BINARY
  assert tf.form_of("x.txtpb") == tf.TEXT
  assert tf.form_of("x.json") == tf.JSON
  assert tf.form_of("x.bin") == tf.BINARY
  assert tf.form_of("x.bin", None) is None
