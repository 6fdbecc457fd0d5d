"""The param checks of the `params` stage: each eqn's params against its
primitive's schema (`param_schema`), and the few relations between params,
operands and sub-jaxprs that neither a type nor JAX's own type rules check
(JAX's `while` rule, for one, leaves its jaxprs' signatures unchecked:
"TODO(frostig,mattjj): check cond_jaxpr, body_jaxpr types").

The hand-written constraints are one function per primitive in `RULES`;
each yields (param or None, message). This module runs them (`errors`)
and holds the table, and custom_jvp_call's and custom_vjp_call's rules
(with the memoized verdict on whether grad can linearize a jvp rule); the
others are in modules by concern:

* `params_alone`: what the params alone show (the schema, hashable, int64,
  axes, debug info), checked once per group of eqns;
* `jaxpr_fits`: what the rules share (avals, a sub-jaxpr's signature, counts);
* `control_flow_rules`: while, cond, scan, platform_index, custom_linear_solve;
* `call_rules`: jit, composite, linear_call, host callbacks;
* `sharding_rules`: shardings against shapes; shard_map and its collectives;
* `window_rules`: reductions, windowed reductions, convolutions;
* `numeric_rules`: PRNG keys, conversions and numeric params;
* `shape_rules`: indices, sizes and axes against shapes;
* `ref_rules`: refs and their indexers;
* `pallas_rules`: pallas_call.
"""
from __future__ import annotations

import functools
import re

import jax

from jaxpr_proto import compat
from jaxpr_proto.check.call_rules import _callback, _composite, _jit, _linear_call
from jaxpr_proto.check.control_flow_rules import (_cond, _custom_linear_solve, _platform_index,
                                                  _scan, _while)
from jaxpr_proto.check.jaxpr_fits import (_avals, _call_jaxpr, _count, _in_avals, _jaxpr_fits,
                                          _out_avals)
from jaxpr_proto.check.numeric_rules import (_KEY_OPERAND, _convert_element_type, _integer_pow,
                                             _key_operand, _random_gamma, _random_wrap,
                                             _reduce_precision, _schur, _threefry2x32)
from jaxpr_proto.check.pallas_rules import _pallas_call
from jaxpr_proto.check.params_alone import _params_errors, params_key
from jaxpr_proto.check.ref_rules import _ref, _ref_indexers
from jaxpr_proto.check.shape_rules import (_approx_top_k, _dynamic_slice, _gather, _reshape,
                                           _sort, _split, _stack, _unstack)
from jaxpr_proto.check.sharding_rules import _device_put, _one_sharding, _shard_map
from jaxpr_proto.check.window_rules import (_conv, _reduce, _reduce_window, _reduction_axes,
                                            _scatter, _windowed)
from jaxpr_proto.codec import custom_rules, names


def errors(dec):
  """(path, message, is_version) of each param problem in every jaxpr `dec`
  decoded. In a file of a newer JAX, each is put down to that JAX
  (is_version): its primitives may take params this JAX's do not."""
  up = dec.upgrader
  newer = bool(up) and up.newer
  for path, message in _errors(dec):
    if not newer:
      yield path, message, False
      continue
    m = _TAKES_NOT.match(message)
    if m:
      prim, name = m.groups()
      message = f"primitive {prim} has param {name!r}, which this JAX's {prim} lacks"
    yield path, f"{message} ({up.describe()})", True


_TAKES_NOT = re.compile(r"primitive (\S+) does not take a param '([^']*)'$")


def _errors(dec):
  # What params alone decide is checked once per group of eqns that the
  # decoder gave one primitive and params (Decoder._decode_jaxpr), at the
  # first eqn; a primitive's rule (RULES), which may read operands, for each.
  memo: dict = {}
  for i, path in list(dec.state.jaxpr_paths.items()):
    jaxpr = dec.state.decoded["jaxprs"].get(i)
    if not isinstance(jaxpr, compat.Jaxpr):
      continue
    prefix = f"{path}." if path else ""
    eqns = jaxpr.eqns
    calls = dec.state.calls.get(id(jaxpr))
    groups = [c[2] for c in calls] if calls is not None else [[k] for k in range(len(eqns))]
    found = []
    for ks in groups:
      errs = _params_errors_memo(eqns[ks[0]], memo)
      if errs:
        found.append((ks[0], errs))
      elif eqns[ks[0]].primitive.name in RULES:
        found.extend((k, errs) for k in ks for errs in [_rule_errors(eqns[k])] if errs)
    for k, errs in sorted(found, key=lambda x: x[0]):
      where = f"{prefix}eqn[{k}]"
      for param, message in errs:
        yield (f"{where}.params.{param}" if param else where), message
    if not found and not getattr(jaxpr, "is_high", True):
      yield from _high_eqns(eqns, groups, prefix)


