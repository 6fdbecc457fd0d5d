"""A program whose custom rules reach their own functions again through
their rules: odeint's bwd solves an augmented ODE with odeint, whose bwd
solves a bigger one, and so on (issue 30). The encoder traces rules eagerly,
so it bounds that tower (custom_rules.MAX_VJP_TOWER); saving takes time in
proportion to the program, and the loaded program prints, runs and
differentiates as the original.

Each case runs in a fresh process with a timeout, so that a regression fails
instead of hanging the suite (the tower never ended: a fresh process did not
finish saving in 400 s)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from jaxpr_proto.codec import custom_rules

_PROGRAM = textwrap.dedent("""
    import json, sys, time
    import jax, jax.numpy as jnp, numpy as np
    from jax.experimental.ode import odeint
    from jax.extend.core import jaxpr_as_fun
    import jaxpr_proto as jp

    ts = jnp.linspace(0., 1., 4)
    def f(y0, t):
      return odeint(lambda y, t: -jnp.sin(y), y0, t)
    which = sys.argv[1]
    if which == "f":
      cj, args = jax.make_jaxpr(f)(1.0, ts), (1.0, ts)
    else:
      cj, args = jax.make_jaxpr(jax.grad(lambda y0: f(y0, ts).sum()))(1.0), (1.0,)
    t0 = time.perf_counter()
    data = jp.dumps(cj)
    t1 = time.perf_counter()
    cj2 = jp.loads(data)
    t2 = time.perf_counter()
    out = dict(dumps_s=t1 - t0, loads_s=t2 - t1, printed=[str(cj), str(cj2)])
    f1, f2 = jaxpr_as_fun(cj), jaxpr_as_fun(cj2)
    out["outs"] = [[np.asarray(x).tolist() for x in f1(*args)], [np.asarray(x).tolist() for x in f2(*args)]]
    if which == "f":
      s1 = lambda y0: f1(y0, ts)[0].sum()
      s2 = lambda y0: f2(y0, ts)[0].sum()
      out["grad"] = [float(jax.grad(s1)(1.0)), float(jax.grad(s2)(1.0))]
      out["grad2"] = [float(jax.grad(jax.grad(s1))(1.0)), float(jax.grad(jax.grad(s2))(1.0))]
    else:  # the grad program's own grad: the solution's second derivative
      s1 = lambda y0: f1(y0)[0].sum()
      s2 = lambda y0: f2(y0)[0].sum()
      out["grad2"] = [float(jax.grad(s1)(1.0)), float(jax.grad(s2)(1.0))]
      out["jit_grad2"] = [float(jax.jit(jax.grad(s1))(1.0)), float(jax.jit(jax.grad(s2))(1.0))]
    print(json.dumps(out))
