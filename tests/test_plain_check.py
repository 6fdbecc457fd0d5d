"""JAX's type check of a jaxpr of plain eqns, run without JAX's per-eqn cost
(compat.type_checks._plain_jaxpr_passes): it may pass a jaxpr only where JAX's
own check (`jax.extend.core.check_jaxpr`) passes it too, and anything it
does not pass goes to JAX's check, which names the error."""
from __future__ import annotations

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpr_proto as jp
from jaxpr_proto import compat
from jaxpr_proto.compat import type_checks
from tests import corpus


def _plain_passes(jaxpr) -> bool:
  with compat.shared_sub_jaxprs_checked_once():
    return type_checks._plain_jaxpr_passes(jaxpr)


def _jax_passes(jaxpr) -> bool:
  try:
    jex_core.check_jaxpr(jaxpr)  # (outside loading: JAX's own, unmemoized)
  except Exception:
    return False
  return True


def _all_jaxprs(jaxpr):
  yield jaxpr
  for eqn in jaxpr.eqns:
    for sub in jex_core.jaxprs_in_params(eqn.params):
      yield from _all_jaxprs(sub)


def test_passes_only_what_jax_passes_in_the_corpus():
  """Every jaxpr of every corpus program, as traced and as decoded: where
  the plain check passes it, JAX's passes it too; and it passes most."""
  plain = total = 0
  for p in corpus.PROGRAMS:
    try:
      cj = corpus.trace(p)
    except Exception:
      continue  # (a program that this JAX cannot trace: test_corpus_sanity's business)
    for top in (cj.jaxpr, jp.loads(jp.dumps(cj)).jaxpr):
      for j in _all_jaxprs(top):
        total += 1
        if _plain_passes(j):
          plain += 1
          assert _jax_passes(j), (p.name, str(j)[:2000])
  print(f"{plain} of {total} jaxprs plain")
  assert plain > total // 3, (plain, total)


def _program():
  def f(x, w):
    y = jnp.tanh(x @ w + 1.0)
    return jnp.ones((4, 3)) * y.sum(), y
  return jax.make_jaxpr(f)(np.ones((4, 3), np.float32), np.ones((3, 3), np.float32)).jaxpr


def _wrong_binder_type(j):  # the first eqn's result declared of another shape
  v = j.eqns[0].outvars[0]
  return _rename(j, v, jex_core.Var(jax.core.ShapedArray((7, *v.aval.shape), v.aval.dtype)))


def _unbound_operand(j):
  e = j.eqns[1]
  return j.replace(eqns=[*j.eqns[:1], e.replace(invars=[jex_core.Var(e.invars[0].aval), *e.invars[1:]]),
                         *j.eqns[2:]])


def _bound_twice(j):
  return _rename(j, j.eqns[2].outvars[0], j.eqns[1].outvars[0], defs_only=True)


def _literal_not_of_its_type(j):
  e = next(e for e in j.eqns if any(isinstance(x, jex_core.Literal) for x in e.invars))
  k = next(i for i, x in enumerate(e.invars) if isinstance(x, jex_core.Literal))
  lit = jex_core.Literal(np.int32(1), e.invars[k].aval)  # an int32 value for an f32[] literal
  return j.replace(eqns=[e.replace(invars=[*e.invars[:k], lit, *e.invars[k + 1:]]) if x is e else x
                         for x in j.eqns])


def _unbound_output(j):
  return j.replace(outvars=[jex_core.Var(j.outvars[0].aval), *j.outvars[1:]])


def _dropped_of_another_type(j):
  e = j.eqns[2]
  dropped = jex_core.DropVar(jax.core.ShapedArray((2,), jnp.float32))
  return j.replace(eqns=[x.replace(outvars=[dropped]) if x is e else x for x in j.eqns],
                   outvars=[v if v is not e.outvars[0] else j.invars[0] for v in j.outvars])