def _high_eqns(eqns, groups, prefix):
  """A jaxpr with a high-level (HiJAX) eqn is marked is_high, as JAX's
  tracing marks it: jit lowers such eqns to low-level ones only then (no
  MLIR rule lowers call_hi_primitive itself)."""
  high = []
  for ks in groups:
    by_params = type(eqns[ks[0]].primitive).is_high is _PARAMS_ONLY_IS_HIGH  # (JAX's own rule)
    for k in ks[:1] if by_params else ks:
      eqn = eqns[k]
      try:
        if eqn.primitive.is_high(*(x.aval for x in eqn.invars), **eqn.params):
          high.append(k)
          break
      except Exception:  # operands its rule cannot take: the types stage says so
        pass
  if high:
    k = min(high)
    yield f"{prefix}eqn[{k}]", f"{eqns[k].primitive.name} is a high-level eqn in a jaxpr not marked is_high"


_PARAMS_ONLY_IS_HIGH = compat.Primitive.is_high


# (primitive, params as those checks read them (params_alone.params_key), names
# registered, JAX's configuration) -> what the params alone show: the same
# dimension numbers in every program, one verdict for a sub-jaxpr's copies.
_PARAMS_ERRORS = compat.memo.memo()


def _params_errors_memo(eqn, memo: dict) -> list:
  key = (eqn.primitive, tuple(eqn.params), tuple(map(id, eqn.params.values())))
  errs = memo.get(key)
  if errs is None:
    prim, params = eqn.primitive, eqn.params
    errs = memo[key] = _PARAMS_ERRORS.lookup(
        lambda: (prim, params_key(params), names.generation(),
                 compat.memo.context_key()),
        lambda: list(_params_errors(prim, params)))
  return errs


def _rule_errors(eqn) -> list:
  """(param or None, message) of each problem its primitive's rule finds."""
  errs = []
  try:
    errs.extend(RULES[eqn.primitive.name](eqn, **eqn.params))
  except IndexError:  # too few operands: the types stage says so
    pass
  except (TypeError, AttributeError, ValueError) as e:  # params of a shape no rule foresaw
    errs.append((None, f"{eqn.primitive.name}: params do not fit together ({type(e).__name__}: {e})"))
  return errs


# --- custom_jvp_call and custom_vjp_call -------------------------------------------

def _custom_jvp_call(eqn, *, call_jaxpr, jvp_jaxpr_fun, num_consts, **_):
  """The saved jvp rule against the call: primals and tangents of the
  operands after the num_consts consts in; primal outputs and the tangents
  its out_zeros says are not zero out."""
  found = _custom_call_inputs(eqn, call_jaxpr, num_consts)
  if found:
    yield from found
    return
  rule = custom_rules.rule_of(jvp_jaxpr_fun)
  if not isinstance(rule, custom_rules.JvpRule):
    return
  ins, outs = _in_avals(call_jaxpr)[num_consts:], _out_avals(call_jaxpr)
  key = ("fits", tuple(ins), tuple(outs))  # (once per rule and types: a model calls relu's rule per layer)
  if key not in rule.checked:
    rule.checked[key] = list(_jvp_rule_errors(rule, ins, outs))
  yield from rule.checked[key]


def _jvp_rule_errors(rule, ins, outs):
  """What is wrong with the saved jvp rule called on `ins`, giving `outs`."""
  sig = rule.signature()
  if sig is None:
    return
  jvp, out_zeros = sig
  if len(out_zeros) != len(outs):
    yield "jvp_jaxpr_fun", f"the jvp rule's out_zeros has {len(out_zeros)} entries for {len(outs)} outputs"
    return
  tangent = lambda a: a.to_tangent_aval()
  found = _jaxpr_fits("jvp_jaxpr_fun", jvp, ins + [tangent(a) for a in ins],
                      outs + [tangent(a) for a, z in zip(outs, out_zeros) if not z])
  if found:
    yield from found
    return
  if "linear" not in rule.checked:
    rule.checked["linear"] = _jvp_rule_verdict(jvp, len(ins), len(outs))
  if rule.checked["linear"]:
    yield "jvp_jaxpr_fun", rule.checked["linear"]


