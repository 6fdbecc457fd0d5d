"""A file that passed every check is remembered by content (check.loading):
the same bytes load again without the checks, as the same program, and
nothing else ever skips them."""
from __future__ import annotations

import importlib
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp
from jaxpr_proto.codec import names
from jaxpr_proto.errors import DecodeError

loading = importlib.import_module("jaxpr_proto.check.loading")  # (jp.check shadows the package)


def _program():
  def f(w, x):
    h = jnp.tanh(x @ w)
    return jax.nn.relu(h).sum() * 2.0, jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, h)
  args = (np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
          np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3))
  return jax.make_jaxpr(jax.grad(lambda w, x: f(w, x)[0]))(*args), args


def test_the_same_bytes_load_again_without_the_checks(runs):
  cj, args = _program()
  data = jp.dumps(cj)
  first = jp.loads(data)
  second = jp.loads(data)  # not checked
  third = jp.loads(data)  # not checked, and from what the second read (loading._WARM)
  assert runs[0] == 1
  want = jax.core.eval_jaxpr(cj.jaxpr, cj.consts, *args)
  g0 = jax.grad(lambda w: jax.core.eval_jaxpr(cj.jaxpr, cj.consts, w, args[1])[0].sum())(args[0])
  for again in (second, third):
    # the same program, as fresh objects
    assert again is not first and again.jaxpr is not first.jaxpr
    assert again.jaxpr.eqns[0] is not first.jaxpr.eqns[0]
    assert again.jaxpr.pretty_print(source_info=True, name_stack=True) == \
        cj.jaxpr.pretty_print(source_info=True, name_stack=True)
    got = jax.core.eval_jaxpr(again.jaxpr, again.consts, *args)
    for a, b in zip(want, got):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    g = jax.grad(lambda w: jax.core.eval_jaxpr(again.jaxpr, again.consts, w, args[1])[0].sum())
    np.testing.assert_array_equal(np.asarray(g(args[0])), np.asarray(g0))
  assert jp.dumps(third) == jp.dumps(first) == data
  # unpickling (a task's program, sent to many): a pickle of this process's
  # own writer is trusted, and not checked at all (test_pickle)
  blob = pickle.dumps(first)
  assert [str(pickle.loads(blob)) for _ in range(3)] == [str(cj)] * 3
  assert runs[0] == 1


def test_what_the_verdict_depends_on(runs):
  data = jp.dumps(_program()[0])
  jp.loads(data, typecheck=False)
  jp.loads(data, typecheck=False)
  assert runs[0] == 1
  jp.loads(data)  # JAX's type rules were not among the checks passed
  jp.loads(data)
  jp.loads(data, typecheck=False)  # (they were now)
  assert runs[0] == 2
  jp.loads(data, unresolved="placeholder")
  assert runs[0] == 3
  jp.loads(data, callbacks={"x.y": print})  # callbacks bound for one load: always checked
  jp.loads(data, callbacks={"x.y": print})
  assert runs[0] == 5
  names.note_change()  # a name registered since: what the file names may differ
  jp.loads(data)
  jp.loads(data)
  assert runs[0] == 6
  with jax.enable_x64(not jax.config.jax_enable_x64):  # another JAX configuration
    jp.loads(data)
  assert runs[0] == 7
  jp.clear_caches()
  jp.loads(data)
  assert runs[0] == 8
  other = jp.dumps(_program()[0], debug_info=False)  # other bytes, the same program
  jp.loads(other)
  assert runs[0] == 9


def test_a_refused_file_is_refused_again(runs):
  m = jp.encode(_program()[0])
  eqns = m.jaxprs[m.closed_jaxprs[m.root].jaxpr].eqns
  k = next(k for k, e in enumerate(eqns) if k and e.invars and e.invars[0].HasField("var"))
  eqns[k].invars[0].var = 999  # used before it is defined
  data = m.SerializeToString()
  for _ in range(2):
    with pytest.raises(DecodeError, match="used before it is defined") as e:
      jp.loads(data)
    assert e.value.path == f"eqn[{k}].invars[0]"
  assert runs[0] == 2