def _custom_rule_type(j):  # broadcast_in_dim (a custom type rule of JAX's) declared of another shape
  e = next(e for e in j.eqns if e.primitive.name == "broadcast_in_dim")
  return _rename(j, e.outvars[0], jex_core.Var(jax.core.ShapedArray((3, 4), jnp.float32)))


def _effect_not_inferred(j):
  eff = jax.make_jaxpr(lambda x: jax.debug.print("{}", x))(1.0).jaxpr.eqns[0].effects
  return j.replace(eqns=[j.eqns[0].replace(effects=eff), *j.eqns[1:]], effects=eff)


def test_a_wrong_eqn_in_a_sub_jaxpr_is_refused():
  """A jit whose jaxpr has a binder of the wrong type: jit's type rule
  checks its jaxpr (JAX's check reaches it), and that check's failure is
  the outer jaxpr's."""
  inner = jax.jit(lambda y: jnp.tanh(y @ y.T @ y + 1.0))
  j = jax.make_jaxpr(lambda x: inner(x) * 2.0)(np.ones((4, 3), np.float32)).jaxpr
  assert _plain_passes(j) and _jax_passes(j)
  k, call = next((k, e) for k, e in enumerate(j.eqns) if e.primitive.name in ("jit", "pjit"))
  sub = call.params["jaxpr"]
  bad_sub = sub.replace(jaxpr=_wrong_binder_type(sub.jaxpr))
  bad_call = call.replace(params={**call.params, "jaxpr": bad_sub})
  bad = j.replace(eqns=[*j.eqns[:k], bad_call, *j.eqns[k + 1:]])
  assert not _jax_passes(bad)
  assert not _plain_passes(bad)


def test_an_int_literal_past_its_type_is_refused_after_one_that_fits():
  """Literals are checked once per type and, for a Python int, value: 1
  fits int32, 2**40 (of the same literal type) does not."""
  j = jax.make_jaxpr(lambda x: (x + 1) * 2)(np.ones(3, np.int32)).jaxpr
  lits = [x for e in j.eqns for x in e.invars if isinstance(x, jex_core.Literal)]
  assert len(lits) == 2 and lits[0].aval is lits[1].aval
  with_int = lambda e, n: e.replace(invars=[e.invars[0], jex_core.Literal(n, lits[0].aval)])
  good = j.replace(eqns=[with_int(j.eqns[0], 1), with_int(j.eqns[1], 2)])
  assert _plain_passes(good) and _jax_passes(good)
  bad = j.replace(eqns=[with_int(j.eqns[0], 1), with_int(j.eqns[1], 1 << 40)])
  assert not _jax_passes(bad)
  assert not _plain_passes(bad)


def _rename(j, old, new, defs_only=False):
  """j with var `old` replaced by `new` where it is bound (and used, unless defs_only)."""
  swap = lambda vs: [new if v is old else v for v in vs]
  eqns = [e.replace(invars=e.invars if defs_only else swap(e.invars), outvars=swap(e.outvars))
          for e in j.eqns]
  return j.replace(eqns=eqns, outvars=j.outvars if defs_only else swap(j.outvars))


@pytest.mark.parametrize("mutate", [
    _wrong_binder_type, _unbound_operand, _bound_twice, _literal_not_of_its_type,
    _unbound_output, _dropped_of_another_type, _custom_rule_type, _effect_not_inferred])
def test_refuses_what_jax_refuses(mutate):
  j = _program()
  assert _plain_passes(j) and _jax_passes(j)
  bad = mutate(j)
  assert not _jax_passes(bad)
  assert not _plain_passes(bad)


def _count_calls(monkeypatch, name):
  """The calls of JAX's core.<name> from now on (a list that grows)."""
  calls = []
  original = getattr(compat.core, name)
  monkeypatch.setattr(compat.core, name, lambda *a: calls.append(1) or original(*a))
  return calls


