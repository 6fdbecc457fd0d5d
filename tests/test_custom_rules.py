"""Custom differentiation rules (custom_jvp / custom_vjp), remat policies and
reduce computations survive a round trip: the decoded program differentiates
with the *custom* rule, not with autodiff of the primal."""
import functools
import re

import jax
import jax.ad_checkpoint  # noqa: F401  (checkpoint_name)
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto import compat
from tests import corpus
from tests.helpers import run_json


def _roundtrip(f, *args):
  cj = jax.make_jaxpr(f)(*args)
  cj2 = jp.loads(jp.dumps(cj))
  return cj, cj2


def _fun(cj, single=True):
  g = jaxpr_as_fun(cj)
  if single:
    return lambda *a: g(*a)[0]
  return lambda *a: tuple(g(*a))


def _eq(a, b):
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  assert len(la) == len(lb)
  for x, y in zip(la, lb):
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype and x.shape == y.shape, (x, y)
    np.testing.assert_array_equal(x, y)


# --- custom_jvp ---------------------------------------------------------------

def test_relu_custom_jvp_at_zero():
  cj, cj2 = _roundtrip(jax.nn.relu, 0.0)
  assert "custom_jvp_call" in str(cj2)
  assert str(cj2) == str(cj)
  f1, f2 = _fun(cj), _fun(cj2)
  # relu's rule gives 0 at 0; autodiff of max(x, 0) would give 0.5.
  assert float(jax.grad(f2)(0.0)) == 0.0
  _eq(jax.grad(f2)(0.0), jax.grad(f1)(0.0))
  for x in (-1.5, 0.0, 2.0):
    _eq(jax.jvp(f2, (x,), (3.0,)), jax.jvp(f1, (x,), (3.0,)))
  assert float(jax.grad(f2)(2.0)) == 1.0


@jax.custom_jvp
def odd_log(x):
  return jnp.log(x)


@odd_log.defjvp
def _odd_log_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return jnp.log(x), 2.0 * t   # deliberately not 1/x


def test_user_custom_jvp_rule_is_used():
  x = 4.0
  cj, cj2 = _roundtrip(odd_log, x)
  f2 = _fun(cj2)
  g = float(jax.grad(f2)(x))
  assert g == 2.0                         # the custom rule
  assert g != pytest.approx(1.0 / x)      # not autodiff of log
  _eq(jax.grad(f2)(x), jax.grad(_fun(cj))(x))
  _eq(f2(x), jnp.log(x))


@jax.custom_jvp
def safe_log(x):
  return jnp.log(jnp.maximum(x, 1e-6))


@safe_log.defjvp
def _safe_log_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return safe_log(x), t / jnp.maximum(x, 1e-6)


def test_safe_log_at_zero_and_vmap():
  cj, cj2 = _roundtrip(safe_log, 0.0)
  f2 = _fun(cj2)
  assert float(jax.grad(f2)(0.0)) == pytest.approx(1e6)
  xs = jnp.array([0.0, 0.5, 2.0])
  _eq(jax.vmap(jax.grad(f2))(xs), jax.vmap(jax.grad(_fun(cj)))(xs))


@jax.custom_vjp
def clip_grad(x):
  return x


def _clip_fwd(x):
  return x, None


def _clip_bwd(_, g):
  return (jnp.clip(g, -0.1, 0.1),)


clip_grad.defvjp(_clip_fwd, _clip_bwd)


def test_user_custom_vjp_clips():
  f = lambda x: 10.0 * clip_grad(x)
  cj, cj2 = _roundtrip(f, 3.0)
  f2 = _fun(cj2)
  assert float(f2(3.0)) == 30.0
  assert float(jax.grad(f2)(3.0)) == pytest.approx(0.1)   # not 10
  assert float(jax.grad(lambda x: -f2(x))(3.0)) == pytest.approx(-0.1)
  _eq(jax.grad(f2)(3.0), jax.grad(_fun(cj))(3.0))
  # After save/load from a file too.
  xs = jnp.array([1.0, -2.0])
  _eq(jax.vmap(jax.grad(f2))(xs), jnp.array([0.1, 0.1], jnp.float32))


def test_logaddexp_recursive_rule():
  cj = jax.make_jaxpr(jnp.logaddexp)(1.0, 2.0)
  m = jp.encode(cj)
  assert 1 <= len(m.rules) <= 2
  cj2 = jp.decode(m)
  f1, f2 = _fun(cj), _fun(cj2)
  for args in [(1.0, 2.0), (-3.0, 0.5), (0.0, 0.0)]:
    for argnums in (0, 1):
      _eq(jax.grad(f2, argnums)(*args), jax.grad(f1, argnums)(*args))
      _eq(jax.grad(jax.grad(f2, argnums), argnums)(*args),
          jax.grad(jax.grad(f1, argnums), argnums)(*args))
  # The decoded program re-encodes with the same small rules table.
  assert len(jp.encode(cj2).rules) == len(m.rules)
  # Third derivative, for good measure: still the same rule recursion.
  d3 = lambda f: jax.grad(jax.grad(jax.grad(f)))
  _eq(d3(f2)(1.0, 2.0), d3(f1)(1.0, 2.0))


@functools.partial(jax.custom_jvp)
def two_arg(x, y):
  return x * jnp.sin(y)


