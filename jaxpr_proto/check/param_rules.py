"""The param checks of the `params` stage: each eqn's params against its
primitive's schema (`param_schema`), and the few relations between params,
operands and sub-jaxprs that neither a type nor JAX's own type rules check
(JAX's `while` rule, for one, leaves its jaxprs' signatures unchecked:
"TODO(frostig,mattjj): check cond_jaxpr, body_jaxpr types").

The hand-written constraints are all here, one function per primitive in
`RULES`; each yields (param or None, message).
"""
from __future__ import annotations

import re

import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.check import param_schema
from jaxpr_proto.codec import custom_rules

_INT64 = (-(1 << 63), (1 << 63) - 1)


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
  for i, path in list(dec.state.jaxpr_paths.items()):
    jaxpr = dec.state.decoded["jaxprs"].get(i)
    if not isinstance(jaxpr, compat.Jaxpr):
      continue
    prefix = f"{path}." if path else ""
    for k, eqn in enumerate(jaxpr.eqns):
      where = f"{prefix}eqn[{k}]"
      for param, message in eqn_errors(eqn):
        yield (f"{where}.params.{param}" if param else where), message


def eqn_errors(eqn):
  name = eqn.primitive.name
  found = False
  for param, message in param_schema.errors(name, eqn.params):
    found = True
    yield param, message
  for param, v in eqn.params.items():
    why = (_unhashable(v) or _big_int(v) or (param in _DISTINCT and _repeats(v))
           or (param in _AXES and _far_axis(v)))
    if why:
      found = True
      yield param, f"{name}'s {param} {why}"
  if found:
    return
  if name not in _NAMES_MAY_MISCOUNT:
    for param, v in eqn.params.items():
      for j in (v if type(v) is tuple else (v,)):
        why = _debug_miscount(j)
        if why:
          yield param, why
          return
  rule = RULES.get(name)
  if rule is not None:
    try:
      yield from rule(eqn, **eqn.params)
    except IndexError:  # too few operands: the types stage says so
      return
    except (TypeError, AttributeError, ValueError) as e:  # params of a shape no rule foresaw
      yield None, f"{name}: params do not fit together ({type(e).__name__}: {e})"


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
  yield from _jaxpr_fits("jaxpr", jaxpr, _avals(eqn.invars), _avals(eqn.outvars))


def _reducer(param, n_operands):
  """A rule for a jaxpr that reduces scalars: 2n in, n out, of the operands' dtypes."""
  def rule(eqn, **params):
    n = n_operands(eqn, params)
    ops = [_scalar(a) for a in _avals(eqn.invars[:n])]
    yield from _jaxpr_fits(param, params[param], ops + ops, ops)
  return rule


def _select_and_scatter(eqn, *, select_jaxpr, scatter_jaxpr, window_dimensions,
                        window_strides, padding, **_):
  operand, source = eqn.invars[0].aval, eqn.invars[1].aval  # (operand, source, init)
  o, s = _scalar(operand), _scalar(source)
  dims = (operand.shape, window_dimensions, window_strides, [p for pair in padding for p in pair])
  if all(type(d) is int for v in dims for d in v):
    windows = tuple(max(0, (d + lo + hi - w) // st + 1) if d + lo + hi >= w else 0
                    for d, w, st, (lo, hi) in zip(*dims[:3], padding))
    if tuple(source.shape) != windows:
      yield None, (f"select_and_scatter's source is {source.str_short()} where its windows "
                   f"over {operand.str_short()} give shape {windows}")
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
  for param, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                   ("padding", padding), ("base_dilation", base_dilation),
                   ("window_dilation", window_dilation)):
    if v is not None and len(v) != rank:
      yield param, f"{param} has {len(v)} entries for an operand of rank {rank}"
  for k, p in enumerate(padding):
    if len(p) != 2:
      yield "padding", f"padding[{k}] is not a (low, high) pair"
      return
    if any(type(x) is int and abs(x) >= _MAX_PAD for x in p):
      yield "padding", f"padding[{k}] is beyond {_MAX_PAD} (XLA's sizes overflow)"
  for param, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                   ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
    if v is not None and any(type(d) is int and d < 1 for d in v):
      yield param, f"{param} must be positive"
  if "select_jaxpr" in params:
    yield from _select_and_scatter(eqn, **eqn.params)