_JVP_VERDICTS = compat.memo.memo()  # (rule's fingerprint, counts, JAX config) -> why not, or None


def _jvp_rule_verdict(jvp, n_primals, n_outs):
  """Why grad cannot linearize the jvp rule, or None; memoized process-wide
  by the rule's structure (the same rule in every program using it)."""
  return _JVP_VERDICTS.lookup(
      lambda: (compat.memo.fingerprint(jvp), n_primals, n_outs, compat.memo.context_key()),
      lambda: (_primals_of_tangents(jvp, n_primals, n_outs)
               or _not_linear(jvp, n_primals, n_outs)))


def _primals_of_tangents(jvp, n_primals, n_outs):
  """Why the jvp rule's primal outputs depend on its tangent inputs, or None.
  Linearizing (grad, vjp, linearize) partially evaluates the rule with its
  tangents unknown and needs its primal outputs known (ad.linearize_from_jvp):
  JAX raises "Linearization failed to produce known values for all output
  primals" at grad time otherwise, eager or under jit."""
  tangents = _in_avals(jvp)[n_primals:]
  unknowns = [False] * n_primals + [a.dtype != jax.dtypes.float0 for a in tangents]
  try:
    with compat.no_current_trace():
      _, _, out_unknowns, _ = compat.partial_eval_jaxpr_nounits(jvp, unknowns, False)
  except Exception as e:
    text = str(e).strip().splitlines()
    return (f"the jvp rule could not be linearized, as grad needs "
            f"({type(e).__name__}{': ' + text[0] if text else ''})")
  bad = [k for k, u in enumerate(out_unknowns[:n_outs]) if u]
  if bad:
    return (f"the jvp rule's primal output{'s' if len(bad) > 1 else ''} "
            f"{', '.join(map(str, bad))} depend{'' if len(bad) > 1 else 's'} on its "
            "tangent inputs, so grad cannot linearize it")
  return None


def _not_linear(jvp, n_primals, n_outs):
  """Why the jvp rule's tangent outputs are not linear in its tangent inputs,
  or None. grad transposes that part of the rule, as JAX's
  `linear_transpose` does: traced here (nothing runs), so that a rule such as
  `t * t` or `sin(t)` is refused on load rather than failing inside JAX
  (an AssertionError in its bilinear transpose) at grad time."""
  ins, outs = _in_avals(jvp), _out_avals(jvp)
  tangents_in, tangents_out = ins[n_primals:], outs[n_outs:]
  if not tangents_out or not all(jax.numpy.issubdtype(a.dtype, jax.numpy.inexact)
                                 for a in tangents_in + tangents_out):
    return None  # float0 or integer tangents: nothing of them is transposed
  f = compat.jaxpr_as_fun(jvp)
  spec = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype)

  def tangent_part(primals, *tangents):
    return f(*primals, *tangents)[n_outs:]

  def transpose(primals, cotangents):
    return jax.linear_transpose(functools.partial(tangent_part, primals),
                                *map(spec, tangents_in))(cotangents)
  try:
    with compat.no_current_trace():
      jax.make_jaxpr(transpose)([spec(a) for a in ins[:n_primals]], [spec(a) for a in tangents_out])
  except Exception as e:
    text = str(e).strip().splitlines()
    return (f"the jvp rule is not linear in its tangents, as grad needs "
            f"({type(e).__name__}{': ' + text[0] if text else ''})")
  return None


def _custom_call_inputs(eqn, call_jaxpr, num_consts):
  """JAX's type rules of custom_jvp_call and custom_vjp_call type the outputs
  by the call_jaxpr but leave its inputs (and num_consts) unchecked."""
  bad = _count("num_consts", num_consts, len(eqn.invars))
  return [bad] if bad else _jaxpr_fits("call_jaxpr", call_jaxpr, _avals(eqn.invars), None)