def _two_arg_jvp(primals, tangents):
  x, y = primals
  tx, ty = tangents
  # With symbolic_zeros, a zero tangent arrives as a SymbolicZero.
  out = two_arg(x, y)
  t = jnp.zeros_like(out)
  if type(tx) is not jax.custom_derivatives.SymbolicZero:
    t = t + 3.0 * tx
  if type(ty) is not jax.custom_derivatives.SymbolicZero:
    t = t + 5.0 * ty
  return out, t


two_arg.defjvp(_two_arg_jvp, symbolic_zeros=True)


def test_symbolic_zeros_jvp():
  cj, cj2 = _roundtrip(two_arg, 2.0, 0.5)
  assert "symbolic_zeros=True" in str(cj2)
  f1, f2 = _fun(cj), _fun(cj2)
  assert float(jax.grad(f2, 0)(2.0, 0.5)) == 3.0
  assert float(jax.grad(f2, 1)(2.0, 0.5)) == 5.0
  for a in (0, 1):
    _eq(jax.grad(f2, a)(2.0, 0.5), jax.grad(f1, a)(2.0, 0.5))
  _eq(jax.grad(f2, (0, 1))(2.0, 0.5), jax.grad(f1, (0, 1))(2.0, 0.5))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def scaled(scale, x, y):
  return scale * x * y


def _scaled_fwd(scale, x, y):
  return scaled(scale, x, y), (x, y)   # residuals forward the inputs


def _scaled_bwd(scale, res, g):
  x, y = res
  return (7.0 * scale * g * y, 11.0 * g * x)   # deliberately odd factors


scaled.defvjp(_scaled_fwd, _scaled_bwd)


def test_custom_vjp_nondiff_and_forwarded_residuals():
  f = lambda x, y: scaled(2.0, x, y)
  cj, cj2 = _roundtrip(f, 3.0, 4.0)
  m = jp.encode(cj)
  vjp = [r.vjp for r in m.rules if r.WhichOneof("kind") == "vjp"]
  assert vjp and not vjp[0].trace_error
  assert any(i >= 0 for i in vjp[0].input_fwds), list(vjp[0].input_fwds)
  f1, f2 = _fun(cj), _fun(cj2)
  assert float(f2(3.0, 4.0)) == 24.0
  gx, gy = jax.grad(f2, (0, 1))(3.0, 4.0)
  assert float(gx) == 7.0 * 2.0 * 4.0
  assert float(gy) == 11.0 * 3.0
  _eq(jax.grad(f2, (0, 1))(3.0, 4.0), jax.grad(f1, (0, 1))(3.0, 4.0))


# Rules that differ only in what JAX keeps beside the rule function: the
# functions defjvps keeps in a tuple, and the static args of nondiff_argnums.
# Each pair has one primal program; a file that shared one rule between the
# two calls would differentiate one of them wrongly.
@jax.custom_jvp
def sin_a(x):
  return jnp.sin(x)


@jax.custom_jvp
def sin_b(x):
  return jnp.sin(x)


sin_a.defjvps(lambda t, ans, x: 2.0 * t)
sin_b.defjvps(lambda t, ans, x: 3.0 * t)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def sin_scaled_jvp(c, x):
  return jnp.sin(x)


