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
  found = _custom_call_inputs(eqn, call_jaxpr)
  if found:
    yield from found
    return
  sig = _rule_signature(jvp_jaxpr_fun, custom_rules.JvpRule)
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


def _custom_call_inputs(eqn, call_jaxpr):
  """JAX's type rules of custom_jvp_call and custom_vjp_call type the outputs
  by the call_jaxpr but leave its inputs unchecked."""
  return _jaxpr_fits("call_jaxpr", call_jaxpr, _avals(eqn.invars), None)


def _rule_signature(thunk, kind):
  rule = getattr(getattr(thunk, "f", None), "__self__", None)  # a WrappedFun of the decoded rule
  return rule.signature() if isinstance(rule, kind) else None


def _custom_vjp_call(eqn, *, call_jaxpr, fwd_jaxpr_thunk, num_consts, **_):
  """The saved fwd and bwd rules against the call: fwd takes the primals
  after the num_consts consts and gives the residuals it does not forward
  from its inputs (input_fwds), then the outputs; bwd takes the residuals
  and the outputs' cotangents and gives the primals' cotangents."""
  found = _custom_call_inputs(eqn, call_jaxpr)
  if found:
    yield from found
    return
  sig = _rule_signature(fwd_jaxpr_thunk, custom_rules.VjpRule)
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
def _shard_map(eqn, *, mesh, jaxpr, **_):
  sizes = dict(getattr(mesh, "shape", {}))
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
      check = _COLLECTIVES.get(name)
      if check is not None:
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
  """Platform-dependent branches name one platform list per branch."""
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
    "custom_vjp_call": _custom_vjp_call,
    "custom_linear_solve": _custom_linear_solve,
    "dynamic_slice": _dynamic_slice,
    "shard_map": _shard_map,
    **{name: _key_operand for name in _KEY_OPERAND},
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
