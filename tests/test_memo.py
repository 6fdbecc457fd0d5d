"""The process-wide memos of checking (compat.memo): exact keys, and no
verdict of one file ever given to another that differs from it."""
from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp
from jaxpr_proto.check import param_rules
from jaxpr_proto.compat import memo, type_checks
from tests.test_custom_rules import sin_with_rule


def test_value_key_is_exact():
  k = memo.value_key
  assert k(1) != k(True) and k(1) != k(1.0) and k(0) != k(False)
  assert k((1, 2)) == k((1, 2)) and k((1, 2)) != k((1, True))
  Pair = collections.namedtuple("Pair", "a b")
  assert k(Pair(1, 2)) != k((1, 2))
  assert k(np.dtype("float32")) != k("float32")  # equal in numpy, not here
  assert k(np.float32) != k(np.dtype("float32"))
  assert k(-0.0) != k(0.0) and k(np.float32(-0.0)) != k(np.float32(0.0)) and k(-0j) != k(0j)
  assert k(float("nan")) == k(float("nan")) and k(np.float16(1)) != k(np.float32(1))
  # PyTreeDefs and dataclass records compare what they hold with ==: no key.
  for no_key in ([1], {1: 2}, np.zeros(2), lambda: 0, object(),
                 jax.make_jaxpr(jnp.sin)(1.0), jax.tree.structure((1, 2)),
                 jax.lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))):
    with pytest.raises(memo.NoKey):
      k(no_key)


def _relu_like():
  @jax.custom_jvp
  def f(x):
    return jnp.maximum(x, 0.0)

  @f.defjvp
  def _(primals, tangents):
    (x,), (t,) = primals, tangents
    return f(x), jnp.where(x > 0, t, 0.0)  # uses f itself: a rule that refers to itself
  return f


def test_fingerprint_is_structural():
  f = lambda x: jnp.sin(x) * 2.0
  a, b = jax.make_jaxpr(f)(1.0), jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0)
  assert a is not b and memo.fingerprint(a) == memo.fingerprint(b)
  assert memo.fingerprint(jax.make_jaxpr(lambda x: jnp.sin(x) * 3.0)(1.0)) != memo.fingerprint(a)
  assert memo.fingerprint(jax.make_jaxpr(f)(np.zeros(2, np.float32))) != memo.fingerprint(a)
  # A decoded rule has a key by its saved jaxprs (a traced one by identity: none),
  # also where the rule's own jaxpr calls it again.
  data = jp.dumps(jax.make_jaxpr(_relu_like())(1.0))
  one, two = jp.loads(data), jp.loads(data)
  assert memo.fingerprint(one) == memo.fingerprint(two)
  with pytest.raises(memo.NoKey):
    memo.fingerprint(jax.make_jaxpr(_relu_like())(1.0))


def _rule_file(tangent_out):
  f = sin_with_rule(lambda x, t: jnp.sin(x), tangent_out)
  return jp.dumps(jax.make_jaxpr(f)(1.0))


def test_rule_verdicts_are_per_rule():
  """A sound rule's verdict, memoized, is not given to an unsound rule that
  differs from it in its tangent part only; and back."""
  jp.clear_caches()
  # (a jit in the rule: its jaxpr does not show it linear, so it is traced)
  good = _rule_file(lambda x, t: jnp.cos(x) * jax.jit(lambda t: t * 2.0)(t))
  bad = _rule_file(lambda x, t: jnp.cos(x) * jax.jit(lambda t: t * 2.0)(t) * t)
  for n in (1, 2):
    jp.loads(good)
    assert len(param_rules._JVP_VERDICTS) == n
    with pytest.raises(jp.DecodeError, match="not linear in its tangents"):
      jp.loads(bad)
    assert not jp.check(bad).ok and jp.check(good).ok
    assert len(param_rules._JVP_VERDICTS) == 2
  jp.clear_caches()
  assert not param_rules._JVP_VERDICTS and not type_checks._EQN_TYPES