def test_files_with_external_arrays_are_checked_each_time(runs, tmp_path):
  w = np.arange(1 << 18, dtype=np.float32)
  cj = jax.make_jaxpr(lambda x: x + jnp.asarray(w)[:4])(np.zeros(4, np.float32))
  path = tmp_path / "p.jaxpb"
  jp.save(cj, path, external_min_bytes=1024)
  for _ in range(2):
    assert str(jp.load(path)) == str(cj)
  assert runs[0] == 2


def test_symbolic_dims_load_again_in_a_scope_of_their_own(runs):
  n, = jax.export.symbolic_shape("n")
  # (relu's custom_jvp rule: its jaxprs are decoded when first used, after the rest)
  f = lambda x: (jax.nn.relu(x) * jnp.sin(x)).sum(0)
  cj = jax.make_jaxpr(f)(jax.ShapeDtypeStruct((n, 4), jnp.float32))
  data = jp.dumps(cj)
  loaded = [jp.loads(data) for _ in range(3)]
  assert runs[0] == 1
  for again in loaded:
    assert str(again) == str(cj)
    assert jp.dumps(again) == data  # (its dims all of one scope, which encoding requires)


def _literal_values(cj):
  """The values of the literals of a ClosedJaxpr, its sub-jaxprs' and its
  custom_jvp rules' jaxprs."""
  from jaxpr_proto.codec import custom_rules
  from tests.primitive_coverage import eqns_of

  def rule_jaxprs(eqn):
    rule = custom_rules.rule_of(eqn.params.get("jvp_jaxpr_fun"))
    return [rule.signature()[0].jaxpr] if rule is not None else []
  return [a.val for e in eqns_of(cj, also=rule_jaxprs) for a in e.invars if hasattr(a, "val")]


def _with_a_jax_array_literal_in_its_rule(x):
  """A program calling safe_log, and its bytes where the literal of its jvp
  rule (max(x, 1e-3)) is a jax.Array, as JAX's own literals may be."""
  from jaxpr_proto.v1 import jaxpr_pb2 as pb
  from tests.corpus import safe_log
  cj = jax.make_jaxpr(lambda x: safe_log(x * x + 1.0).sum())(x)
  m = jp.encode(cj)
  rule_jaxpr = m.jaxprs[m.closed_jaxprs[m.rules[0].jvp.jvp].jaxpr]
  lits = [a.literal for e in rule_jaxpr.eqns for a in e.invars if a.HasField("literal")]
  assert len(lits) == 1
  lits[0].value.array.kind = pb.ARRAY_KIND_JAX
  return cj, m.SerializeToString()


def test_a_rule_decoded_while_jax_traces_holds_no_tracers(runs):
  """A loaded program's custom_jvp rule is decoded at its first use where
  loading skips the checks (they decode every rule at once), and JAX uses
  it while tracing (a compiled gradient): its literals stay values, not
  tracers that the compiled program would take as inputs."""
  from jax.extend.core import jaxpr_as_fun
  x = np.linspace(0.1, 1, 4, dtype=np.float32)
  cj, data = _with_a_jax_array_literal_in_its_rule(x)
  want = jax.jit(jax.grad(lambda x: jaxpr_as_fun(cj)(x)[0]))(x)
  for _ in range(3):  # checked, then twice without the checks
    got = jp.loads(data)
    compiled = jax.jit(jax.grad(lambda x: jaxpr_as_fun(got)(x)[0])).lower(x).compile()
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.asarray(want))
    assert not any(isinstance(v, jax.core.Tracer) for v in _literal_values(got))
  assert runs[0] == 1


def test_loading_inside_a_trace_makes_no_tracers(runs):
  x = np.linspace(0.1, 1, 4, dtype=np.float32)
  _, data = _with_a_jax_array_literal_in_its_rule(x)
  loaded = []

  @jax.jit
  def f(x):
    loaded.append(jp.loads(data))
    return jax.extend.core.jaxpr_as_fun(loaded[-1])(x)[0]
  f(x)
  assert not any(isinstance(v, jax.core.Tracer) for v in _literal_values(loaded[0]))
