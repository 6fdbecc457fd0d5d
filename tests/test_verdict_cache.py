"""The persistent verdict cache (check/verdict_cache.py): a verdict found
there is the verdict a cold check gives, an entry that does not check out
is ignored, and another process reuses the folder."""
from __future__ import annotations

import importlib
import json
import os
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp
from tests.helpers import run_json

loading = importlib.import_module("jaxpr_proto.check.loading")  # (jp.check shadows the package)
verdict_cache = importlib.import_module("jaxpr_proto.check.verdict_cache")


@pytest.fixture
def folder(tmp_path):
  """A verdict cache folder in use, empty, and the process's memos cleared."""
  d = tmp_path / "verdicts"
  jp.config.update("verdict_cache_dir", str(d))
  jp.clear_caches()
  yield d
  jp.config.update("verdict_cache_dir", None)
  jp.clear_caches()


def _program(scale=2.0):
  def f(w, x):
    return jax.nn.relu(jnp.tanh(x @ w)).sum() * scale
  args = (np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
          np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3))
  return jax.make_jaxpr(jax.grad(f))(*args), args


def _entries(d):
  return sorted(p for p in d.iterdir() if p.is_file()) if d.exists() else []


def _outcome(data, **kw):
  """What loading gives: the program's text, or the error's class, path and message."""
  try:
    return ("ok", str(jp.loads(data, **kw)))
  except jp.Error as e:
    return (type(e).__name__, getattr(e, "path", None), str(e))


def _cold(data, **kw):
  """The outcome with no cache and no memo."""
  folder = jp.config.verdict_cache_dir
  jp.config.update("verdict_cache_dir", None)
  jp.clear_caches()
  try:
    return _outcome(data, **kw)
  finally:
    jp.config.update("verdict_cache_dir", folder)
    jp.clear_caches()


def test_config_setting_and_environment(tmp_path):
  assert jp.config.verdict_cache_dir is None  # off unless asked for
  with pytest.raises(AttributeError, match="no setting"):
    jp.config.update("verdict_cache_folder", "x")
  script = ("import json, os, sys\n"
            "os.environ['JAXPR_PROTO_VERDICT_CACHE_DIR'] = sys.argv[1]\n"
            "import jaxpr_proto as jp\n"
            "print(json.dumps(jp.config.verdict_cache_dir))")
  assert run_json(script, tmp_path) == str(tmp_path)


def test_a_kept_verdict_skips_the_checks(folder, runs):
  cj, args = _program()
  data = jp.dumps(cj)
  first = jp.loads(data)
  assert runs[0] == 1 and len(_entries(folder)) == 1
  jp.clear_caches()  # (as a fresh process: only the folder remembers)
  again = jp.loads(data)
  assert runs[0] == 1
  assert str(again) == str(first) == str(cj) and jp.dumps(again) == data
  want = jax.core.eval_jaxpr(cj.jaxpr, cj.consts, *args)
  got = jax.core.eval_jaxpr(again.jaxpr, again.consts, *args)
  for a, b in zip(want, got):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_verdict_without_type_rules_is_not_one_with_them(folder, runs):
  data = jp.dumps(_program()[0])
  jp.loads(data, typecheck=False)
  jp.clear_caches()
  jp.loads(data, typecheck=False)
  assert runs[0] == 1
  jp.clear_caches()
  jp.loads(data)  # JAX's type rules were not among the checks passed
  assert runs[0] == 2
  jp.clear_caches()
  jp.loads(data)
  jp.loads(data, typecheck=False)
  assert runs[0] == 2
  jp.clear_caches()
  jp.loads(data, unresolved="placeholder")  # another option: another verdict
  assert runs[0] == 3


def test_a_flipped_byte_is_refused_as_when_cold(folder):
  """Every file one byte away from a kept one gives what a cold load gives."""
  cj, _ = _program()
  data = jp.dumps(cj)
  jp.loads(data)
  assert _entries(folder)
  rng = random.Random(32)
  positions = rng.sample(range(len(data)), min(60, len(data)))
  for i in positions:
    bad = bytearray(data)
    bad[i] ^= 1 << rng.randrange(8)
    bad = bytes(bad)
    jp.clear_caches()
    warm = _outcome(bad)
    assert warm == _cold(bad), f"byte {i}"
    jp.clear_caches()
    assert _outcome(bad) == warm, f"byte {i}, kept"  # (its own verdict kept, if it passed)


def test_a_changed_type_is_refused_as_when_cold(folder):
  cj, _ = _program()
  data = jp.dumps(cj)
  jp.loads(data)
  m = jp.parse(data)
  a = next(a for a in m.avals if a.WhichOneof("kind") == "shaped_array" and a.shaped_array.shape)
  a.shaped_array.shape[0].constant += 1
  bad = m.SerializeToString(deterministic=True)
  jp.clear_caches()
  got = _outcome(bad)
  assert got[0] != "ok" and got == _cold(bad)