def _refused_cold_and_warm(bad: bytes, cj, type_memo, prim_name: str):
  """`bad` is refused, naming `prim_name`, with the memos empty, and the same
  way once loading `cj` filled `type_memo`; returns `cj` loaded."""
  def refusal():
    with pytest.raises(jp.DecodeError) as e:
      jp.loads(bad)
    return str(e.value)

  jp.clear_caches()
  cold = refusal()
  good = jp.loads(jp.dumps(cj))
  assert type_memo, "the type memo was not used"
  assert refusal() == cold and prim_name in cold
  return good


def test_type_memo_does_not_hide_a_wrong_type():
  """With the memo warm from a file, the same file with one output type
  changed is refused as it is with the memo empty."""
  f = lambda x, y: jnp.tanh(x @ y) + 1.0
  args = (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
  cj = jax.make_jaxpr(f)(*args)
  m = jp.encode(cj)
  # The tanh's output variable gets the aval of x, f32[2,3], not f32[2,4].
  eqn = next(e for e in m.jaxprs[m.closed_jaxprs[m.root].jaxpr].eqns
             if m.primitives[e.primitive].name == "tanh")
  x_aval = m.jaxprs[m.closed_jaxprs[m.root].jaxpr].invars[0].aval
  eqn.outvars[0].var.aval = x_aval
  good = _refused_cold_and_warm(m.SerializeToString(), cj, type_checks._EQN_TYPES, "tanh")
  np.testing.assert_array_equal(jax.jit(jax.extend.core.jaxpr_as_fun(good))(*args)[0],
                                jax.jit(f)(*args))


def test_custom_type_rule_memo_does_not_hide_a_wrong_type():
  """JAX's own type rules (broadcast_in_dim's, here of a variable and of a
  literal) are memoized too: warm from a file, the same file with a
  broadcast's output type changed is refused as with the memo empty."""
  f = lambda x: x + jnp.ones((3, 4), np.float32) + jnp.float32(2.0)
  x = np.ones((4,), np.float32)
  cj = jax.make_jaxpr(f)(x)
  assert "broadcast_in_dim" in str(cj)
  m = jp.encode(cj)
  root = m.jaxprs[m.closed_jaxprs[m.root].jaxpr]
  broadcasts = [e for e in root.eqns if m.primitives[e.primitive].name == "broadcast_in_dim"]
  assert broadcasts
  wrong = m.avals.add()
  wrong.CopyFrom(m.avals[broadcasts[0].outvars[0].var.aval])
  dims = wrong.shaped_array.shape
  dims[0].constant, dims[1].constant = dims[1].constant, dims[0].constant  # f32[4,3], not f32[3,4]
  broadcasts[0].outvars[0].var.aval = len(m.avals) - 1
  good = _refused_cold_and_warm(m.SerializeToString(), cj, type_checks._CUSTOM_TYPES, "broadcast_in_dim")
  assert any(k[0].name == "broadcast_in_dim" for k in type_checks._CUSTOM_TYPES)
  np.testing.assert_array_equal(jax.extend.core.jaxpr_as_fun(good)(x)[0], f(x))


def test_context_key_follows_the_configuration():
  outside = memo.context_key()
  with jax.enable_x64(not jax.config.jax_enable_x64):
    assert memo.context_key() != outside
  assert memo.context_key() == outside


def test_identity_is_unique_among_live_objects():
  objs = [{} for _ in range(20_000)] + [object() for _ in range(20_000)]
  assert len({memo.identity(x) for x in objs}) == len(objs)


def test_the_eqn_loops_call_no_id(tmp_path):
  """id() raises an audit event, which a library's audit hook (filelock's on
  Python >= 3.12) makes ten times dearer: the loops over every eqn use
  memo.identity. Counted in a fresh process (an audit hook stays for life)."""
  import subprocess
  import sys
  script = """
import sys
import jax, jax.numpy as jnp
import jaxpr_proto as jp
def f(x):
  for k in range(300):
    x = jnp.sin(x) * (k + 1.0)
  return x
cj = jax.make_jaxpr(f)(1.0)
data = jp.dumps(cj)
jp.loads(data)
count = [0]
def hook(event, args):
  if event == "builtins.id":
    count[0] += 1
sys.addaudithook(hook)
jp.loads(jp.dumps(cj))
print(count[0])
"""
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                       env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})
  assert int(out.stdout.split()[-1]) < 100  # not one or more per eqn (600 of them)