@sin_scaled_jvp.defjvp
def _sin_scaled_jvp_rule(c, primals, tangents):
  return sin_scaled_jvp(c, primals[0]), c * tangents[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def sin_scaled_vjp(c, x):
  return jnp.sin(x)


sin_scaled_vjp.defvjp(lambda c, x: (sin_scaled_vjp(c, x), None), lambda c, r, g: (c * g,))


@pytest.mark.parametrize("f,forward", [
    (lambda x: (sin_a(x), sin_b(x), sin_a(2.0 * x)), True),
    (lambda x: (sin_scaled_jvp(2.0, x), sin_scaled_jvp(3.0, x), sin_scaled_jvp(2.0, 2.0 * x)), True),
    (lambda x: (sin_scaled_jvp(np.float32(2.0), x), sin_scaled_jvp(np.float32(3.0), x)), True),
    (lambda x: (sin_scaled_vjp(2.0, x), sin_scaled_vjp(3.0, x), sin_scaled_vjp(2.0, 2.0 * x)), False),
], ids=["defjvps", "jvp_nondiff", "jvp_nondiff_numpy_scalar", "vjp_nondiff"])
def test_rules_apart_by_their_functions_and_static_args(f, forward):
  cj, cj2 = _roundtrip(f, 1.0)
  assert str(cj2) == str(cj)
  f1, f2 = _fun(cj, single=False), _fun(cj2, single=False)
  want = jax.jacrev(f1)(1.0)
  assert float(want[0]) == 2.0 and float(want[1]) == 3.0, want  # the custom rules, not sin's
  _eq(jax.jacrev(f2)(1.0), want)
  if forward:
    _eq(jax.jacfwd(f2)(1.0), jax.jacfwd(f1)(1.0))
  # the same rule at its other call: saved once
  kinds = [r.WhichOneof("kind") for r in jp.encode(cj).rules]
  assert len(kinds) == 2, kinds


def test_sinc_fourth_derivative_at_zero():
  """jnp.sinc's jvp at 0 calls a custom_jvp function of (k, x) with k, the
  order, a nondiff arg: the rules of each order are other rules, though the
  odd orders' primal programs are alike. One rule saved for them gave the
  4th derivative as -32.47 where JAX gives 19.48."""
  cj, cj2 = _roundtrip(jnp.sinc, 0.0)
  g1, g2 = _fun(cj), _fun(cj2)
  for _ in range(4):
    g1, g2 = jax.grad(g1), jax.grad(g2)
  _eq(g2(0.0), g1(0.0))
  _eq(g2(0.5), g1(0.5))


def _skipped_closure_values(monkeypatch, programs):
  """(closure, value) of each value a JAX per-trace closure holds that the
  rule key leaves out (custom_rules._is_per_trace), over `programs`."""
  from jaxpr_proto.codec import custom_rules
  seen, is_per_trace = [], custom_rules._is_per_trace

  def noting(f, depth=0):
    skipped = is_per_trace(f, depth)
    for cell in (f.__closure__ or ()) if skipped and not depth else ():
      try:
        seen.append((f.__qualname__, cell.cell_contents))
      except ValueError:
        pass
    return skipped
  monkeypatch.setattr(custom_rules, "_is_per_trace", noting)
  for p in programs:
    jp.dumps(corpus.trace(p))
  return seen


def _jax_machinery(x) -> bool:
  """A value the rule key may leave out: JAX's own objects (the trace, its
  output stores), a memo's dict or sentinel, an int (lift_fwd's count of
  closed-over inputs, which the call's num_consts gives), the avals of the
  call (its fingerprint has them), or what the walk follows (functions, a
  tuple of them)."""
  if type(x).__module__.startswith("jax") or type(x) in (dict, object, int):
    return True
  if isinstance(x, (tuple, list)):
    return all(isinstance(a, (compat.ShapedArray, compat.AbstractToken)) or callable(a) for a in x)
  return callable(x)


def test_what_the_rule_key_leaves_out_is_jaxs_own(monkeypatch):
  """The rule key leaves out what JAX's per-trace closures hold; a JAX whose
  closures hold a value of the user's (a rule's parameter) there would make
  two rules one. This fails first, naming the closure."""
  names = ["library_custom_derivs", "user_custom_jvp", "user_custom_vjp", "custom_vjp_grad_traced",
           "scipy_special", "numpyro_logdensity", "jnp_misc", "pallas_custom_vjp", "custom_root_sqrt"]
  seen = _skipped_closure_values(monkeypatch, [corpus.get(n) for n in names])
  assert seen  # (JAX's thunks and their memo, at least)
  odd = [(f, type(x).__name__) for f, x in seen if not _jax_machinery(x)]
  assert not odd, odd


_JVP_TRACES = [0]


@jax.custom_jvp
def counted(x):
  return jnp.sin(x)


@counted.defjvp
def _counted_jvp(primals, tangents):
  _JVP_TRACES[0] += 1  # (once per trace of the rule)
  (x,), (t,) = primals, tangents
  return counted(x), 4.0 * t


def test_a_rule_traced_once_per_process():
  """A program traced again holds new thunks of the same rule: `dumps`
  traces the rule once per process, and each file has it in full."""
  jp.clear_caches()
  def traced():  # (a new function: JAX traces it anew, with new thunks)
    return jax.make_jaxpr(lambda x: counted(x) * 2.0)(1.0)
  before = _JVP_TRACES[0]
  files = [jp.dumps(traced()) for _ in range(3)]
  assert _JVP_TRACES[0] == before + 1
  for data in files:
    g = _fun(jp.loads(data))
    assert float(jax.grad(g)(1.0)) == 8.0  # the rule's, not sin's
  jp.dumps(jax.make_jaxpr(lambda x: counted(x + 1.0))(1.0))  # the same call of it
  assert _JVP_TRACES[0] == before + 1
  jp.dumps(jax.make_jaxpr(lambda x: counted(x))(jnp.ones(3)))  # another call (its types)
  assert _JVP_TRACES[0] == before + 2
  jp.clear_caches()  # forgets them, as jax.clear_caches does JAX's
  jp.dumps(traced())
  assert _JVP_TRACES[0] == before + 3


_VJP_TRACES = {"fwd": 0, "bwd": 0}


@jax.custom_vjp
def counted_vjp(x):
  return jnp.sin(x)


def _counted_fwd(x):
  _VJP_TRACES["fwd"] += 1
  return jnp.sin(x), jnp.cos(x)


def _counted_bwd(res, g):
  _VJP_TRACES["bwd"] += 1
  return (5.0 * res * g,)


counted_vjp.defvjp(_counted_fwd, _counted_bwd)


def test_a_vjp_rule_traced_once_per_process():
  """As a jvp rule: `dumps` traces a custom_vjp rule's fwd and bwd once per
  process, and each file has them in full."""
  jp.clear_caches()
  def traced():
    return jax.make_jaxpr(lambda x: counted_vjp(x) * 2.0)(1.0)
  before = dict(_VJP_TRACES)
  files = [jp.dumps(traced()) for _ in range(3)]
  assert _VJP_TRACES == {"fwd": before["fwd"] + 1, "bwd": before["bwd"] + 1}
  for data in files:
    assert float(jax.grad(_fun(jp.loads(data)))(1.0)) == pytest.approx(10.0 * np.cos(1.0))
  jp.dumps(jax.make_jaxpr(lambda x: counted_vjp(x))(jnp.ones(3)))  # another call (its types)
  assert _VJP_TRACES == {"fwd": before["fwd"] + 2, "bwd": before["bwd"] + 2}
  jp.clear_caches()
  jp.dumps(traced())
  assert _VJP_TRACES == {"fwd": before["fwd"] + 3, "bwd": before["bwd"] + 3}
  from jaxpr_proto.codec import custom_rules
  loaded = jp.loads(files[0])
  jp.clear_caches()
  jp.dumps(loaded)  # (a decoded rule holds its whole Module: not kept)
  assert not custom_rules._TRACED_VJP


@jax.custom_vjp
def tree_vjp(xs):
  return xs[0] * xs[1]


def _tree_fwd(xs):
  return tree_vjp(xs), xs


def _tree_bwd(res, g):  # (a rule that tells a list from a tuple)
  k = 10.0 if isinstance(res, list) else 1.0
  return (type(res)([k * g * res[1], g * res[0]]),)


tree_vjp.defvjp(_tree_fwd, _tree_bwd)


@jax.custom_jvp
def tree_jvp(xs):
  return xs[0] * xs[1]


@tree_jvp.defjvp
def _tree_jvp_rule(primals, tangents):
  (xs,), (ts,) = primals, tangents
  k = 10.0 if isinstance(xs, list) else 1.0
  return tree_jvp(xs), k * ts[0] * xs[1] + xs[0] * ts[1]


@pytest.mark.parametrize("fn", [tree_jvp, tree_vjp], ids=["custom_jvp", "custom_vjp"])
def test_rules_of_calls_of_two_trees_stay_apart(fn):
  """f((x, 1.0)) and f([x, 1.0]) have one call jaxpr (the same types) but
  other trees, and a rule may tell them apart: each call keeps its own
  rule, in one program and across the process's traced rules."""
  both = lambda x: fn((x, 1.0)) + fn([x, 1.0])
  assert float(jax.grad(_fun(jp.loads(jp.dumps(jax.make_jaxpr(both)(2.0)))))(2.0)) == 11.0
  for make, want in ((lambda x: (x, 1.0), 1.0), (lambda x: [x, 1.0], 10.0)):
    g = lambda x: fn(make(x))
    assert float(jax.grad(g)(2.0)) == want
    assert float(jax.grad(_fun(jp.loads(jp.dumps(jax.make_jaxpr(g)(2.0)))))(2.0)) == want


def test_a_loaded_programs_rules_are_not_kept_for_the_process():
  """A decoded rule holds its whole Module: writing a loaded program again
  keeps nothing of it in the process's traced rules."""
  from jaxpr_proto.codec import custom_rules
  cj = jp.loads(jp.dumps(jax.make_jaxpr(lambda x: counted(x) * 2.0)(1.0)))
  jp.clear_caches()
  data = jp.dumps(cj)
  assert not custom_rules._TRACED_JVP
  assert float(jax.grad(_fun(jp.loads(data)))(1.0)) == 8.0


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def counted_scaled(c, x):
  return jnp.sin(x)


@counted_scaled.defjvp
def _counted_scaled_jvp(c, primals, tangents):
  _JVP_TRACES[0] += 1
  return counted_scaled(c, primals[0]), c * tangents[0]


def test_a_rule_of_an_array_static_arg_is_traced_each_time():
  """A rule named by an object's identity (an array as a nondiff arg) is
  not kept for the process: traced at each dumps, each file with its own."""
  before = _JVP_TRACES[0]
  c = np.array(3.0, np.float32)
  for k in range(2):
    cj = jax.make_jaxpr(lambda x: counted_scaled(c, x))(1.0)
    assert float(jax.grad(_fun(jp.loads(jp.dumps(cj))))(1.0)) == 3.0
    assert _JVP_TRACES[0] == before + k + 1


@jax.custom_jvp
def bad_rule_fn(x):
  return jnp.sin(x)


@bad_rule_fn.defjvp
def bad_rule_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  if x > 0:  # Python control flow on a traced value: fails when traced
    return jnp.sin(x), t
  return jnp.sin(x), -t


def test_untraceable_rule_saves_and_fails_on_grad(tmp_path):
  cj = jax.make_jaxpr(bad_rule_fn)(1.0)
  m = jp.encode(cj)
  errs = [r.jvp.trace_error for r in m.rules if r.WhichOneof("kind") == "jvp"]
  assert errs and "bad_rule_jvp" in errs[0]
  path = tmp_path / "bad.jaxpb"
  jp.save(cj, path)
  cj2 = jp.load(path)
  f2 = _fun(cj2)
  _eq(f2(1.0), jnp.sin(jnp.float32(1.0)))
  _eq(jax.jit(f2)(1.0), _fun(cj)(1.0))
  with pytest.raises(jp.DecodeError) as ei:
    jax.grad(f2)(1.0)
  assert "bad_rule_jvp" in str(ei.value)
  assert "could not be traced" in ei.value.message


# --- remat policies ------------------------------------------------------------

def _ckpt_fn(x, w):
  h = jax.ad_checkpoint.checkpoint_name(jnp.sin(x @ w), "a")
  h2 = jax.ad_checkpoint.checkpoint_name(jnp.cos(h @ w), "b")
  return jnp.sum(h2 * h)


_cp = jax.checkpoint_policies
POLICIES = {
    "dots_saveable": _cp.dots_saveable,
    "save_only_a": _cp.save_only_these_names("a"),
    "both": _cp.save_from_both_policies(_cp.dots_saveable, _cp.save_only_these_names("a")),
    "nothing_saveable": _cp.nothing_saveable,
    "everything_saveable": _cp.everything_saveable,
    "save_any_names_but_these": _cp.save_any_names_but_these("b"),
}


def _remat_eqn(cj):
  eqns = [e for e in cj.jaxpr.eqns if e.primitive.name in ("checkpoint", "remat", "remat2")]
  assert len(eqns) == 1, str(cj)
  return eqns[0]


def _policy_answers(policy):
  """What the policy says about a few representative eqns."""
  a = jax.core.ShapedArray((3, 3), jnp.float32)
  dot = policy(lax.dot_general_p, a, a, dimension_numbers=(((1,), (0,)), ((), ())),
               precision=None, preferred_element_type=jnp.float32, out_sharding=None)
  name_p = jax._src.ad_checkpoint.name_p
  na = policy(name_p, a, name="a")
  nb = policy(name_p, a, name="b")
  sin = policy(lax.sin_p, a, accuracy=None)
  return tuple(bool(v) if isinstance(v, bool) else type(v).__name__ for v in (dot, na, nb, sin))


@pytest.mark.parametrize("name", list(POLICIES))
def test_remat_policy(name):
  policy = POLICIES[name]
  f = jax.checkpoint(_ckpt_fn, policy=policy)
  x = jnp.arange(9.0, dtype=jnp.float32).reshape(3, 3) / 10
  w = jnp.eye(3, dtype=jnp.float32) * 0.7
  cj, cj2 = _roundtrip(f, x, w)
  assert str(cj2) == str(cj)
  p1, p2 = _remat_eqn(cj).params["policy"], _remat_eqn(cj2).params["policy"]
  assert type(p2) is type(p1)
  if not (isinstance(p1, type(lambda: 0)) and "<locals>" in p1.__qualname__):
    assert p2 == p1
  else:  # a closure: compare what it decides
    assert p2.__code__ is p1.__code__
  assert _policy_answers(p2) == _policy_answers(p1)
  # Gradients, and what gets saved (the jaxpr of the linearized program).
  f1, f2 = _fun(cj), _fun(cj2)
  _eq(jax.grad(f2, (0, 1))(x, w), jax.grad(f1, (0, 1))(x, w))
  g1 = jax.make_jaxpr(jax.grad(f1, (0, 1)))(x, w)
  g2 = jax.make_jaxpr(jax.grad(f2, (0, 1)))(x, w)
  assert str(g2) == str(g1)
  lin1 = jax.make_jaxpr(lambda x, w: jax.linearize(f1, x, w)[1](x, w))(x, w)
  lin2 = jax.make_jaxpr(lambda x, w: jax.linearize(f2, x, w)[1](x, w))(x, w)
  assert str(lin2) == str(lin1)


def test_policies_differ_in_what_they_save():
  # Sanity check that the comparison above can fail: two policies give
  # different linearized programs.
  x = jnp.ones((3, 3), jnp.float32)
  outs = set()
  for name in ("dots_saveable", "nothing_saveable"):
    f = jax.checkpoint(_ckpt_fn, policy=POLICIES[name])
    cj2 = jp.loads(jp.dumps(jax.make_jaxpr(f)(x, x)))
    f2 = _fun(cj2)
    outs.add(str(jax.make_jaxpr(lambda x, w: jax.linearize(f2, x, w)[1](x, w))(x, x)))
  assert len(outs) == 2


# --- reduce with a custom computation -------------------------------------------

_ADDR = re.compile(r" at 0x[0-9a-f]+")


def _norm(s):
  return _ADDR.sub(" at 0x?", s)


def _soft_reduce(x):
  # a*c + a + c is associative and commutative, but not a recognised monoid.
  return lax.reduce(x, 0.0, lambda a, c: a * c + a + c, (1,))


def _argmax_reduce(x):
  iota = lax.broadcasted_iota(jnp.int32, x.shape, 1)

  def amax(ab, cd):
    (a, ai), (c, ci) = ab, cd
    pick = (a > c) | ((a == c) & (ai < ci))
    return lax.select(pick, a, c), lax.select(pick, ai, ci)
  return lax.reduce((x, iota), (-jnp.inf, jnp.int32(2**31 - 1)), amax, (1,))


def test_reduce_custom_computation():
  x = jnp.array([[0.1, 0.2, -0.3], [0.5, 0.25, 0.125]], jnp.float32)
  cj, cj2 = _roundtrip(_soft_reduce, x)
  assert "reduce[" in str(cj) and "reduce_sum" not in str(cj)
  assert _norm(str(cj2)) == _norm(str(cj))
  f1, f2 = _fun(cj), _fun(cj2)
  _eq(f2(x), f1(x))
  _eq(jax.jit(f2)(x), jax.jit(f1)(x))
  want = np.array([(1.1 * 1.2 * 0.7) - 1, (1.5 * 1.25 * 1.125) - 1], np.float32)
  np.testing.assert_allclose(np.asarray(f2(x)), want, rtol=1e-5)
  # reduce's computation param is callable after decoding.
  eqn = [e for e in cj2.jaxpr.eqns if e.primitive.name == "reduce"][0]
  assert float(eqn.params["computation"](jnp.float32(2.0), jnp.float32(3.0))) == 11.0
  try:
    g1 = jax.grad(lambda x: f1(x).sum())(x)
  except Exception as e:  # JAX cannot differentiate generic reduce
    pytest.skip(f"reduce has no jvp in this JAX: {type(e).__name__}")
  _eq(jax.grad(lambda x: f2(x).sum())(x), g1)


def test_reduce_variadic_custom_computation():
  x = jnp.array([[0.1, 0.7, 0.7, -0.3], [0.5, 0.25, 0.125, 0.5]], jnp.float32)
  cj, cj2 = _roundtrip(_argmax_reduce, x)
  assert _norm(str(cj2)) == _norm(str(cj))
  f1, f2 = _fun(cj, single=False), _fun(cj2, single=False)
  _eq(f2(x), f1(x))
  v, i = f2(x)
  _eq(i, jnp.array([1, 0], jnp.int32))
  _eq(jax.vmap(f2)(jnp.stack([x, -x])), jax.vmap(f1)(jnp.stack([x, -x])))


def sin_with_rule(primal_out, tangent_out):
  """jnp.sin as a custom_jvp function whose rule gives primal_out(x, t) and
  tangent_out(x, t) (also used by tests/test_memo.py)."""
  @jax.custom_jvp
  def f(x):
    return jnp.sin(x)

  @f.defjvp
  def _(primals, tangents):
    (x,), (t,) = primals, tangents
    return primal_out(x, t), tangent_out(x, t)
  return f


@pytest.mark.parametrize("primal_out, tangent_out, error", [
    # bilinear in the tangent: JAX's transpose asserts
    (lambda x, t: jnp.sin(x), lambda x, t: t * t,
     r"the jvp rule is not linear in its tangents, as grad needs \(AssertionError"),
    # sin has no transpose rule
    (lambda x, t: jnp.sin(x), lambda x, t: jnp.sin(t),
     r"the jvp rule is not linear in its tangents, as grad needs \(NotImplementedError"),
    # a primal output that reads a tangent cannot be linearized (a fuzzed file's rule did)
    (lambda x, t: jnp.sin(x) + t, lambda x, t: jnp.cos(x) * t,
     r"the jvp rule's primal output 0 depends on its tangent inputs"),
    # a sound rule: loads, and grad uses it
    (lambda x, t: jnp.sin(x), lambda x, t: jnp.cos(x) * t, None),
])
def test_jvp_rule_as_grad_needs_it(primal_out, tangent_out, error):
  """grad linearizes a custom_jvp rule with its tangents unknown (its primal
  outputs must come out known) and transposes its tangent part (which must
  be linear in the tangents). JAX traces and jits a rule that breaks either,
  and fails inside itself only at grad; such a file is refused on load, by
  the check that `jp.check` runs too."""
  f = sin_with_rule(primal_out, tangent_out)
  data = jp.dumps(jax.make_jaxpr(f)(1.0))
  if error is None:
    _eq(jax.grad(_fun(jp.loads(data)))(0.5), jax.grad(f)(0.5))
    assert jp.check(data).ok
    return
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\].params.jvp_jaxpr_fun: " + error):
    jp.loads(data)
  assert [p for p, _ in jp.check(data).errors] == ["eqn[0].params.jvp_jaxpr_fun"]
  with pytest.raises(Exception):  # as JAX itself fails at grad of the original
    jax.grad(f)(0.5)


