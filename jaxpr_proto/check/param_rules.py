"""The param checks of the `params` stage: each eqn's params against its
primitive's schema (`param_schema`), and the few relations between params,
operands and sub-jaxprs that neither a type nor JAX's own type rules check
(JAX's `while` rule, for one, leaves its jaxprs' signatures unchecked:
"TODO(frostig,mattjj): check cond_jaxpr, body_jaxpr types").

The hand-written constraints are all here, one function per primitive in
`RULES`; each yields (param or None, message).
"""
from __future__ import annotations

import functools
import re

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.check import bounds, param_schema
from jaxpr_proto.codec import custom_rules, names

_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)


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


def _params_errors_memo(eqn, memo: dict) -> list:
  key = (eqn.primitive, tuple(eqn.params), tuple(map(id, eqn.params.values())))
  errs = memo.get(key)
  if errs is None:
    errs = memo[key] = list(_params_errors(eqn.primitive, eqn.params))
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


def _params_errors(prim, params):
  """The problems that the params alone show, the eqn's operands aside."""
  name = prim.name
  found = False
  for param, message in param_schema.errors(name, params, by_name=_jax_own(prim)):
    found = True
    yield param, message
  for param, v in params.items():
    why = (_unhashable(v) or _big_int(v) or (param in _DISTINCT and _repeats(v))
           or (param in _AXES and _far_axis(v)) or (param == "precision" and _not_a_pair(v)))
    if why:
      found = True
      yield param, f"{name}'s {param} {why}"
  if found:
    return
  if name not in _NAMES_MAY_MISCOUNT:
    for param, v in params.items():
      for j in (v if type(v) is tuple else (v,)):
        why = _debug_miscount(j)
        if why:
          yield param, why
          return


def _jax_own(prim) -> bool:
  """Whether `prim` is one of JAX's primitives (a user's, registered under
  its own namespace, is the reading process's to trust)."""
  key = names.PRIMITIVES.name(prim)
  return key is not None and key[0] == "jax"


# Params that name axes or dimensions, each at most once (XLA refuses repeats;
# not every JAX rule checks).
_DISTINCT = frozenset({"axis_name", "axes", "dimensions", "broadcast_dimensions", "permutation"})


# Params that are axes of an operand: within XLA's ranks, so that no rule
# computes with (or a C++ one overflows on) an axis like -9088979112675496642.
_AXES = _DISTINCT | {"axis", "dimension", "split_axis", "concat_axis"}
_MAX_RANK = 64


def _far_axis(v):
  for x in (v if type(v) is tuple else (v,)):
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and not -_MAX_RANK <= x <= _MAX_RANK:
      return f"is an axis beyond any rank ({x})"
  return None


def _not_a_pair(v):
  """A precision is None, one value, or a pair (lhs, rhs): JAX's rules read two."""
  if type(v) is tuple and len(v) != 2:
    return f"has {len(v)} entries, not a pair (lhs, rhs)"
  return None


def _repeats(v):
  if type(v) is tuple and len(set(v)) != len(v):
    return "names an axis twice"
  return None


# JAX asserts the names' counts in a sub-jaxpr's debug info when it traces
# it again (jit, scan: a bare AssertionError), yet writes names of another
# count itself for these primitives' jaxprs (custom_jvp's call_jaxpr).
_NAMES_MAY_MISCOUNT = frozenset({"custom_jvp_call", "custom_vjp_call"})


def _debug_miscount(j):
  jaxpr = j.jaxpr if isinstance(j, compat.ClosedJaxpr) else j
  if not isinstance(jaxpr, compat.Jaxpr):
    return None
  debug = jaxpr.debug_info
  for field, n in (("arg_names", len(jaxpr.invars)), ("result_paths", len(jaxpr.outvars))):
    names = getattr(debug, field, None)
    if names is not None and len(names) != n:
      what = "inputs" if field == "arg_names" else "outputs"
      return f"its jaxpr's debug info has {len(names)} {field.replace('_', ' ')} for {n} {what}"
  return None


def _unhashable(v):
  try:
    hash(v)
  except Exception:
    return "is not hashable (JAX caches eqns by their params)"
  return None


def _big_int(v, depth=0):
  if type(v) is int:
    return None if _INT64[0] <= v <= _INT64[1] else "holds an integer that does not fit int64"
  if type(v) in (tuple, list, frozenset) and depth < 8:
    for x in v:
      why = _big_int(x, depth + 1)
      if why:
        return why
  return None


# --- sub-jaxpr signatures ------------------------------------------------------------

def _avals(xs):
  return [x.aval for x in xs]


def _in_avals(j):
  return list(j.in_avals) if isinstance(j, compat.ClosedJaxpr) else _avals(j.invars)


def _out_avals(j):
  return list(j.out_avals) if isinstance(j, compat.ClosedJaxpr) else _avals(j.outvars)


def _match(a, b) -> bool:
  try:
    return compat.core.typematch(a, b)
  except Exception:
    return False


def _signature(param, what, got, want):
  """A message where the avals `got` of `param`'s `what` are not `want`."""
  if len(got) != len(want):
    return param, f"{param} takes {len(got)} {what} where the eqn gives it {len(want)}"
  for k, (g, w) in enumerate(zip(got, want)):
    if not _match(g, w):
      return param, f"{param}'s {what} {k} is {g.str_short()} where it gets {w.str_short()}"
  return None


def _jaxpr_fits(param, j, ins, outs):
  """Errors where jaxpr `j` does not take `ins` or give `outs` (None: unchecked)."""
  if not isinstance(j, (compat.ClosedJaxpr, compat.Jaxpr)):
    return [(param, f"{param} is not a jaxpr")]
  found = []
  if ins is not None:
    found.append(_signature(param, "inputs", _in_avals(j), ins))
  if outs is not None:
    found.append(_signature(param, "outputs", _out_avals(j), outs))
  return [f for f in found if f]


def _count(param, n, total):
  if type(n) is not int or not 0 <= n <= total:
    return param, f"{param}={n!r} is out of range for {total} operands"
  return None


_BOOL = compat.ShapedArray((), np.dtype("bool"))


def _scalar(aval):
  return compat.ShapedArray((), aval.dtype)