def _literals(cj):
  return [x for e in cj.jaxpr.eqns for x in e.invars if isinstance(x, jax.extend.core.Literal)]


def test_literal_values_are_decoded_once_and_shared_read_only():
  """A literal's array or scalar value is decoded once per process: the
  programs that use it share it, as one program's uses do, so it is made
  read-only. A literal of other bytes, or of another type, is its own."""
  def f(x, scale):
    return jnp.sin(x * scale) * 2.0 + 1.0
  a = jp.loads(jp.dumps(jax.make_jaxpr(lambda x: f(x, 3.0))(jnp.ones(3))))
  b = jp.loads(jp.dumps(jax.make_jaxpr(lambda x: f(x, 5.0))(jnp.ones(3))))
  c = jp.loads(jp.dumps(jax.make_jaxpr(lambda x: f(x, 3.0))(jnp.ones(3, jnp.bfloat16))))
  la, lb, lc = _literals(a), _literals(b), _literals(c)
  assert [float(x.val) for x in la] == [3.0, 2.0, 1.0]
  assert [x.val is y.val for x, y in zip(la, lb)] == [False, True, True]
  assert not any(x.val is y.val for x, y in zip(la, lc)), "bfloat16 literals: of another type"
  assert [float(x.val) for x in lb] == [5.0, 2.0, 1.0]
  with pytest.raises(ValueError, match="read-only"):
    la[1].val[...] = 7
  assert float(lb[1].val) == 2.0
  jp.clear_caches()
  d = jp.loads(jp.dumps(jax.make_jaxpr(lambda x: f(x, 5.0))(jnp.ones(3))))
  assert not any(x.val is y.val for x, y in zip(lb, _literals(d))), "clear_caches forgets them"


def test_a_big_literal_is_not_kept():
  """Only literal values of at most 1 KiB are kept for the process: a
  program's big literal is not kept alive after it is dropped."""
  from jaxpr_proto.codec import decoder
  m = jp.encode(jax.make_jaxpr(lambda x: x * 2.0)(np.ones(300, np.float32)))
  jaxpr = m.jaxprs[m.closed_jaxprs[m.root].jaxpr]
  lit = jaxpr.eqns[0].invars[1].literal  # (2.0, made an f32[300] of 2.0s)
  lit.aval = jaxpr.invars[0].aval
  lit.value.array.shape[:] = [300]
  lit.value.array.data = np.full(300, 2, np.float32).tobytes()
  jp.clear_caches()
  out = _literals(jp.loads(m.SerializeToString()))[0].val
  assert out.shape == (300,) and float(out[7]) == 2.0
  assert not decoder._LITERALS
  jp.loads(jp.dumps(jax.make_jaxpr(lambda x: x * 2.0)(np.ones(300, np.float32))))
  assert len(decoder._LITERALS) == 1  # (a scalar's: kept)


def test_params_key_tells_a_repeated_element_apart():
  """The params-alone verdict reads whether a tuple names an axis twice, by
  its elements' equality: its key counts the distinct ones, even where an
  element is keyed by its kind alone."""
  from jaxpr_proto.check.params_alone import params_key
  f, g = jax.tree.structure((1, 2)), jax.tree.structure([1])  # (no exact key: by kind)
  assert params_key({"axes": (f, f)}) != params_key({"axes": (f, g)})
  assert params_key({"axes": (f, g)}) == params_key({"axes": (g, f)})


def test_literals_of_a_file_with_external_arrays_are_not_kept(tmp_path):
  """A load that reads arrays outside the message keeps no literal value for
  the process (what it decodes may be views of its data file)."""
  from jaxpr_proto.codec import decoder
  big = np.arange(4096, dtype=np.float32)
  cj = jax.make_jaxpr(lambda x: (x * 2.0) + big)(np.ones(4096, np.float32))
  path = tmp_path / "f.jaxpb"
  jp.save(cj, path, external_min_bytes=1024)
  assert len(list(tmp_path.iterdir())) == 2, "the constant goes to a data file"
  jp.clear_caches()
  loaded = jp.load(path)
  assert not decoder._LITERALS
  assert [float(x.val) for x in _literals(loaded)] == [2.0]