# --- linear_call: its transpose, traced at encode time --------------------------

def _linear_call_program():
  def fun(r, v):  # linear in v: f32[3] -> f32[2]
    return r[:2] * v[1:]

  def fun_t(r, ct):  # its transpose: f32[2] -> f32[3]
    return jnp.concatenate([jnp.zeros(1, ct.dtype), r[:2] * ct])

  return lambda r, v: jax.custom_derivatives.linear_call(fun, fun_t, r, v)


def test_linear_call_transpose_roundtrips():
  r, v = jnp.array([1.0, 2.0, 3.0]), jnp.array([0.5, -1.0, 4.0])
  f = _linear_call_program()
  cj = jax.make_jaxpr(f)(r, v)
  cj2 = jp.loads(jp.dumps(cj))
  assert _norm(str(cj2)) == _norm(str(cj))
  f2 = _fun(cj2)
  _eq(f2(r, v), f(r, v))
  t = lambda g: jax.linear_transpose(lambda v: g(r, v), v)(jnp.array([1.0, 10.0]))
  _eq(t(f2), t(f))  # the saved transpose, not one derived from the callee
  g = lambda h: (lambda v: jax.grad(lambda v: jnp.sum(h(r, v) ** 2))(v))
  _eq(jax.jit(g(f2))(v), g(f)(v))
  # The gradient's program (a transposed linear_call) saves and runs too.
  gj = jax.make_jaxpr(g(f))(v)
  _eq(jax.jit(_fun(jp.loads(jp.dumps(gj))))(v), g(f)(v))