def _custom_vjp_call(eqn, *, call_jaxpr, fwd_jaxpr_thunk, num_consts, bwd=None, out_trees=None, **_):
  """The saved fwd and bwd rules against the call: fwd takes the primals
  after the num_consts consts and gives the residuals it does not forward
  from its inputs (input_fwds), then the outputs; bwd takes the residuals
  and the outputs' cotangents and gives the primals' cotangents. The
  fwd_jaxpr_thunk, bwd and out_trees params are each a reference to a saved
  rule: all three must name the same one (JAX's transpose zips bwd's inputs
  with the residuals out_trees describes, core.eval_jaxpr then fails)."""
  found = _custom_call_inputs(eqn, call_jaxpr, num_consts)
  if found:
    yield from found
    return
  rule = custom_rules.rule_of(fwd_jaxpr_thunk)
  if isinstance(rule, custom_rules.VjpRule):
    if custom_rules.rule_of(bwd) is not rule:
      yield "bwd", "bwd refers to another saved custom_vjp rule than fwd_jaxpr_thunk"
      return
    if out_trees is not rule.out_trees:
      yield "out_trees", "out_trees refers to another saved custom_vjp rule than fwd_jaxpr_thunk"
      return
  sig = rule.signature() if isinstance(rule, custom_rules.VjpRule) else None
  if sig is None:
    return
  fwd, bwd, out_tree, res_tree, input_fwds = sig
  ins, outs = _in_avals(call_jaxpr), _out_avals(call_jaxpr)
  if out_tree.num_leaves != len(outs):
    yield "fwd_jaxpr_thunk", f"the vjp rule's out_tree has {out_tree.num_leaves} leaves for {len(outs)} outputs"
    return
  if any(f is not None and not 0 <= f < len(ins) for f in input_fwds):
    yield "fwd_jaxpr_thunk", f"the vjp rule's input_fwds {input_fwds} name inputs beyond its {len(ins)}"
    return
  n_res = sum(f is None for f in input_fwds)
  fwd_out = _out_avals(fwd)
  found = _jaxpr_fits("fwd_jaxpr_thunk", fwd, ins[num_consts:], fwd_out[:n_res] + outs)
  if found:
    yield from found
    return
  res = iter(fwd_out[:n_res])
  res_avals = [next(res) if f is None else ins[f] for f in input_fwds]
  tangent = lambda a: a.to_tangent_aval()
  yield from _jaxpr_fits("bwd", bwd, res_avals + [tangent(a) for a in outs],
                         [tangent(a) for a in ins[num_consts:]])


RULES = {
    **{name: _callback for name in compat.CALLBACK_PRIMITIVES},
    "linear_call": _linear_call,
    "while": _while,
    "random_wrap": _random_wrap,
    "jit": _jit,
    "remat2": _call_jaxpr("jaxpr"),  # jax.checkpoint
    "closed_call": _call_jaxpr("call_jaxpr"),
    "custom_vmap_call": _call_jaxpr("call"),  # (its abstract eval checks no operand)
    "custom_jvp_call": _custom_jvp_call,
    "custom_vjp_call": _custom_vjp_call,
    "custom_linear_solve": _custom_linear_solve,
    "dynamic_slice": _dynamic_slice,
    "gather": _gather,
    "split": _split,
    "shard_map": _shard_map,
    **{name: _key_operand for name in _KEY_OPERAND},
    "reshape": _reshape,
    "sort": _sort,
    **{name: _ref_indexers for name in ("get", "swap", "addupdate")},
    "random_gamma": _random_gamma,
    "new_ref": _ref,
    "empty_ref": _ref,
    "stack": _stack,
    "unstack": _unstack,
    **{name: _reduction_axes("axes") for name in ("reduce_and", "reduce_or", "reduce_xor")},
    "platform_index": _platform_index,
    "schur": _schur,
    "threefry2x32": _threefry2x32,
    "scan": _scan,
    "conv_general_dilated": _conv,
    "reduce_precision": _reduce_precision,
    "integer_pow": _integer_pow,
    "convert_element_type": _convert_element_type,
    "composite": _composite,
    "device_put": _device_put,
    "sharding_constraint": _one_sharding("sharding"),
    "reshard": _one_sharding("dst_sharding"),
    "cond": _cond,
    "approx_top_k": _approx_top_k,
    "reduce": _reduce,
    "reduce_window": _reduce_window,
    "select_and_scatter": _windowed,
    "select_and_scatter_add": _windowed,
    "select_and_gather_add": _windowed,
    "reduce_window_sum": _windowed,
    "reduce_window_max": _windowed,
    "reduce_window_min": _windowed,
    **{name: _scatter for name in ("scatter", "scatter-add", "scatter-sub", "scatter-mul",
                                   "scatter-min", "scatter-max")},
    "pallas_call": _pallas_call,
}
