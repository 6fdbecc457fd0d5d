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