@pytest.mark.parametrize("mutate, error", [
    ("transpose_is_callee", r"params.transpose_thunk: .*transpose_thunk"),
    ("num_res", r"params.num_res: num_res=9 is out of range for 2 operands"),
])
def test_linear_call_hostile(mutate, error):
  r, v = jnp.array([1.0, 2.0, 3.0]), jnp.array([0.5, -1.0, 4.0])
  m = jp.encode(jax.make_jaxpr(_linear_call_program())(r, v))
  root = m.jaxprs[m.closed_jaxprs[m.root].jaxpr]
  eqn = next(e for e in root.eqns if m.primitives[e.primitive].name == "linear_call")
  params = {m.params[i].name: i for i in eqn.params}
  if mutate == "num_res":
    m.params.add(name="num_res").value.int = 9
    eqn.params[list(eqn.params).index(params["num_res"])] = len(m.params) - 1
  else:  # the transpose's closed jaxpr replaced by the callee's (f32[3] -> f32[2])
    callee = m.params[params["callee"]].value.closed_jaxpr
    thunk = m.params[params["transpose_thunk"]].value.extension
    next(f for f in thunk.fields if f.name == "transpose").value.closed_jaxpr = callee
  data = m.SerializeToString()
  with pytest.raises(jp.DecodeError, match=error):
    jp.loads(data)
  assert not jp.check(data).ok