""")


def _run(which: str) -> dict:
  proc = subprocess.run([sys.executable, "-c", _PROGRAM, which], capture_output=True,
                        text=True, timeout=180)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.splitlines()[-1])


def test_odeint_saves_in_bounded_time_and_round_trips():
  out = _run("f")
  assert out["dumps_s"] < 30, out["dumps_s"]  # (about 0.4 s; the tower never ended)
  original, loaded = out["printed"]
  assert loaded == original
  assert out["outs"][0] == out["outs"][1]  # bit for bit (floats in JSON round-trip exactly)
  for key in ("grad", "grad2"):  # first and second order, through saved rules
    want, got = out[key]
    assert got == pytest.approx(want, rel=1e-6, abs=1e-7), key
  assert out["grad2"][0] != 0.0  # (a nonlinear ODE: the second order is not trivially zero)


def test_grad_of_odeint_saves_in_bounded_time():
  out = _run("grad")
  assert out["dumps_s"] < 30, out["dumps_s"]
  original, loaded = out["printed"]
  assert loaded == original  # (JAX's copies of _where's jaxpr: ClosedJaxpr.same_vars)
  assert out["outs"][0] == out["outs"][1]
  # The grad program differentiates again: its inner odeint's fwd takes the
  # solver's constants as leading inputs (CustomVjpRule.closed_over_inputs).
  for key in ("grad2", "jit_grad2"):
    want, got = out[key]
    assert got == want, key  # bit for bit: the saved rules are JAX's, traced
  assert out["grad2"][0] != 0.0


def test_jaxprs_copy_prints_as_the_original():
  """Two jaxpr objects with the same variables and eqns (JAX's
  Jaxpr.replace(), as odeint's grad holds) print with the same names; the
  loaded program's do too (ClosedJaxpr.same_vars, format 1.4)."""
  import jax
  import jax.numpy as jnp
  from jax.extend.core import ClosedJaxpr

  import jaxpr_proto as jp
  from jaxpr_proto.codec import encoder

  g = jax.jit(lambda x: jnp.sin(x) * 2.0)
  cj = jax.make_jaxpr(lambda x: g(g(x)))(1.0)
  second = cj.jaxpr.eqns[1]
  inner = second.params["jaxpr"]
  copy = ClosedJaxpr(inner.jaxpr.replace(), inner.consts)
  cj.jaxpr.eqns[1] = second.replace(params={**second.params, "jaxpr": copy})
  m = encoder.encode(cj)
  assert [c.same_vars for c in m.closed_jaxprs].count(True) == 1
  assert (m.format_version.major, m.format_version.minor) == (1, 4)
  loaded = jp.loads(m.SerializeToString())
  assert str(loaded) == str(cj)
  a, b = (e.params["jaxpr"].jaxpr for e in loaded.jaxpr.eqns)
  assert a is not b and a.invars[0] is b.invars[0]
  assert float(jax.jit(lambda x: jax.core.eval_jaxpr(loaded.jaxpr, loaded.consts, x)[0])(0.5)) == \
      float(jax.jit(lambda x: jax.core.eval_jaxpr(cj.jaxpr, cj.consts, x)[0])(0.5))


def _closed_over_program():
  """A custom_vjp call whose function closed over an array, traced again:
  the array is the call's first input, which JAX refuses to differentiate
  with respect to (CustomVJPException), as odeint's solver constants in the
  grad program."""
  import jax
  import jax.numpy as jnp
  from jax.extend.core import jaxpr_as_fun

  c = jnp.array([1., 2., 3.])

  @jax.custom_vjp
  def g(y):
    return jnp.sin(y) * c
  g.defvjp(lambda y: (g(y), jnp.cos(y) * c), lambda r, t: (r * t,))
  x = jnp.array([.1, .2, .3])
  cj = jax.make_jaxpr(jaxpr_as_fun(jax.make_jaxpr(g)(x)))(x)
  assert [len(e.invars) for e in cj.jaxpr.eqns] == [2] and cj.jaxpr.eqns[0].params["num_consts"] == 0
  return cj, c, x


def test_closed_over_inputs_round_trip():
  """The rule is saved with fwd traced with its first input's tangent zero
  (format 1.5); the loaded program differentiates as the original, and
  refuses, as the original does, a derivative with respect to that input."""
  import jax
  from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

  import jaxpr_proto as jp
  from jaxpr_proto import compat
  from jaxpr_proto.codec import encoder

  cj, c, x = _closed_over_program()
  m = encoder.encode(cj)
  (rule,) = [r.vjp for r in m.rules]
  assert not rule.trace_error and rule.closed_over_inputs == 1
  assert (m.format_version.major, m.format_version.minor) == (1, 5)
  loaded = jp.loads(m.SerializeToString())
  assert str(loaded) == str(cj)
  assert jp.dumps(loaded) == m.SerializeToString()  # (written again: the same k)
  grad = lambda prog: jax.grad(lambda x: jaxpr_as_fun(prog)(x)[0].sum())
  assert (grad(loaded)(x) == grad(cj)(x)).all()
  assert (jax.jit(grad(loaded))(x) == jax.jit(grad(cj))(x)).all()
  refusals = []
  for prog in (cj, loaded):  # d/dc, c passed in as the constvar's value
    f = lambda c_: jaxpr_as_fun(ClosedJaxpr(prog.jaxpr, [c_]))(x)[0].sum()
    with pytest.raises(compat.CustomVJPException) as info:
      jax.grad(f)(c)
    refusals.append(str(info.value))
  assert refusals[0] == refusals[1]
  # The decoded thunk itself, as JAX's lift_fwd calls it.
  thunks = [e.params["fwd_jaxpr_thunk"] for e in (cj.jaxpr.eqns[0], loaded.jaxpr.eqns[0])]
  for thunk in thunks:
    with pytest.raises(compat.CustomVJPException):
      thunk.call_wrapped(True, True)
  fwds = [compat.eval_jaxpr(*thunk.call_wrapped(False, True), c, x) for thunk in thunks]
  assert all((a == b).all() for a, b in zip(*fwds)) and len(fwds[0]) == len(fwds[1]) == 2


def test_closed_over_inputs_in_the_text_form():
  import jaxpr_proto as jp
  from jaxpr_proto.codec import encoder

  m = encoder.encode(_closed_over_program()[0])
  text = jp.format(m)
  assert "closed_over_inputs=1," in text
  assert jp.parse(text).SerializeToString() == m.SerializeToString()
  with pytest.raises(jp.TextError, match="expected an int from 0 to 4294967295"):
    jp.parse(text.replace("closed_over_inputs=1,", "closed_over_inputs=-1,"))


@pytest.mark.parametrize("k", [3, 2**32 - 1])
def test_closed_over_inputs_past_the_inputs_is_refused(k):
  """At most the fwd's inputs (2 here). A negative count, written as an
  int32 would write it, reads as 2**32 - 1 (the field is a uint32)."""
  import jaxpr_proto as jp
  from jaxpr_proto.codec import encoder

  m = encoder.encode(_closed_over_program()[0])
  m.rules[0].vjp.ClearField("closed_over_inputs")
  if k == 2**32 - 1:  # (-1 as a varint: ten bytes, field 11, wire type 0)
    m.rules[0].vjp.MergeFromString(bytes([11 << 3]) + b"\xff" * 9 + b"\x01")
  else:
    m.rules[0].vjp.closed_over_inputs = k
  assert m.rules[0].vjp.closed_over_inputs == k
  path = "rules[0].vjp.closed_over_inputs"
  assert jp.check(m).errors == [(path, f"closed_over_inputs is {k}, more than the 2 inputs of the rule's fwd")]
  with pytest.raises(jp.DecodeError) as info:
    jp.loads(m.SerializeToString())
  assert info.value.path == path


def test_vjp_rule_tower_is_cut_and_named():
  """The rule MAX_VJP_TOWER levels down is written as not saved; it names
  why, at its use (a derivative of that order)."""
  import jax
  import jax.numpy as jnp
  from jax.experimental.ode import odeint

  import jaxpr_proto as jp
  from jaxpr_proto.codec import encoder

  ts = jnp.linspace(0., 1., 3)
  cj = jax.make_jaxpr(lambda y0: odeint(lambda y, t: -y, y0, ts))(1.0)
  m = encoder.encode(cj)
  vjps = [r.vjp for r in m.rules if r.WhichOneof("kind") == "vjp"]
  cut = [r for r in vjps if r.trace_error]
  assert len(vjps) == custom_rules.MAX_VJP_TOWER + 1 and len(cut) == 1
  assert "not saved" in cut[0].trace_error and "_odeint_rev" in cut[0].trace_error
  assert str(jp.loads(m.SerializeToString())) == str(cj)