def _corruptions(raw: bytes, other: bytes):
  yield "truncated", raw[:len(raw) // 2]
  yield "empty", b""
  yield "one byte flipped", raw[:-40] + bytes([raw[-40] ^ 1]) + raw[-39:]
  yield "its digest flipped", raw[:-1] + bytes([raw[-1] ^ 1])
  yield "another key's entry", other
  head = len(verdict_cache.MAGIC) + len(verdict_cache.VERSIONS) + len("\nfile\n")
  digest, value = raw[head:head + 32], raw[head + 36:-32]
  yield "other versions, sealed", verdict_cache.entry("file", digest, value, b"jax 0.0.1")
  yield "another kind, sealed", verdict_cache.entry("jvp", digest, value)
  yield "another value, sealed", verdict_cache.entry("file", digest, value + b"\x01")
  yield "garbage", os.urandom(len(raw))


def test_entries_that_do_not_check_out_are_ignored(folder, runs):
  data, other = jp.dumps(_program()[0]), jp.dumps(_program(3.0)[0])
  jp.loads(other)
  other_entry = _entries(folder)[0].read_bytes()
  jp.loads(data)
  (entry,) = set(_entries(folder)) - {p for p in _entries(folder) if p.read_bytes() == other_entry}
  raw = entry.read_bytes()
  n = runs[0]
  for what, bad in _corruptions(raw, other_entry):
    entry.write_bytes(bad)
    jp.clear_caches()
    assert str(jp.loads(data)) == str(jp.loads(other) and jp.loads(data)), what
    assert runs[0] > n, f"{what}: trusted"
    n = runs[0]
    assert entry.read_bytes() == raw, what  # (written anew by the check)
    jp.clear_caches()
    jp.loads(data)
    assert runs[0] == n, what


def test_only_verdicts_on_the_bytes_alone_are_kept(folder):
  # a primitive of the user's: its rules are code the key cannot see
  p = jax.extend.core.Primitive("verdict_cache_test_prim")
  p.def_abstract_eval(lambda x: x)
  jp.register_primitive(p, namespace="verdict_cache_test")
  jp.loads(jp.dumps(jax.make_jaxpr(lambda x: p.bind(x))(1.0)))
  # a host callback: bound to the reading process's function
  jp.register_callback(print, name="verdict_cache_test.print", replace=True)
  jp.loads(jp.dumps(jax.make_jaxpr(lambda x: jax.debug.callback(print, x) or x)(1.0)))
  # a mesh in scope: JAX's configuration has no exact text
  data = jp.dumps(_program(5.0)[0])
  mesh = jax.sharding.AbstractMesh((1,), ("x",))
  with jax.sharding.use_abstract_mesh(mesh):
    assert verdict_cache.context() is None
    try:
      jp.loads(data)
    except jp.DecodeError:
      pass  # (JAX 0.12: a jit's context mesh is then the abstract one, refused)
  assert _entries(folder) == []
  jp.loads(jp.dumps(_program(6.0)[0]))
  assert len(_entries(folder)) == 1


def test_the_folder_stays_within_its_bound(folder):
  jp.config.update("verdict_cache_max_bytes", 2000)
  try:
    for k in range(40):
      jp.loads(jp.dumps(_program(float(k))[0]))
  finally:
    jp.config.update("verdict_cache_max_bytes", 64 << 20)
  sizes = [p.stat().st_size for p in _entries(folder)]
  assert 0 < sum(sizes) <= 2000 and len(sizes) < 40
  assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]  # (renamed into place)


_PROCESS = """
import hashlib, json, os, sys
os.environ["JAXPR_PROTO_VERDICT_CACHE_DIR"] = sys.argv[1]
import jaxpr_proto as jp
from jaxpr_proto.check import checker
runs = [0]
run = checker.run
def counted(*a, **k):
  runs[0] += 1
  return run(*a, **k)
checker.run = counted
data = open(sys.argv[2], "rb").read()
cj = jp.loads(data)
print(json.dumps([runs[0], hashlib.sha256(jp.dumps(cj)).hexdigest()]))
"""


def test_another_process_reuses_the_folder(tmp_path):
  cj, _ = _program(7.0)
  data = jp.dumps(cj)
  path = tmp_path / "p.jaxpb"
  path.write_bytes(data)
  import hashlib
  digest = hashlib.sha256(data).hexdigest()
  assert run_json(_PROCESS, tmp_path / "verdicts", path) == [1, digest]
  assert run_json(_PROCESS, tmp_path / "verdicts", path) == [0, digest]
  assert run_json(_PROCESS, tmp_path / "other", path) == [1, digest]


def _jit_rule_program(k: float, bad: bool = False):
  """A program calling a custom_jvp function whose rule has a jit inside
  (not shown linear by its jaxpr: traced), times k; its rule's tangent part
  is not linear if `bad`."""
  from tests.test_custom_rules import sin_with_rule
  tangent = (lambda x, t: jnp.cos(x) * jax.jit(lambda t: t * 2.0)(t) * (t if bad else 1.0))
  f = sin_with_rule(lambda x, t: jnp.sin(x), tangent)
  return jp.dumps(jax.make_jaxpr(lambda x: f(x) * k)(1.0))


def test_rule_verdicts_are_kept_per_rule(folder, monkeypatch):
  """A custom_jvp rule's traced verdict is kept by the rule's encoding: a
  later file calling the same rule does not trace it, and gets the verdict
  a cold check gives, a refusal included."""
  from jaxpr_proto.check import param_rules
  good, bad = _jit_rule_program(2.0), _jit_rule_program(2.0, bad=True)
  jp.loads(good)
  cold_bad = _outcome(bad)
  assert cold_bad[0] == "DecodeError" and "not linear" in cold_bad[2]
  assert len([p for p in _entries(folder) if p.name.startswith("jvp-")]) == 2
  traced = []
  monkeypatch.setattr(param_rules, "_not_linear", lambda *a: traced.append(a))
  monkeypatch.setattr(param_rules, "_primals_of_tangents", lambda *a: traced.append(a))
  jp.clear_caches()
  jp.loads(_jit_rule_program(3.0))  # another file, the same rule
  assert _outcome(_jit_rule_program(3.0, bad=True)) == (cold_bad[0], cold_bad[1],
                                                         cold_bad[2].replace("2.0", "3.0"))
  assert traced == []