def test_reencoding_keeps_rules_apart():
  """Two custom_jvp functions with the same call but different rules stay
  two rules when a loaded program is encoded again (as pickling a loaded
  jp.Function does)."""
  def make(scale):
    @jax.custom_jvp
    def ident(x):
      return x

    @ident.defjvp
    def _(primals, tangents):
      return primals[0], scale * tangents[0]
    return ident

  a, b = make(2.0), make(3.0)
  f = lambda x: a(x) + b(x)
  cj = jax.make_jaxpr(f)(1.0)
  once = jp.loads(jp.dumps(cj))
  twice = jp.loads(jp.dumps(once))
  assert len(jp.encode(once).rules) == len(jp.encode(cj).rules) == 2
  for g in (once, twice):
    assert float(jax.grad(_fun(g))(1.0)) == float(jax.grad(f)(1.0)) == 5.0


def test_linear_call_with_consts_is_refused():
  """JAX runs linear_call's callee as an open jaxpr: consts in it would fail
  inside JAX, so such a file is refused."""
  r, v = jnp.array([1.0, 2.0, 3.0]), jnp.array([0.5, -1.0, 4.0])
  cj = jax.make_jaxpr(_linear_call_program())(r, v)
  k = next(i for i, e in enumerate(cj.jaxpr.eqns) if e.primitive.name == "linear_call")
  c = np.arange(2, dtype=np.float32) + 7
  callee = jax.make_jaxpr(lambda r, v: r[:2] * v[1:] + c)(r, v)
  assert len(callee.consts) == 1
  eqn = cj.jaxpr.eqns[k]
  bad = eqn.replace(params={**eqn.params, "callee": callee})
  cj2 = compat.ClosedJaxpr(cj.jaxpr.replace(eqns=[*cj.jaxpr.eqns[:k], bad, *cj.jaxpr.eqns[k + 1:]]),
                           cj.consts)
  data = jp.dumps(cj2)
  with pytest.raises(jp.DecodeError, match=r"params.callee: callee's jaxpr has consts"):
    jp.loads(data)
  assert not jp.check(data).ok