def _reduce_window(eqn, **params):
  yield from _reducer("jaxpr", lambda e, p: len(e.invars) // 2)(eqn, **params)
  yield from _windowed(eqn, **params)


def _custom_jvp_call(eqn, *, call_jaxpr, jvp_jaxpr_fun, num_consts, **_):
  """The saved jvp rule against the call: primals and tangents of the
  operands after the num_consts consts in; primal outputs and the tangents
  its out_zeros says are not zero out."""
  rule = getattr(getattr(jvp_jaxpr_fun, "f", None), "__self__", None)  # WrappedFun of JvpRule
  sig = rule.signature() if isinstance(rule, custom_rules.JvpRule) else None
  if sig is None:
    return
  jvp, out_zeros = sig
  ins, outs = _in_avals(call_jaxpr)[num_consts:], _out_avals(call_jaxpr)
  if len(out_zeros) != len(outs):
    yield "jvp_jaxpr_fun", f"the jvp rule's out_zeros has {len(out_zeros)} entries for {len(outs)} outputs"
    return
  tangent = lambda a: a.to_tangent_aval()
  yield from _jaxpr_fits("jvp_jaxpr_fun", jvp, ins + [tangent(a) for a in ins],
                         outs + [tangent(a) for a, z in zip(outs, out_zeros) if not z])


def _reshape(eqn, *, new_sizes, **_):
  """JAX's shape rule leaves the element count unchecked (a TODO); XLA refuses it."""
  shape = eqn.invars[0].aval.shape
  if all(type(d) is int for d in (*shape, *new_sizes)) and (
      int(np.prod(shape, dtype=object)) != int(np.prod(new_sizes, dtype=object))):
    yield "new_sizes", f"reshape of {eqn.invars[0].aval.str_short()} to {tuple(new_sizes)} changes the element count"


def _composite(eqn, *, attributes, **params):
  """Each attribute is (name, leaves, treedef) with as many leaves as the
  treedef has (lowering unpacks them); the jaxpr is called as jit's is."""
  for k, a in enumerate(attributes):
    if not (type(a) is tuple and len(a) == 3 and type(a[0]) is str and type(a[1]) is tuple
            and getattr(a[2], "num_leaves", None) == len(a[1])):
      yield "attributes", f"attributes[{k}] is not a (name, leaves, treedef) triple"
      return
  yield from _call_jaxpr("call_jaxpr" if "call_jaxpr" in params else "jaxpr")(eqn, **params)  # JAX >= 0.11: call_jaxpr


def _cond(eqn, *, branches, branches_platforms=None, **_):
  """Platform-dependent branches name one platform list per branch."""
  if branches_platforms is not None and len(branches_platforms) != len(branches):
    yield "branches_platforms", (f"branches_platforms has {len(branches_platforms)} entries "
                                 f"for {len(branches)} branches")


def _approx_top_k(eqn, *, recall_target, **_):
  if not (isinstance(recall_target, float) and 0.0 < recall_target <= 1.0):
    yield "recall_target", f"recall_target={recall_target!r} is not in (0, 1] (XLA refuses it)"


def _device_put(eqn, *, devices, srcs, copy_semantics, **_):
  n = len(eqn.invars)
  for param, v in (("devices", devices), ("srcs", srcs), ("copy_semantics", copy_semantics)):
    if len(v) != n:
      yield param, f"{param} has {len(v)} entries for {n} operands"


def _random_wrap(eqn, *, impl, **_):
  """The key data JAX's random_wrap checks at trace time, not in its type rule."""
  a = eqn.invars[0].aval
  shape = tuple(impl.key_shape)
  if tuple(a.shape[len(a.shape) - len(shape):]) != shape or len(a.shape) < len(shape):
    yield None, f"random_wrap of {a.str_short()}: key data of {impl.name} must end with dims {shape}"
  elif a.dtype not in (np.uint32, compat.float0):
    yield None, f"random_wrap of {a.str_short()}: key data must be uint32"


RULES = {
    "while": _while,
    "random_wrap": _random_wrap,
    "jit": _jit,
    "remat2": _call_jaxpr("jaxpr"),  # jax.checkpoint
    "closed_call": _call_jaxpr("call_jaxpr"),
    "custom_jvp_call": _custom_jvp_call,
    "reshape": _reshape,
    "composite": _composite,
    "device_put": _device_put,
    "cond": _cond,
    "approx_top_k": _approx_top_k,
    "reduce": _reducer("jaxpr", lambda eqn, p: len(eqn.invars) // 2),
    "reduce_window": _reduce_window,
    "select_and_scatter": _windowed,
    "select_and_scatter_add": _windowed,
    "select_and_gather_add": _windowed,
    "reduce_window_sum": _windowed,
    "reduce_window_max": _windowed,
    "reduce_window_min": _windowed,
    **{name: _scatter for name in ("scatter", "scatter-add", "scatter-sub", "scatter-mul",
                                   "scatter-min", "scatter-max")},
}