def test_loading_a_plain_program_skips_jax_per_eqn_check(monkeypatch):
  """A plain program (an unrolled chain; a cond, whose branches JAX's rule
  checks) loads without core._check_jaxpr; one with an effect does not, and
  a wrong type is still refused, by JAX's words."""
  def chain(x):
    for k in range(50):
      x = jnp.tanh(x * 1.01 + k)
    return x
  plain = jp.dumps(jax.make_jaxpr(chain)(np.ones(3, np.float32)))
  cond = jp.dumps(jax.make_jaxpr(lambda x: jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x))(
      np.ones(3, np.float32)))
  effect = jp.dumps(jax.make_jaxpr(lambda x: jax.debug.print("{}", x) or x * 2)(1.0))
  jp.clear_caches()
  calls = _count_calls(monkeypatch, "_check_jaxpr")
  jp.loads(plain)
  jp.loads(cond)
  assert not calls
  jp.loads(effect)
  assert calls
  calls.clear()
  j = _program()
  bad = jp.dumps(jex_core.ClosedJaxpr(_wrong_binder_type(j), []))
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\].*inconsistently typed as f32\[4,3\]"):
    jp.loads(bad)
  assert calls


def test_jits_with_literal_arguments_are_checked_once(monkeypatch):
  """jit's rule reads its operands' types only: 50 calls of one jit, each
  with a literal of its own (a layer's index), run it once, not 50 times."""
  layer = jax.jit(lambda x, k: jnp.tanh(x * 0.5 + k))

  def f(x):
    for k in range(50):
      x = layer(x, k)
    return x
  data = jp.dumps(jax.make_jaxpr(f)(np.ones(3, np.float32)))
  calls = _count_calls(monkeypatch, "_check_call")
  jp.clear_caches()
  jp.loads(data)
  assert len(calls) == 1


def test_a_bad_jaxpr_under_nested_jits_is_checked_in_linear_steps(monkeypatch):
  """A wrong binder at the bottom of 16 nested jits: each level's plain
  check fails and JAX's check runs instead, and a sub-jaxpr that failed is
  not checked again (review: 2**16 jit rule calls, 10 s and doubling)."""
  f = lambda x: jnp.tanh(x * 2.0)
  for _ in range(16):
    f = (lambda g: lambda x: g(x) + 1.0)(jax.jit(f))
  j = jax.make_jaxpr(f)(np.ones(3, np.float32)).jaxpr

  def break_innermost(j):
    k, call = next(((k, e) for k, e in enumerate(j.eqns) if e.primitive.name in ("jit", "pjit")),
                   (None, None))
    if call is None:
      return _wrong_binder_type(j)
    sub = call.params["jaxpr"]
    bad = sub.replace(jaxpr=break_innermost(sub.jaxpr))
    return j.replace(eqns=[*j.eqns[:k], call.replace(params={**call.params, "jaxpr": bad}),
                           *j.eqns[k + 1:]])
  data = jp.dumps(jex_core.ClosedJaxpr(break_innermost(j), []))
  calls = _count_calls(monkeypatch, "_check_call")
  jp.clear_caches()
  with pytest.raises(jp.DecodeError, match=r"^eqn\[0\]\.params\.jaxpr\.eqn\[0\].*inconsistently typed"):
    jp.loads(data)
  assert len(calls) <= 4 * 16, len(calls)


def test_key_reuse_is_checked_in_sub_jaxprs_with_jaxs_flag():
  """With jax_debug_key_reuse, JAX's check_jaxpr of a jit's jaxpr checks
  key reuse too: the plain check stands aside, and the file is refused as
  before."""
  inner = jax.jit(lambda k: jax.random.uniform(k) + jax.random.uniform(k))
  data = jp.dumps(jax.make_jaxpr(lambda k: inner(k) * 2.0)(jax.random.key(0)))
  jp.clear_caches()
  jp.loads(data)
  with jax.debug_key_reuse(True):
    jp.clear_caches()
    with pytest.raises(jp.DecodeError, match="KeyReuseError"):
      jp.loads(data)