# --- custom_vmap: the rule saved as jaxprs, one per pattern of batched operands ----------

@jax.custom_batching.custom_vmap
def _cv_scale(x, y):
  return jnp.sin(x) * y


@_cv_scale.def_vmap
def _cv_scale_rule(axis_size, in_batched, x, y):
  xb, yb = in_batched
  y = y[:, None] if yb else y
  return jnp.cos(x) * y, xb or yb  # batches otherwise than the function: on purpose


def _no_addresses(text):
  return re.sub(" at 0x[0-9a-f]+>", ">", text)


def test_custom_vmap_rule_is_saved_and_used_by_vmap():
  x, y = jnp.linspace(0.1, 1.0, 3), jnp.float32(2.0)
  xs, ys = jnp.stack([x, 2 * x, 3 * x, 4 * x]), jnp.arange(4.0)
  cj = jax.make_jaxpr(lambda x, y: _cv_scale(x, y) + 1.0)(x, y)
  data = jp.dumps(cj)
  cj2 = jp.loads(data)
  assert jp.dumps(cj2) == data and _no_addresses(str(cj2)) == _no_addresses(str(cj))
  f, f2 = jaxpr_as_fun(cj), jaxpr_as_fun(cj2)
  np.testing.assert_array_equal(f2(x, y)[0], f(x, y)[0])
  for axes, args in [((0, None), (xs, y)), ((None, 0), (x, ys)), ((0, 0), (xs, ys))]:
    want = jax.vmap(f, in_axes=axes)(*args)[0]
    np.testing.assert_allclose(want, jnp.cos(args[0]) * (args[1][:, None] if axes[1] == 0
                                                         else args[1]) + 1.0)  # the rule's
    np.testing.assert_array_equal(jax.vmap(f2, in_axes=axes)(*args)[0], want)
  # vmap of vmap, vmap of jvp, and vmap of the saved jvp program
  xss = jnp.stack([xs, 2 * xs])
  np.testing.assert_array_equal(jax.vmap(jax.vmap(f2, (0, None)), (0, None))(xss, y)[0],
                                jax.vmap(jax.vmap(f, (0, None)), (0, None))(xss, y)[0])
  tangent = lambda g: lambda x: jax.jvp(lambda x: g(x, y)[0], (x,), (x,))[1]
  np.testing.assert_array_equal(jax.vmap(tangent(f2))(xs), jax.vmap(tangent(f))(xs))
  jvp_program = jax.make_jaxpr(lambda x, t: jax.jvp(lambda x: f(x, y)[0], (x,), (t,)))(x, x)
  loaded = jaxpr_as_fun(jp.loads(jp.dumps(jvp_program)))
  for got, want in zip(jax.vmap(loaded)(xs, xs), jax.vmap(jaxpr_as_fun(jvp_program))(xs, xs)):
    np.testing.assert_array_equal(got, want)


@jax.custom_batching.custom_vmap
def _cv_sized(x):
  return x * 2.0


@_cv_sized.def_vmap
def _cv_sized_rule(axis_size, in_batched, x):
  if axis_size > 3:  # Python control flow on the batch size: no symbolic trace
    return x * 3.0, True
  return x * 4.0, True