def _while(eqn, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
  ins = _avals(eqn.invars)
  for bad in (_count("cond_nconsts", cond_nconsts, len(ins)),
              _count("body_nconsts", body_nconsts, len(ins) - min(cond_nconsts, len(ins)))):
    if bad:
      yield bad
      return
  carry = ins[cond_nconsts + body_nconsts:]
  yield from _jaxpr_fits("cond_jaxpr", cond_jaxpr, ins[:cond_nconsts] + carry, None)
  cond_out = _out_avals(cond_jaxpr)
  if len(cond_out) != 1 or not _match(cond_out[0], _BOOL):
    yield "cond_jaxpr", "cond_jaxpr must give one bool scalar"
  body_consts = ins[cond_nconsts:cond_nconsts + body_nconsts]
  yield from _jaxpr_fits("body_jaxpr", body_jaxpr, body_consts + carry, carry)
  if len(eqn.outvars) != len(carry):
    yield None, f"while gives {len(eqn.outvars)} outputs for a carry of {len(carry)}"


def _call_jaxpr(param):
  def rule(eqn, **params):
    yield from _jaxpr_fits(param, params[param], _avals(eqn.invars), _avals(eqn.outvars))
  return rule


def _jit(eqn, *, jaxpr, in_shardings, out_shardings, in_layouts, out_layouts,
         donated_invars, **_):
  n_in, n_out = len(eqn.invars), len(eqn.outvars)
  for param, v, n in (("in_shardings", in_shardings, n_in), ("in_layouts", in_layouts, n_in),
                      ("donated_invars", donated_invars, n_in),
                      ("out_shardings", out_shardings, n_out),
                      ("out_layouts", out_layouts, n_out)):
    if len(v) != n:
      yield param, f"{param} has {len(v)} entries for {n} {param.split('_')[0]}puts"
  yield from _shardings_fit("in_shardings", in_shardings, eqn.invars)
  yield from _shardings_fit("out_shardings", out_shardings, eqn.outvars)
  yield from _jaxpr_fits("jaxpr", jaxpr, _avals(eqn.invars), _avals(eqn.outvars))


def _shardings_fit(param, shardings, variables):
  """Each Sharding of `shardings` (one per variable) fits its variable's
  shape, as JAX checks when it traces (`check_compatible_aval`); its lowering
  fails on one that does not (a spec of rank 1 on a scalar)."""
  for k, (s, v) in enumerate(zip(shardings, variables)):
    yield from _sharding_fits(param, f"{param}[{k}]", s, v)


def _sharding_fits(param, what, s, v):
  check = getattr(s, "check_compatible_aval", None)
  shape = getattr(v.aval, "shape", None)
  if check is None or shape is None:
    return
  try:
    check(shape)
  except ValueError as e:
    yield param, f"{what} does not fit {v.aval.str_short()}: {' '.join(str(e).split())[:200]}"


def _one_sharding(param):
  """A rule for a primitive whose one `param` is its output's sharding."""
  def rule(eqn, **params):
    if len(eqn.outvars) == 1:
      yield from _sharding_fits(param, param, params.get(param), eqn.outvars[0])
  return rule


def _reducer(param, n_operands):
  """A rule for a jaxpr that reduces scalars: 2n in, n out, of the operands' dtypes."""
  def rule(eqn, **params):
    n = n_operands(eqn, params)
    ops = [_scalar(a) for a in _avals(eqn.invars[:n])]
    yield from _jaxpr_fits(param, params[param], ops + ops, ops)
  return rule


def _window_shape(shape, window_dimensions, window_strides, padding):
  """The shape of the windows over an operand of `shape` (None where a size
  is symbolic): what reduce_window gives and select_and_scatter's source is."""
  dims = (shape, window_dimensions, window_strides, [p for pair in padding for p in pair])
  if not all(type(d) is int for v in dims for d in v):
    return None
  return tuple(max(0, (d + lo + hi - w) // st + 1) if d + lo + hi >= w else 0
               for d, w, st, (lo, hi) in zip(*dims[:3], padding))


def _check_source(name, operand, source, *window):
  windows = _window_shape(operand.shape, *window)
  if windows is not None and tuple(source.shape) != windows:
    yield None, (f"{name}'s source is {source.str_short()} where its windows "
                 f"over {operand.str_short()} give shape {windows}")


def _select_and_scatter(eqn, *, select_jaxpr, scatter_jaxpr, window_dimensions,
                        window_strides, padding, **_):
  operand, source = eqn.invars[0].aval, eqn.invars[1].aval  # (operand, source, init)
  o, s = _scalar(operand), _scalar(source)
  yield from _check_source("select_and_scatter", operand, source, window_dimensions,
                           window_strides, padding)
  yield from _jaxpr_fits("select_jaxpr", select_jaxpr, [o, o], [_BOOL])
  yield from _jaxpr_fits("scatter_jaxpr", scatter_jaxpr, [s, s], [s])


def _scatter(eqn, *, update_jaxpr, **_):
  if update_jaxpr is None:
    return
  s = _scalar(eqn.invars[0].aval)
  yield from _jaxpr_fits("update_jaxpr", update_jaxpr, [s, s], [s])


_MAX_PAD = 1 << 31


def _windowed(eqn, *, window_dimensions, window_strides, padding, base_dilation=None,
              window_dilation=None, **params):
  """A windowed reduction: one window entry per operand axis, padding pairs
  of ints (XLA aborts on others; JAX's shape rules do not all check)."""
  rank = len(eqn.invars[0].aval.shape)
  found = _window_errors(rank, padding, window_dimensions=window_dimensions,
                         window_strides=window_strides, base_dilation=base_dilation,
                         window_dilation=window_dilation)
  yield from found
  if found:  # the window arithmetic below needs sound windows
    return
  if "select_jaxpr" in params:
    yield from _select_and_scatter(eqn, **eqn.params)
  elif eqn.primitive.name == "select_and_scatter_add":  # (source, operand); the
    # shape rule does not relate the two, and XLA's verifier refuses them
    yield from _check_source("select_and_scatter_add", eqn.invars[1].aval, eqn.invars[0].aval,
                             window_dimensions, window_strides, padding)


def _window_errors(n, padding, **sizes):
  """Errors of windows over `n` axes: one entry per axis in `padding` (low,
  high pairs within XLA's sizes) and in each of `sizes` (positive ints; None
  where absent)."""
  found = []
  for param, v in (("padding", padding), *sizes.items()):
    if v is not None and len(v) != n:
      found.append((param, f"{param} has {len(v)} entries for {n} axes"))
  for k, p in enumerate(padding):
    if len(p) != 2:
      return found + [("padding", f"padding[{k}] is not a (low, high) pair")]
    if any(type(x) is int and abs(x) >= _MAX_PAD for x in p):
      found.append(("padding", f"padding[{k}] is beyond {_MAX_PAD} (XLA's sizes overflow)"))
  for param, v in sizes.items():
    if v is not None and any(type(d) is int and d < 1 for d in v):
      found.append((param, f"{param} must be positive"))
  return found


def _conv(eqn, *, window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count,
          batch_group_count, dimension_numbers, **_):
  """A convolution's dimension numbers, each a permutation of the operands'
  axes, and its window entries, one per spatial axis (JAX's shape rule
  zips them, so that too few pass and XLA's verifier refuses them)."""
  rank = len(eqn.invars[0].aval.shape)
  for field in ("lhs_spec", "rhs_spec", "out_spec"):
    spec = getattr(dimension_numbers, field, None)
    if spec is None or sorted(spec) != list(range(rank)):
      yield "dimension_numbers", f"dimension_numbers.{field} {spec} is not a permutation of the {rank} axes"
      return
  spatial = rank - 2
  yield from _window_errors(spatial, padding, window_strides=window_strides,
                            lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation)
  for param, v in (("feature_group_count", feature_group_count),
                   ("batch_group_count", batch_group_count)):
    if v < 1:
      yield param, f"{param} must be positive"


def _reduce_precision(eqn, *, exponent_bits, mantissa_bits, **_):
  """XLA takes 1 or more exponent bits and 0 or more mantissa bits."""
  if not 1 <= exponent_bits < (1 << 31):
    yield "exponent_bits", f"exponent_bits={exponent_bits} is not a positive int32"
  if not 0 <= mantissa_bits < (1 << 31):
    yield "mantissa_bits", f"mantissa_bits={mantissa_bits} is not a non-negative int32"


# integer_pow's exponent bound: JAX lowers x**y to O(log y) multiplies, but
# XLA's CPU compile of them takes time linear in y (2**24: seconds, 2**40:
# hours). Past 2**16 every float overflows or underflows unless |x| is 1.
_MAX_INTEGER_POW = 1 << 16


def _integer_pow(eqn, *, y, **_):
  if type(y) is int and abs(y) > _MAX_INTEGER_POW:
    yield "y", f"integer_pow's y={y} is beyond +-{_MAX_INTEGER_POW} (XLA compiles it in time linear in y)"


def _convert_element_type(eqn, *, new_dtype, **_):
  """PRNG keys convert to nothing and nothing converts to them (JAX's rule
  lets an operand key through, and lowering then fails)."""
  a = eqn.invars[0].aval
  if compat.is_key_dtype(getattr(a, "dtype", None)) or compat.is_key_dtype(new_dtype):
    yield None, f"convert_element_type of {a.str_short()} to {new_dtype}: PRNG keys do not convert"


def _one_shape(eqn):
  """A variadic reduction's operands (the first half; the rest are their
  init values) have one shape (JAX's shape rules read the first; XLA
  refuses others)."""
  shapes = {tuple(x.aval.shape) for x in eqn.invars[:len(eqn.invars) // 2]}
  if len(shapes) > 1:
    yield None, f"{eqn.primitive.name}'s operands have different shapes {sorted(shapes, key=str)}"


def _reduce(eqn, **params):
  yield from _one_shape(eqn)
  yield from _reduction_axes("dimensions")(eqn, **params)
  yield from _reducer("jaxpr", lambda e, p: len(e.invars) // 2)(eqn, **params)


def _reduce_window(eqn, **params):
  yield from _one_shape(eqn)
  yield from _reducer("jaxpr", lambda e, p: len(e.invars) // 2)(eqn, **params)
  yield from _windowed(eqn, **params)


def _custom_jvp_call(eqn, *, call_jaxpr, jvp_jaxpr_fun, num_consts, **_):
  """The saved jvp rule against the call: primals and tangents of the
  operands after the num_consts consts in; primal outputs and the tangents
  its out_zeros says are not zero out."""
  found = _custom_call_inputs(eqn, call_jaxpr, num_consts)
  if found:
    yield from found
    return
  rule = custom_rules.rule_of(jvp_jaxpr_fun)
  sig = rule.signature() if isinstance(rule, custom_rules.JvpRule) else None
  if sig is None:
    return
  jvp, out_zeros = sig
  ins, outs = _in_avals(call_jaxpr)[num_consts:], _out_avals(call_jaxpr)
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


def _custom_linear_solve(eqn, *, const_lengths, jaxprs, **_):
  """Each of the solve's jaxprs takes its consts (in the order of
  const_lengths, before the right-hand sides b) and b, and gives b's avals
  (solve: then its aux outputs). JAX's rules use them unchecked."""
  ins = _avals(eqn.invars)
  names = ("matvec", "vecmat", "solve", "transpose_solve")
  lengths = [getattr(const_lengths, n) for n in names]
  if any(type(n) is not int or n < 0 for n in lengths) or sum(lengths) > len(ins):
    yield "const_lengths", f"const_lengths {tuple(lengths)} do not fit {len(ins)} operands"
    return
  b, start = ins[sum(lengths):], 0
  for name, n in zip(names, lengths):
    consts, start = ins[start:start + n], start + n
    j = getattr(jaxprs, name)
    if j is None:
      if name in ("matvec", "solve"):
        yield "jaxprs", f"custom_linear_solve lacks its {name} jaxpr"
      continue
    outs = b if name != "solve" else b + _out_avals(j)[len(b):]
    yield from _jaxpr_fits(f"jaxprs.{name}", j, consts + b, outs)
  if len(eqn.outvars) != len(_out_avals(jaxprs.solve)):
    yield None, f"custom_linear_solve gives {len(eqn.outvars)} outputs where its solve gives {len(_out_avals(jaxprs.solve))}"


def _dynamic_slice(eqn, *, slice_sizes, **_):
  """One start index and one slice size per operand axis (JAX's shape rule
  zips them, so that too few pass)."""
  rank = len(eqn.invars[0].aval.shape)
  if len(eqn.invars) != 1 + rank:
    yield None, f"dynamic_slice of a rank-{rank} operand takes {rank} start indices, not {len(eqn.invars) - 1}"
  if len(slice_sizes) != rank:
    yield "slice_sizes", f"slice_sizes has {len(slice_sizes)} entries for an operand of rank {rank}"


def _split(eqn, *, axis, **_):
  """An axis of the operand, as jnp.split and lax.split give it (JAX's shape
  rule takes -1 too, but its transpose concatenates along `axis` as given)."""
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if type(axis) is not int or not 0 <= axis < rank:
    yield "axis", f"split's axis={axis!r} is not an axis of its rank-{rank} operand (0..{rank - 1})"


def _gather(eqn, *, mode, fill_value, **_):
  """A FILL_OR_DROP gather's lowering fills out-of-bounds slices with its
  fill_value (lax.gather sets one for every dtype; JAX's lowering fails on
  None). Other modes ignore it."""
  if mode == jax.lax.GatherScatterMode.FILL_OR_DROP and fill_value is None:
    yield "fill_value", "a FILL_OR_DROP gather needs a fill_value, not None"


# The primitives whose first operand must be a PRNG key array (their type
# rules read the key's impl without checking that it has one).
_KEY_OPERAND = ("random_bits", "random_split", "random_fold_in", "random_unwrap", "random_clone")


def _key_operand(eqn, **_):
  a = eqn.invars[0].aval
  if not compat.is_key_dtype(getattr(a, "dtype", None)):
    yield None, f"{eqn.primitive.name} takes a PRNG key array, not {a.str_short()}"


# Collectives name the axes of the mesh of the shard_map around them; their
# params must fit those axes' sizes (JAX checks them when the collective is
# traced, not in its type rule; lowering indexes with them).
#
# Every eqn of the body was traced under the shard_map's mesh with its newly
# manual axes Manual, and records that mesh in its context: JAX re-enters it
# when it transposes the eqn (ad.backward_pass3, `with eqn.ctx.manager`), and
# a varying type on a mesh without those axes fails an assert in core.get_mat.
def _shard_map(eqn, *, mesh, jaxpr, newly_manual_axes, **_):
  sizes = dict(getattr(mesh, "shape", {}))
  device = _abstract_device(mesh)
  seen: set[int] = set()
  stack = [(jaxpr, "jaxpr")]
  while stack:
    j, where = stack.pop()
    j = j.jaxpr if isinstance(j, compat.ClosedJaxpr) else j
    if not isinstance(j, compat.Jaxpr) or id(j) in seen:
      continue
    seen.add(id(j))
    for k, inner in enumerate(j.eqns):
      name = inner.primitive.name
      ctx_mesh = inner.ctx.cur_abstract_mesh
      ctx_types = dict(zip(ctx_mesh.axis_names, ctx_mesh.axis_types))
      ctx_sizes = dict(getattr(ctx_mesh, "shape", {}))
      not_manual = sorted(a for a in newly_manual_axes
                          if ctx_types.get(a) != compat.AxisType.Manual or ctx_sizes.get(a) != sizes.get(a))
      if not_manual:
        yield (f"{where}.eqn[{k}]", f"{name} in a shard_map body has the context mesh {ctx_mesh}, "
               f"where the shard_map's axes {not_manual} are not Manual")
        return
      if _abstract_device(ctx_mesh) != device:
        # JAX traces the body under the shard_map's own mesh: a context mesh
        # with another device than its (one with none, the other with this
        # process's) fails the collectives' check of their operands' meshes
        # (core.check_avals_context_mesh) when the program runs.
        yield (f"{where}.eqn[{k}]", f"{name} in a shard_map body has the context mesh {ctx_mesh}, "
               f"whose device is not that of the shard_map's mesh {mesh}")
        return
      check = _COLLECTIVES.get(name)
      if check is not None and not any(param_schema.errors(name, inner.params)):
        axes = inner.params.get("axis_name", inner.params.get("axes"))
        axes = axes if type(axes) is tuple else (axes,)
        if all(isinstance(a, str) and a in sizes for a in axes):
          n = int(np.prod([sizes[a] for a in axes], dtype=object))
          for param, message in check(inner, n):
            yield f"{where}.eqn[{k}].params.{param}", f"{name}'s {message}"
      if name != "shard_map":  # a shard_map inside checks its own
        for param, v in inner.params.items():
          for q, sub in enumerate(v if type(v) is tuple else (v,)):
            if isinstance(sub, (compat.Jaxpr, compat.ClosedJaxpr)):
              index = f"[{q}]" if type(v) is tuple else ""
              stack.append((sub, f"{where}.eqn[{k}].params.{param}{index}"))


def _abstract_device(mesh):
  """The device an abstract mesh (or a concrete mesh's) is bound to, or None."""
  mesh = getattr(mesh, "abstract_mesh", mesh)
  return getattr(mesh, "abstract_device", None)


def _ppermute(eqn, n):
  perm = eqn.params["perm"]
  if not all(type(p) is tuple and len(p) == 2 for p in perm):
    yield "perm", "perm is not a tuple of (source, destination) pairs"
    return
  if not all(type(i) is int and 0 <= i < n for p in perm for i in p):
    yield "perm", f"perm {perm} names devices beyond the axis size {n}"
  for what, ids in (("sources", [p[0] for p in perm]), ("destinations", [p[1] for p in perm])):
    if len(set(ids)) != len(ids):
      yield "perm", f"perm repeats {what}"


def _axis_size(eqn, n):
  if eqn.params["axis_size"] != n:
    yield "axis_size", f"axis_size={eqn.params['axis_size']!r} where the mesh axes give {n}"


_COLLECTIVES = {"ppermute": _ppermute, "all_gather": _axis_size, "reduce_scatter": _axis_size}


def _threefry2x32(eqn, **_):
  """Four operands (two key words, two count words: the shape rule takes any
  number, and the lowering takes a fifth for its keyword use_rolled_loops),
  the two key words of one shape, as the two count words (the lowering's
  loop carries them rotated; the shape rule, which broadcasts a scalar,
  lets a key pair of () and (2,) through)."""
  if len(eqn.invars) != 4 or len(eqn.outvars) != 2:
    yield None, (f"threefry2x32 takes 4 operands and gives 2 results, not "
                 f"{len(eqn.invars)} and {len(eqn.outvars)}")
    return
  shapes = [tuple(x.aval.shape) for x in eqn.invars]
  for what, (a, b) in (("key", shapes[0:2]), ("count", shapes[2:4])):
    if a != b:
      yield None, f"threefry2x32's two {what} words have different shapes {a} and {b}"


def _scan(eqn, *, length, unroll, jaxpr, num_consts=None, num_carry=None, **_):
  """Consts and carry within the operands (JAX 0.10's type rule splits the
  operands by them and takes a short split; from 0.11 flat trees say it), a
  trip count XLA's loop counter holds, and an unrolled body within the
  size bound of check.bounds."""
  if num_consts is not None:
    n_in = len(eqn.invars)
    bad = (_count("num_consts", num_consts, n_in)
           or _count("num_carry", num_carry, n_in - num_consts)
           or _count("num_carry", num_carry, len(_out_avals(jaxpr))))
    if bad:
      yield bad
      return
  if type(unroll) is bool or not 1 <= unroll:
    yield "unroll", f"unroll={unroll!r} is not a positive int"
    return
  if type(length) is not int:  # symbolic: the shapes bound it when it is known
    return
  if not 0 <= length < (1 << 31):
    yield "length", f"scan length {length} is beyond XLA's int32 trip count"
    return
  body = jaxpr.jaxpr if isinstance(jaxpr, compat.ClosedJaxpr) else jaxpr
  copies = min(unroll, length)
  if copies > 1 and copies * len(body.eqns) > bounds.MAX_INLINED_EQNS:
    yield "unroll", (f"unroll={unroll} copies of a body of {len(body.eqns)} eqns make more than "
                     f"{bounds.MAX_INLINED_EQNS} eqns (see check.bounds)")


def _sort(eqn, *, dimension, num_keys, **_):
  """Keys among the operands, and a dimension of theirs (JAX's rules index
  with both)."""
  if not 1 <= num_keys <= len(eqn.invars):
    yield "num_keys", f"num_keys={num_keys} is not within the {len(eqn.invars)} operands"
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if not -rank <= dimension < rank:
    yield "dimension", f"dimension {dimension} is not an axis of a rank-{rank} operand"


def _ref(eqn, *, pin=False, **_):
  """A pinned ref (jax.new_ref(x, pin=True)) discharges to a linear value that
  no primitive but pin/unpin accepts: reading it fails inside JAX 0.12."""
  if pin:
    yield "pin", "pinned refs (pin=True) are not supported: JAX cannot read them on this backend"


# lax.stack and lax.unstack bind a canonical axis (0 <= axis); the shape rules
# accept a negative one, which lowering and transposition then misplace.
def _stack(eqn, *, axis, **_):
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if not 0 <= axis <= rank:
    yield "axis", f"stack axis {axis} is not an axis (0 to {rank}) of the rank-{rank + 1} result"


def _unstack(eqn, *, axis, **_):
  rank = len(eqn.invars[0].aval.shape) if eqn.invars else 0
  if not 0 <= axis < rank:
    yield "axis", f"unstack axis {axis} is not an axis (0 to {rank - 1}) of the rank-{rank} operand"


# The shape rules of reduce_and/or/xor (axes) and of reduce (dimensions)
# delete the axes with numpy, which takes a negative one; lowering then
# refuses it. lax binds them canonical.
def _reduction_axes(param):
  def rule(eqn, **params):
    axes, rank = params[param], len(eqn.invars[0].aval.shape) if eqn.invars else 0
    if not all(0 <= a < rank for a in axes):
      yield param, f"reduction axes {axes} are not axes (0 to {rank - 1}) of the rank-{rank} operand"
  return rule


def _platform_index(eqn, *, platforms, **_):
  """Each branch's platforms, a non-empty tuple, or None for the default
  (lowering finds no rule in an empty table)."""
  if not platforms or any(p is not None and not p for p in platforms):
    yield "platforms", f"platforms {platforms} names no platform for a branch"
  elif sum(p is None for p in platforms) > 1:
    yield "platforms", f"platforms {platforms} has more than one default"


def _schur(eqn, *, sort_eig_vals, **_):
  if sort_eig_vals:  # JAX lowers schur on the CPU only, where LAPACK's gees sort is not wired
    yield "sort_eig_vals", "schur with sort_eig_vals=True is not implemented by JAX"


def _random_gamma(eqn, **_):
  """Its alpha is floating (JAX's abstract eval passes any dtype through;
  lowering then computes the gamma sampler in alpha's dtype)."""
  alpha = eqn.invars[1].aval
  if not jax.numpy.issubdtype(alpha.dtype, jax.numpy.floating):
    yield None, f"random_gamma's alpha is {alpha.str_short()}, not floating"


def _ref_indexers(eqn, *, tree, **_):
  """get/swap/addupdate's indexers: each slice's start and size an int or an
  operand, its stride a positive int (lowering computes with them; JAX's
  rules take the tree as traced); each NDIndexer of the shape of what it
  indexes (the discharge rules slice by its indices, JAX's type rule reads
  only their sizes), each static slice within its dim."""
  for k, x in enumerate(eqn.invars[_REF_INDEXED[eqn.primitive.name]:]):
    dtype = getattr(x.aval, "dtype", None) if isinstance(x.aval, compat.ShapedArray) else None
    if dtype is None or not (np.issubdtype(dtype, np.integer) or dtype == np.bool_):
      yield "tree", (f"index operand {k} is of type {x.aval.str_short()}, not an array of "
                     "integers or bools (JAX's indexing refuses it)")
      return
  operand = object()
  try:
    transforms = tree.unflatten([operand] * tree.num_leaves)
  except Exception as e:  # NDIndexer's own checks
    yield "tree", f"the ref's indexers do not rebuild ({type(e).__name__}: {e})"
    return
  slice_type = compat.internal_pytree_types()["jax::Slice"]
  aval = getattr(eqn.invars[0].aval, "inner_aval", None)
  for t in (transforms if type(transforms) is tuple else (transforms,)):
    indices = getattr(t, "indices", None)
    if indices is not None and isinstance(aval, compat.ShapedArray) and \
        tuple(t.shape) != aval.shape:
      yield "tree", f"an indexer of shape {tuple(t.shape)} indexes a ref of shape {aval.shape}"
      return
    for idx, dim in zip(indices or (), getattr(t, "shape", ())):
      if type(idx) is not slice_type:
        continue
      for field in ("start", "size"):
        v = getattr(idx, field)
        if v is not operand and not (isinstance(v, (int, np.integer)) and type(v) is not bool):
          yield "tree", f"a slice's {field} is {v!r}, neither an int nor an operand"
          return
      if not isinstance(idx.stride, (int, np.integer)) or idx.stride < 1:
        yield "tree", f"a slice's stride is {idx.stride!r}, not a positive int"
        return
      why = _slice_misfit(idx, dim, operand)
      if why:
        yield "tree", why
        return
    try:
      aval = t.transform_type(aval)
    except Exception:  # the types stage says why
      aval = None


def _slice_misfit(idx, dim, operand):
  """Why a static slice does not fit a dim of size `dim` (its start, size
  and span in 0..dim; the discharge rules compute its start, and its
  indices by stride, in int32), or None."""
  if type(dim) is not int:
    return None
  start = None if idx.start is operand else int(idx.start)
  size = None if idx.size is operand else int(idx.size)
  stride = int(idx.stride)
  if start is not None and not 0 <= start <= min(dim, _INT32[1]):
    return f"a slice's start {start} is outside its dim of size {dim}"
  if size is not None and not 0 <= size <= dim:
    return f"a slice's size {size} is outside its dim of size {dim}"
  if size and (size - 1) * stride + 1 > dim - (start or 0):
    at = "" if start is None else f" from {start}"
    return f"a slice of {size} at stride {stride}{at} overruns its dim of size {dim}"
  if stride > _INT32[1]:
    return f"a slice's stride {stride} is over int32's range"
  return None


def _reshape(eqn, *, new_sizes, **_):
  """JAX's shape rule leaves the element count unchecked (a TODO); XLA refuses it."""
  shape = eqn.invars[0].aval.shape
  if all(type(d) is int for d in (*shape, *new_sizes)) and (
      int(np.prod(shape, dtype=object)) != int(np.prod(new_sizes, dtype=object))):
    yield "new_sizes", f"reshape of {eqn.invars[0].aval.str_short()} to {tuple(new_sizes)} changes the element count"


# The op names StableHLO's verifier takes for a composite.
_COMPOSITE_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*([.][a-zA-Z0-9_$]+)+")


def _composite(eqn, *, attributes, name, **params):
  """Each attribute is (name, leaves, treedef) with as many leaves as the
  treedef has (lowering unpacks them); the jaxpr is called as jit's is."""
  if not (isinstance(name, str) and _COMPOSITE_NAME.fullmatch(name)):
    yield "name", f"composite name {name!r} is not a namespaced op name such as 'my_namespace.my_op'"
  for k, a in enumerate(attributes):
    if not (type(a) is tuple and len(a) == 3 and type(a[0]) is str and type(a[1]) is tuple
            and getattr(a[2], "num_leaves", None) == len(a[1])):
      yield "attributes", f"attributes[{k}] is not a (name, leaves, treedef) triple"
      return
  yield from _call_jaxpr("call_jaxpr" if "call_jaxpr" in params else "jaxpr")(eqn, **params)  # JAX >= 0.11: call_jaxpr


def _cond(eqn, *, branches, branches_platforms=None, **_):
  """The branch index is a scalar (JAX's rule checks its dtype, not its
  shape; XLA's case refuses any other); platform-dependent branches name
  one platform list per branch."""
  index = eqn.invars[0].aval
  if getattr(index, "shape", None) != ():
    yield None, f"cond's branch index is {index.str_short()}, not a scalar"
  if branches_platforms is not None and len(branches_platforms) != len(branches):
    yield "branches_platforms", (f"branches_platforms has {len(branches_platforms)} entries "
                                 f"for {len(branches)} branches")


def _approx_top_k(eqn, *, recall_target, reduction_dimension, reduction_input_size_override, **_):
  if not (isinstance(recall_target, float) and 0.0 < recall_target <= 1.0):
    yield "recall_target", f"recall_target={recall_target!r} is not in (0, 1] (XLA refuses it)"
  shape = eqn.invars[0].aval.shape
  n = shape[reduction_dimension] if -len(shape) <= reduction_dimension < len(shape) else None
  override = reduction_input_size_override
  if n is not None and override != -1 and not (type(n) is int and n <= override < (1 << 31)):
    yield "reduction_input_size_override", (
        f"reduction_input_size_override={override} is neither -1 nor at least the "
        f"reduced axis's size {n} (XLA refuses it)")


def _device_put(eqn, *, devices, srcs, copy_semantics, **_):
  n = len(eqn.invars)
  for param, v in (("devices", devices), ("srcs", srcs), ("copy_semantics", copy_semantics)):
    if len(v) != n:
      yield param, f"{param} has {len(v)} entries for {n} operands"
  yield from _shardings_fit("devices", devices, eqn.outvars)


def _random_wrap(eqn, *, impl, **_):
  """The key data JAX's random_wrap checks at trace time, not in its type rule."""
  a = eqn.invars[0].aval
  shape = tuple(impl.key_shape)
  if tuple(a.shape[len(a.shape) - len(shape):]) != shape or len(a.shape) < len(shape):
    yield None, f"random_wrap of {a.str_short()}: key data of {impl.name} must end with dims {shape}"
  elif a.dtype not in (np.uint32, compat.float0):
    yield None, f"random_wrap of {a.str_short()}: key data must be uint32"


# pure_callback's vmap methods (JAX's allowed_vmap_methods; None: JAX's default).
_VMAP_METHODS = frozenset({"sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                           "legacy_vectorized", None})


def _callback(eqn, *, callback, vmap_method=None, **_):
  """The callback takes the eqn's operands as the array leaves of its
  in_tree (the other leaves are debug_callback's static args): JAX unflattens
  them at run time, in the host callback, where a mismatch fails."""
  parts = compat.callback_parts(eqn.primitive.name, callback)
  if parts is None:
    yield "callback", "is not a callback made by JAX's callback API"
    return
  _, in_tree, static_args = parts
  dynamic = in_tree.num_leaves - len(static_args or ())
  if dynamic != len(eqn.invars):
    yield "callback", (f"the callback takes {dynamic} array arguments, the eqn has "
                       f"{len(eqn.invars)} operands")
  if vmap_method not in _VMAP_METHODS:
    yield "vmap_method", f"{vmap_method!r} is none of JAX's vmap methods"


def _linear_call(eqn, *, callee, transpose_thunk, num_callee_consts, num_res, **_):
  """JAX's abstract eval of linear_call returns the callee's outputs and
  checks nothing else; its transpose rule (grad) binds the saved transpose
  to (its consts, the residuals, the outputs' cotangents) for the linear
  operands' cotangents."""
  n = len(eqn.invars)
  for param, k in (("num_callee_consts", num_callee_consts), ("num_res", num_res)):
    bad = _count(param, k, n)
    if bad:
      yield bad
      return
  if num_callee_consts + num_res > n:
    yield "num_res", f"num_callee_consts + num_res = {num_callee_consts + num_res} > {n} operands"
    return
  found = _jaxpr_fits("callee", callee, _avals(eqn.invars), None)
  if found:
    yield from found
    return
  try:
    transpose, t_consts = transpose_thunk()
  except Exception as e:
    yield "transpose_thunk", f"cannot be called: {type(e).__name__}: {e}"
    return
  for param, j in (("callee", callee), ("transpose_thunk", transpose)):
    if getattr(j, "consts", None):  # JAX runs them as open jaxprs, without their consts
      yield param, f"{param}'s jaxpr has consts, which linear_call does not pass"
      return
  res = _avals(eqn.invars)[num_callee_consts:num_callee_consts + num_res]
  lin = _avals(eqn.invars)[num_callee_consts + num_res:]
  consts = [compat.core.get_aval(c) for c in t_consts]
  yield from _jaxpr_fits("transpose_thunk", transpose, consts + res + _out_avals(callee), lin)


# --- Pallas ---------------------------------------------------------------------------

def _pallas_call(eqn, *, jaxpr, grid_mapping, out_avals, input_output_aliases=(),
                 interpret=False, compiler_params=None, **_):
  """A Pallas kernel against its grid mapping (JAX's abstract eval of
  pallas_call returns out_avals and checks nothing else; lowering and the
  interpreter index by these counts and shapes): the operands are the
  kernel's closed-over refs, the scalar prefetch operands and the inputs;
  the kernel takes a ref per scalar prefetch operand, a block per input and
  output, then the scratch refs; each index map takes the grid indices
  (int32 scalars) and the scalar prefetch refs and gives an integer scalar
  per block dim; each block is of its array's dtype and block shape."""
  gm = grid_mapping
  bms, grid = gm.block_mappings, gm.grid
  n_idx, n_in, n_out, n_scratch = (gm.num_index_operands, gm.num_inputs, gm.num_outputs,
                                   len(gm.scratch_avals))
  if len(bms) != n_in + n_out:
    yield "grid_mapping", (f"has {len(bms)} block mappings for num_inputs={n_in} and "
                           f"num_outputs={n_out}")
    return
  ima = list(gm.index_map_avals)
  if len(ima) != len(grid) + n_idx:
    yield "grid_mapping", (f"index maps take {len(ima)} operands for a grid of {len(grid)} axes "
                           f"and {n_idx} scalar prefetch operands")
    return
  for k, a in enumerate(ima[:len(grid)]):
    if not (type(a) is compat.ShapedArray and a.shape == () and a.dtype == np.int32):
      yield "grid_mapping", f"index map operand {k} is {a.str_short()}, not the int32 grid index"
      return
  if gm.index_map_tree.num_leaves != len(ima):
    yield "grid_mapping", (f"the index maps' input tree has {gm.index_map_tree.num_leaves} "
                           f"leaves for {len(ima)} operands")
    return
  kernel = jaxpr.jaxpr if isinstance(jaxpr, compat.ClosedJaxpr) else jaxpr
  if kernel.outvars:
    yield "jaxpr", f"the kernel returns {len(kernel.outvars)} values; a Pallas kernel returns none"
    return
  kin = _avals(kernel.invars)
  if len(kin) != n_idx + n_in + n_out + n_scratch:
    yield "jaxpr", (f"the kernel takes {len(kin)} operands where the grid mapping has {n_idx} "
                    f"scalar prefetch, {n_in} input, {n_out} output and {n_scratch} scratch operands")
    return
  ops = _avals(eqn.invars)
  n_consts = len(kernel.constvars)
  if len(ops) != n_consts + n_idx + n_in:
    yield None, (f"pallas_call has {len(ops)} operands where its kernel closes over {n_consts} "
                 f"refs and the grid mapping has {n_idx} scalar prefetch and {n_in} inputs")
    return
  for k, (v, a) in enumerate(zip(kernel.constvars, ops)):
    if not _match(v.aval, a):
      yield "jaxpr", f"the kernel's closed-over ref {k} is {v.aval.str_short()}, its operand {a.str_short()}"
      return
  if len(out_avals) != n_out or len(eqn.outvars) != n_out:
    yield "out_avals", (f"{len(out_avals)} out_avals and {len(eqn.outvars)} results for "
                        f"num_outputs={n_out}")
    return

  def same_array(a, b):
    return getattr(a, "shape", None) == getattr(b, "shape", None) and \
        getattr(a, "dtype", None) == getattr(b, "dtype", None)

  def same_ref(a, b):
    return (isinstance(a, compat.AbstractRef) and isinstance(b, compat.AbstractRef)
            and same_array(a, b) and a.memory_space == b.memory_space)

  for k in range(n_idx):
    op, im, kr = ops[n_consts + k], ima[len(grid) + k], kin[k]
    if not (same_array(op, im) and same_array(op, kr)):
      yield "grid_mapping", (f"scalar prefetch operand {k} is {op.str_short()}, the index maps "
                             f"take {im.str_short()} and the kernel {kr.str_short()}")
      return
  for k, bm in enumerate(bms):
    where = f"grid_mapping.block_mappings[{k}]"
    array, dims = bm.array_aval, bm.block_shape
    if len(dims) != len(array.shape):
      yield where, f"block shape {dims} has {len(dims)} dims for the array {array.str_short()}"
      return
    if 0 in array.shape:  # no block fits (the interpreter slices blocks out of it)
      yield where, f"the array {array.str_short()} is empty"
      return
    block = tuple(d.block_size for d in dims if type(d).__name__ != "Squeezed")
    ref = bm.transformed_block_aval
    if getattr(ref, "shape", None) != block or getattr(ref, "dtype", None) != array.dtype:
      yield where, (f"the block {ref.str_short()} is not of block shape {block} and dtype "
                    f"{array.dtype}")
      return
    if not same_ref(kin[n_idx + k], ref):
      yield "jaxpr", (f"the kernel takes {kin[n_idx + k].str_short()} for block {k} "
                      f"({bm.origin}), which is {ref.str_short()}")
      return
    outer = ops[n_consts + n_idx + k] if k < n_in else out_avals[k - n_in]
    if not same_array(outer, array):
      what = f"operand {n_consts + n_idx + k}" if k < n_in else f"out_avals[{k - n_in}]"
      yield where, f"the array {array.str_short()} is not {what}, {outer.str_short()}"
      return
    im = bm.index_map_jaxpr
    ins = list(im.in_avals)
    if len(ins) != len(ima) or not all(_match(a, b) for a, b in zip(ins, ima)):
      show = lambda avals: ", ".join(a.str_short() for a in avals)  # noqa: E731
      yield f"{where}.index_map_jaxpr", (f"the index map takes ({show(ins)}) where the grid "
                                         f"mapping gives ({show(ima)})")
      return
    outs = list(im.out_avals)
    if not all(type(a) is compat.ShapedArray and a.shape == () and a.dtype in (np.int32, np.int64)
               for a in outs):
      yield where, "the index map must give integer scalars"
      return
    if bm.index_map_out_tree.num_leaves != len(outs) or (
        len(outs) != len(dims) and not any(type(d).__name__ == "BoundedSlice" for d in dims)):
      yield where, f"the index map gives {len(outs)} indices for {len(dims)} block dims"
      return
    for j, (x, d) in enumerate(zip(im.jaxpr.outvars, dims)):
      # (Pallas computes a block's start as index * block size in int32)
      size = getattr(d, "block_size", 1)
      start = int(x.val) * (size if type(size) is int else 1) if isinstance(x, compat.Literal) else 0
      if not _INT32[0] <= start <= _INT32[1]:
        yield f"{where}.index_map_jaxpr", (f"block index {int(x.val)} of dim {j} starts at "
                                           f"element {start}, beyond int32")
        return
  for k, (a, s) in enumerate(zip(kin[n_idx + n_in + n_out:], gm.scratch_avals)):
    if not (same_ref(a, s) if isinstance(s, compat.AbstractRef) else same_array(a, s)):
      yield "jaxpr", f"the kernel takes {a.str_short()} for scratch operand {k}, which is {s.str_short()}"
      return
  if interpret is True and any(type(d).__name__ in ("BoundedSlice", "Indirect")
                              for bm in bms for d in bm.block_shape):
    yield "interpret", "Pallas's interpreter takes Blocked, Element and Squeezed block dims only"
    return
  if type(interpret) is not bool:
    found = _interpreter_cores(interpret)
    if found:
      yield "interpret", found
      return
  semantics = getattr(compiler_params, "dimension_semantics", None)
  if semantics is not None and len(semantics) != len(grid):
    yield "compiler_params", (f"dimension_semantics has {len(semantics)} entries for a grid of "
                              f"{len(grid)} axes")
    return
  axis = _pallas_grid_axis(kernel, len(grid))
  if axis is not None:
    yield "jaxpr", f"the kernel reads {axis}"
    return
  seen = set()
  for pair in input_output_aliases:
    i, o = pair if type(pair) is tuple and len(pair) == 2 else (None, None)
    if not (type(i) is int and type(o) is int and 0 <= i < len(ops) - n_consts
            and 0 <= o < n_out) or o in seen:
      yield "input_output_aliases", f"{pair!r} is not a distinct (input, output) pair in range"
      return
    seen.add(o)
    if not same_array(ops[n_consts + i], out_avals[o]):
      yield "input_output_aliases", (f"input {i} ({ops[n_consts + i].str_short()}) is aliased "
                                     f"to output {o} ({out_avals[o].str_short()})")
      return



# The TPU interpreter runs a thread per simulated core, each with a vector
# clock (int32s: by default two per core of every device), and hands the
# count to a callback as an int32. A TPU chip has a few cores; a GPU block
# at most 1024 threads.
_MAX_INTERPRETED_CORES = 1024
_MAX_VECTOR_CLOCK = 1 << 16


def _interpreter_cores(params):
  """Why the interpreter cannot simulate the cores that InterpretParams
  asks for, or None. Its vector clocks must outnumber the cores of all the
  devices that it runs the kernel on (at most this process's devices)."""
  cores = getattr(params, "num_cores_or_threads", 1)
  if not 1 <= cores <= _MAX_INTERPRETED_CORES:
    return f"num_cores_or_threads={cores}: the interpreter simulates 1 to {_MAX_INTERPRETED_CORES}"
  clocks = getattr(params, "vector_clock_size", None)
  devices = jax.device_count()
  if clocks is not None and not cores * devices < clocks <= _MAX_VECTOR_CLOCK:
    return (f"vector_clock_size={clocks}: the interpreter takes more than num_cores_or_threads "
            f"x devices ({cores} x {devices}) and at most {_MAX_VECTOR_CLOCK}")
  return None


# Ref primitives, and where their indexer operands start.
_REF_INDEXED = {"get": 1, "swap": 2, "addupdate": 2}


def _pallas_grid_axis(kernel, rank):
  """What a kernel reads that it cannot (in it or its sub-jaxprs): a grid
  axis outside the grid (program_id, num_programs), a ref at a non-integer
  index; or None."""
  todo, seen = [kernel], set()
  while todo:
    j = todo.pop()
    j = j.jaxpr if isinstance(j, compat.ClosedJaxpr) else j
    if id(j) in seen or not isinstance(j, compat.Jaxpr):
      continue
    seen.add(id(j))
    for e in j.eqns:
      if e.primitive.name in ("program_id", "num_programs"):
        axis = e.params.get("axis")
        if not (type(axis) is int and 0 <= axis < rank):
          return f"grid axis {axis} of a grid of {rank} axes"
      elif e.primitive.name in _REF_INDEXED:  # (the discharge rules index with them)
        for x in e.invars[_REF_INDEXED[e.primitive.name]:]:
          dtype = getattr(x.aval, "dtype", None)
          if dtype is None or not (np.issubdtype(dtype, np.integer) or dtype == np.bool_):
            return f"a ref indexed by {x.aval.str_short()}, not an integer"
      todo.extend(compat.jaxprs_in_params(e.params))
  return None


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
