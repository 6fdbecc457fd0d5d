"""A custom_jvp rule shown linear by its jaxpr (check.linearity) is not
traced on load, and the pass never passes a rule that tracing refuses."""
from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import pytest

import jaxpr_proto as jp
from jaxpr_proto.check import linearity, param_rules
from jaxpr_proto.codec import custom_rules
from tests import corpus
from tests.test_custom_rules import sin_with_rule

checker = importlib.import_module("jaxpr_proto.check.checker")


def _rules(cj):
  """(jvp ClosedJaxpr, primals, outputs) of each custom_jvp rule a loaded program calls."""
  out, todo, seen = [], [cj.jaxpr], set()
  while todo:
    j = todo.pop()
    for e in j.eqns:
      if e.primitive.name == "custom_jvp_call":
        rule = custom_rules.rule_of(e.params["jvp_jaxpr_fun"])
        sig = rule.signature() if isinstance(rule, custom_rules.JvpRule) else None
        call, n = e.params["call_jaxpr"], e.params["num_consts"]
        if sig is not None and id(rule) not in seen:
          seen.add(id(rule))
          out.append((sig[0], len(call.in_avals) - n, len(call.out_avals)))
      todo.extend(getattr(s, "jaxpr", s) for s in jax.extend.core.jaxprs_in_params(e.params))
  return out


def _traced_verdict(jvp, n_primals, n_outs):
  """What the param checks find by tracing: None, or why grad cannot linearize it."""
  return (param_rules._primals_of_tangents(jvp, n_primals, n_outs)
          or param_rules._not_linear(jvp, n_primals, n_outs))


def test_relu_and_friends_are_shown_linear():
  """The rules of jax.nn's functions that an MLP calls are decided by the
  pass (no tracing), with the verdict tracing gives."""
  x = jnp.linspace(-1.0, 1.0, 8)
  for f in (jax.nn.relu, jax.nn.relu6, jax.nn.softplus, jnp.logaddexp):
    cj = jp.loads(jp.dumps(jax.make_jaxpr(lambda x: f(x, x) if f is jnp.logaddexp else f(x))(x)))
    rules = _rules(cj)
    assert rules, f
    shown = [linearity.shows_linear(*r) for r in rules]
    assert any(shown) or f is not jax.nn.relu, f
    for r, s in zip(rules, shown):
      if s:
        assert _traced_verdict(*r) is None, f


def test_a_rule_shown_linear_is_not_traced(monkeypatch):
  traced = []
  monkeypatch.setattr(param_rules, "_not_linear", lambda *a: traced.append(a))
  monkeypatch.setattr(param_rules, "_primals_of_tangents", lambda *a: traced.append(a))
  jp.clear_caches()
  jp.loads(jp.dumps(jax.make_jaxpr(jax.nn.relu)(jnp.ones(3))))
  assert traced == []
  jp.clear_caches()
  jp.loads(jp.dumps(jax.make_jaxpr(sin_with_rule(
      lambda x, t: jnp.sin(x), lambda x, t: jnp.cos(x) * jax.jit(lambda t: t * 2.0)(t)))(1.0)))
  assert traced  # (a jit inside: not shown, traced)
  jp.clear_caches()


@pytest.mark.parametrize("tangent_out, primal_out", [
    (lambda x, t: t * t, None),
    (lambda x, t: jnp.sin(t), None),
    (lambda x, t: jnp.where(t > 0, t, 0.0), None),  # a tangent predicate
    (lambda x, t: t / t, None),
    (lambda x, t: jnp.cos(x) * t, lambda x, t: jnp.sin(x) + t),  # a primal output reads t
])
def test_rules_that_tracing_refuses_are_never_shown_linear(tangent_out, primal_out):
  f = sin_with_rule(primal_out or (lambda x, t: jnp.sin(x)), tangent_out)
  # (files with such rules are refused on load: the rule's jaxpr, traced here)
  jvp = jax.make_jaxpr(lambda x, t: f.jvp((x,), (t,)))(1.0, 1.0)
  assert _traced_verdict(jvp, 1, 1) is not None  # (the case is one that tracing refuses)
  assert not linearity.shows_linear(jvp, 1, 1)


def test_the_pass_agrees_with_tracing_on_the_corpus():
  """Every corpus rule the pass shows linear is one that tracing passes."""
  shown = 0
  for p in corpus.PROGRAMS:
    try:
      cj = jp.loads(jp.dumps(corpus.trace(p)))
    except Exception:
      continue
    for r in _rules(cj):
      if linearity.shows_linear(*r):
        shown += 1
        assert _traced_verdict(*r) is None, p.name
  assert shown >= 5