def test_custom_vmap_rule_that_cannot_be_saved_refuses_vmap():
  x = jnp.linspace(0.1, 1.0, 4)
  f2 = jaxpr_as_fun(jp.loads(jp.dumps(jax.make_jaxpr(_cv_sized)(x))))
  np.testing.assert_array_equal(f2(x)[0], x * 2.0)  # runs, and differentiates
  np.testing.assert_array_equal(jax.jvp(lambda x: f2(x)[0], (x,), (x,))[1], x * 2.0)
  with pytest.raises(jp.RuleNotSavedError, match=r"_cv_sized_rule was not saved.*\[True\]"):
    jax.vmap(f2)(x[:, None])


def test_custom_vmap_rule_that_misfits_the_call_is_refused():
  x, y = jnp.linspace(0.1, 1.0, 3), jnp.float32(2.0)
  m = jp.encode(jax.make_jaxpr(_cv_scale)(x, y))
  (param,) = [p for p in m.params if p.name == "rule"]
  patterns = {f.name: f.value for f in param.value.extension.fields}["patterns"]
  # Say the rule leaves a batched output unbatched.
  pattern = patterns.tuple.items[0].tuple
  assert pattern.items[1].tuple.items[0].bool
  pattern.items[1].tuple.items[0].bool = False
  with pytest.raises(jp.DecodeError, match=r"params\.rule\.patterns.*output 0 is "
                                           r"float32\[vmap_axis_size,3\]"):
    jp.decode(m)


_CV_WRITER = """
import sys, json
import numpy as np, jax, jax.numpy as jnp
import jaxpr_proto as jp

@jax.custom_batching.custom_vmap
def f(x):
  return jnp.sin(x)

@f.def_vmap
def rule(axis_size, in_batched, x):
  return jnp.cos(x) * jnp.arange(axis_size, dtype=x.dtype)[:, None], in_batched[0]

x = np.linspace(0.1, 1.0, 3, dtype=np.float32)
jp.save(jax.make_jaxpr(lambda x: f(x) * 2.0)(x), sys.argv[1])
xs = np.stack([x, 2 * x, 3 * x, 4 * x, 5 * x])
print(json.dumps(np.asarray(jax.vmap(lambda x: f(x) * 2.0)(xs)).tolist()))
"""

_CV_READER = """
import sys, json
import numpy as np, jax
import jaxpr_proto as jp
f = jax.extend.core.jaxpr_as_fun(jp.load(sys.argv[1]))
x = np.linspace(0.1, 1.0, 3, dtype=np.float32)
xs = np.stack([x, 2 * x, 3 * x, 4 * x, 5 * x])
print(json.dumps(np.asarray(jax.vmap(f)(xs)[0]).tolist()))
"""


def test_custom_vmap_rule_in_a_process_without_the_writers_code(tmp_path):
  path = tmp_path / "cv.jaxpb"
  outs = [run_json(script, path) for script in (_CV_WRITER, _CV_READER)]
  assert outs[1] == outs[0]  # the rule's (it scales by the batch index), bit for bit
  assert outs[0][0] == [0.0, 0.0, 0.0]


# The batch size as a value (dim_as_value of the symbolic size in the saved
# jaxprs): in the rule's jaxpr, in a jit inside it and in a scan's body.
_CV_SIZE_CASES = """
x = np.linspace(0.1, 1.0, 3, dtype=np.float32)
xs = np.stack([x, 2 * x, 3 * x, 4 * x, 5 * x])
cases = {
  "eager": lambda g: jax.vmap(g)(xs),
  "jit": lambda g: jax.jit(jax.vmap(g))(xs),
  "nested": lambda g: jax.vmap(jax.vmap(g))(np.stack([xs, -xs])),
  "grad": lambda g: jax.grad(lambda xs: jax.vmap(g)(xs).sum())(xs),
  "size 1": lambda g: jax.vmap(g)(xs[:1]),
}
print(json.dumps({k: np.asarray(c(g)).tolist() for k, c in cases.items()}))
"""

_CV_SIZE_WRITER = """
import sys, json
import numpy as np, jax, jax.numpy as jnp
import jaxpr_proto as jp

@jax.custom_batching.custom_vmap
def f(x):
  return jnp.sin(x)

@f.def_vmap
def rule(axis_size, in_batched, x):
  scaled = jax.jit(lambda v: v * axis_size)(x)
  total, _ = jax.lax.scan(lambda c, v: (c + v / axis_size, None), jnp.zeros_like(x[0]), x)
  return jnp.cos(scaled) + axis_size + total, in_batched[0]

g = lambda x: f(x) * 2.0
jp.save(jax.make_jaxpr(g)(np.zeros(3, np.float32)), sys.argv[1])
""" + _CV_SIZE_CASES

_CV_SIZE_READER = """
import sys, json
import numpy as np, jax
import jaxpr_proto as jp
loaded = jax.extend.core.jaxpr_as_fun(jp.load(sys.argv[1]))
g = lambda x: loaded(x)[0]
""" + _CV_SIZE_CASES


def test_custom_vmap_rule_that_uses_the_batch_size_as_a_value(tmp_path):
  """vmap (eagerly, under jit, nested, differentiated) of a loaded rule that
  computes with its batch size, in a process without the writer's code,
  gives the original's outputs bit for bit."""
  path = tmp_path / "cv.jaxpb"
  want, got = [run_json(script, path) for script in (_CV_SIZE_WRITER, _CV_SIZE_READER)]
  assert got == want
  assert want["size 1"][0][0] == pytest.approx(2 * (np.cos(0.1) + 1 + 0.1), rel=1e-6)  # the rule's
