"""custom_jvp and custom_vjp rules, captured as jaxprs at encode time.

A `custom_jvp_call` eqn holds its jvp rule as a Python thunk, and a
`custom_vjp_call` eqn holds Python `fwd`/`bwd` functions. The encoder calls
them once (all tangents nonzero) and stores the resulting jaxprs in the
Module's `rules` table. Rules recurse (logaddexp's jvp calls logaddexp), so
rules are interned by the rule function and primal program, and the decoder
builds each rule's jaxpr lazily, on first use by JAX's autodiff.
"""
from __future__ import annotations

import functools
import types

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.codec import tracebacks
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _is_per_trace(f, depth: int = 0) -> bool:
  """Whether `f` is a closure of JAX's made by a trace (its thunks, their
  memo, an output store's getter): it holds what only a trace makes, or
  another such closure. The rule key leaves those out and follows what
  they hold. JAX's closures made where a rule is defined (defjvps' jvp,
  custom_gradient's fwd and bwd) and the user's functions name the rule
  by identity, with all they hold (custom_gradient's options)."""
  if not (f.__module__.startswith("jax._src") and "<locals>" in f.__qualname__) or depth > 4:
    return False
  for cell in f.__closure__ or ():
    try:
      x = cell.cell_contents
    except ValueError:
      continue
    if isinstance(x, compat.PER_TRACE_TYPES) or (
        isinstance(x, types.FunctionType) and _is_per_trace(x, depth + 1)):
      return True
  return False


# What a rule thunk is made of that names the rule, by identity: functions,
# the custom_jvp/custom_vjp objects (defjvps keeps its rules in a tuple
# beside one), a decoded rule's thunk (a method of the rule).
_CALLABLES = (compat.WrappedFun, types.FunctionType, types.MethodType, functools.partial,
              jax.custom_jvp, jax.custom_vjp)


class _Same:
  """A static argument in a rule's key by identity: one with no exact key
  (an array, an object of the user's), kept alive by the key."""
  __slots__ = ("x",)

  def __init__(self, x):
    self.x = x

  def __hash__(self):
    return compat.memo.identity(self.x)

  def __eq__(self, other):
    return type(other) is _Same and other.x is self.x


# How deep `_rule_functions` follows wrappers, closures and static args:
# far past JAX's own chains (a custom_vjp's fwd thunk is about 8 deep).
_MAX_RULE_WALK = 64


def _rule_functions(fun, statics=True) -> list:
  """What identifies a rule thunk across traces: the functions and
  custom_jvp/custom_vjp objects behind it, by identity, and with `statics`
  the static arguments JAX binds into the functions it wraps
  (`nondiff_argnums`), by value or else by identity: rules that differ
  only in those are other rules. What JAX's per-trace closures hold besides
  (the trace, its output stores) is left out, so that the same rule met at
  every call (relu in each layer) is one. Each object is visited once (a
  closure may hold itself); past _MAX_RULE_WALK the key names the object by
  identity, as a rule of its own."""
  out, seen = [], set()

  def visit(f, depth):
    if depth > _MAX_RULE_WALK:
      out.append(_Same(f))
      return
    if compat.memo.identity(f) in seen:
      return
    seen.add(compat.memo.identity(f))
    if isinstance(f, compat.WrappedFun):
      visit(f.f, depth + 1)
      if statics:
        for _, args in f.transforms:  # (JAX's transformations of it, with their static args)
          static(args, depth + 1)
        static(tuple(v for _, v in getattr(f, "params", ())), depth + 1)
    elif isinstance(f, types.MethodType):  # a decoded rule's thunk: the rule itself
      out.append(f.__self__)
    elif isinstance(f, functools.partial):
      out.append(type(f))
      visit(f.func, depth + 1)
      if statics:
        static((f.args, tuple(sorted(f.keywords.items()))), depth + 1)
    elif isinstance(f, (jax.custom_jvp, jax.custom_vjp)):
      out.append(f)
    elif isinstance(f, types.FunctionType):
      if not _is_per_trace(f):
        out.append(f)  # (its closure is its own: the function names it)
        return
      for cell in f.__closure__ or ():
        try:
          c = cell.cell_contents
        except ValueError:
          continue
        for x in (c if isinstance(c, (tuple, list)) else (c,)):  # (defjvps' rules: a tuple)
          if isinstance(x, _CALLABLES):
            visit(x, depth + 1)

  def static(args, depth):
    """The static args among a wrapped function's transformation args:
    functions as above; values by exact key (memo.value_key), arrays and
    the user's objects by identity; tree structures by structure and text
    (`==` takes aux data 4 for 4.0); JAX's own machinery (stores) left out.
    The call's types do not fix its tree: f((a, b)) and f([a, b]) are one
    call jaxpr, and a rule may tell them apart."""
    if depth > _MAX_RULE_WALK:
      out.append(_Same(args))
      return
    for x in args:
      if isinstance(x, compat.STATIC_ARG_WRAPPERS):
        x = x.val
      if isinstance(x, _CALLABLES):
        visit(x, depth + 1)
      elif type(x) in (tuple, list):
        out.append(type(x))
        static(x, depth + 1)
      elif isinstance(x, (np.ndarray, jax.Array)):
        out.append(_Same(x))
      elif isinstance(x, compat.PyTreeDef):
        out.append((compat.PyTreeDef, x, str(x)))
      else:
        try:
          out.append(compat.memo.value_key(x))
        except compat.memo.NoKey:
          if not type(x).__module__.startswith(("jax", "jaxlib")):
            out.append(_Same(x))

  visit(fun, 0)
  return out


def _rule_key(enc, kind, thunk, call_jaxpr, extra):
  """One saved rule per rule function and call: the call by its structure
  (compat.memo.fingerprint), or its printout where that has no exact key;
  found once for calls of equal content (call_content)."""
  st = enc.state
  content = st.call_contents.get(compat.memo.identity(call_jaxpr))
  call = st.call_keys.get(content) if content is not None else None
  if call is None:
    try:
      call = ("fingerprint", compat.memo.fingerprint(call_jaxpr))
      hash(call)
    except Exception:  # (NoKey: a function or big constant in it)
      call = ("printed", str(call_jaxpr), tuple(map(str, call_jaxpr.in_avals)))
    if content is not None:
      st.call_keys[content] = call
  return (kind, tuple(_rule_functions(thunk)), call, extra)


def call_content(enc, call_jaxpr):
  """An exact key of all that is written of a custom_jvp/custom_vjp call
  (compat.memo.content_key), or None. A function wrapped in custom_jvp is
  traced anew at each call (jax.nn.relu in every layer): equal copies are
  written once."""
  written = {}
  if enc.state.debug_info:  # (as written: source info by its entries in the Module)
    written = dict(
        source_info=lambda si: (tracebacks.encode_traceback(enc, si.traceback),
                                tracebacks.encode_name_stack(enc, si.name_stack)),
        debug_info=lambda d: enc.debug_info_msg(d).SerializeToString(deterministic=True))
  try:
    key = ("content", compat.memo.content_key(call_jaxpr, **written))
    hash(key)
  except Exception:  # (NoKey: a big constant, a function in it)
    key = None
  # (kept alive by its entry in the Module's closed jaxprs)
  enc.state.call_contents[compat.memo.identity(call_jaxpr)] = key
  return key


def _closed(jaxpr, consts):
  return compat.ClosedJaxpr(jaxpr, list(consts))


# --- encoding ----------------------------------------------------------------

def encode_jvp_rule(enc, eqn, path) -> int:
  params = eqn.params
  thunk = params["jvp_jaxpr_fun"]
  call_jaxpr = params["call_jaxpr"]
  key = _rule_key(enc, "jvp", thunk, call_jaxpr, (params["num_consts"], params["symbolic_zeros"]))
  functions = ("jvp", key[1])
  cut = _cut(enc, key, functions, "custom_jvp", thunk.debug_info.func_name)
  idx, entry = enc.state.reserve("rules", key if cut is None else ("cut", key))
  if entry is None:
    return idx
  msg = entry.jvp
  n_primals = len(call_jaxpr.in_avals) - params["num_consts"]
  msg.name = thunk.debug_info.func_name
  msg.debug_info.CopyFrom(enc.debug_info_msg(thunk.debug_info))
  if cut is not None:
    msg.trace_error = cut
    return idx
  try:
    jaxpr, consts, out_zeros = _traced_jvp(key, thunk, n_primals)
  except Exception as e:  # a rule JAX itself could not trace: saved as such
    msg.trace_error = _trace_error("custom_jvp rule", msg.name, e)
    return idx
  msg.out_zeros.extend(bool(z) for z in out_zeros)
  with enc.state.inside_rule(functions):
    msg.jvp = enc.closed_jaxpr(_closed(jaxpr, consts), f"{path}.jvp")
  return idx


# The traced jvp rules, (jaxpr, consts, out_zeros) per process by the rule's
# key (where it is exact: its call's fingerprint, its static args by value)
# and JAX's configuration: a program traced again (a later step, a later
# program) holds new thunks of the same rules, and tracing relu's jvp again
# was a third of its `dumps`.
_TRACED_JVP = compat.memo.memo()
_TRACED_MAX_CONST_BYTES = 1 << 20  # (a rule that closes over more is traced again)


def _traced_jvp(key, thunk, n_primals):
  """The rule's jaxpr, consts and out_zeros, all tangents nonzero."""
  # (not a rule named by an object's identity: an array, a tracer, an object
  # made per call would only fill the memo and keep them alive; nor a
  # decoded rule, which holds its whole Module and gives its saved jaxpr
  # without tracing)
  memo_key = (key, compat.memo.context_key()) if _exact(key, thunk) else None
  hit = _TRACED_JVP.get(memo_key) if memo_key is not None else None
  if hit is not None:
    return hit
  out = thunk.call_wrapped(*([False] * n_primals))
  _check_no_tracers(out[1])
  if memo_key is not None and _const_bytes(out[1]) <= _TRACED_MAX_CONST_BYTES:
    _TRACED_JVP.put(memo_key, out)
  return out


def _exact(key, thunk) -> bool:
  """Whether a rule's key names it exactly, to keep its trace: its call by
  fingerprint, no function or static arg named by identity, not a decoded rule."""
  return (key[2][0] == "fingerprint" and not any(type(x) is _Same for x in key[1])
          and rule_of(thunk) is None)


def _const_bytes(*consts) -> int:
  return sum(getattr(c, "nbytes", 0) for cs in consts for c in cs)


# Rules inside rules. JAX traces a rule when a transformation first needs it;
# the encoder traces each rule it meets, and the rules in the jaxprs of those,
# and so on, which may never end: the jvp of a custom_jvp function may call a
# custom_jvp function whose own rule is new at every order (JAX 0.12's i1),
# and odeint's bwd solves an augmented ODE with odeint, whose bwd solves a
# bigger one, each rule's jaxprs twice the size of the one before. A rule
# nested more than MAX_RULE_DEPTH deep in rules, or a custom_vjp rule inside
# MAX_VJP_TOWER rules of its own fwd and bwd functions, is saved as not
# saved (trace_error, named at its use), under a key of its own, so that the
# same call met elsewhere, less deep, is still saved in full. What a program
# holds itself is always saved; of odeint, two orders of derivatives more.
MAX_RULE_DEPTH = 16
MAX_VJP_TOWER = 2


def _cut(enc, key, functions, what, name):
  """Why the rule `key` (identified across calls by `functions`) is not
  traced here, or None: it is written already, or may be."""
  st = enc.state
  if key in st.interned["rules"]:
    return None
  if len(st.open_rules) >= MAX_RULE_DEPTH:
    return (f"the {what} rule {name!r} was not saved: custom rules nest more than "
            f"{MAX_RULE_DEPTH} deep here (a rule whose derivative is again a new rule), so "
            f"derivatives of order above {MAX_RULE_DEPTH} are not kept")
  if functions[0] == "vjp" and any(functions[1:]) and st.open_rules.count(functions) >= MAX_VJP_TOWER:
    return (f"the {what} rule {name!r} was not saved: it is inside {MAX_VJP_TOWER} rules of "
            "its own fwd and bwd functions (a bwd that calls its custom_vjp function again, "
            "on a new program, as odeint's does), so derivatives of order above "
            f"{MAX_VJP_TOWER} of that call are not kept")
  return None


def _is_zero(x):
  return type(x).__name__ in ("Zero", "SymbolicZero") and hasattr(x, "aval")


def _zeros(aval):
  return np.zeros(aval.shape, aval.dtype)


def encode_vjp_rule(enc, eqn, path) -> int:
  params = eqn.params
  thunk, bwd, out_trees = params["fwd_jaxpr_thunk"], params["bwd"], params["out_trees"]
  call_jaxpr, num_consts = params["call_jaxpr"], params["num_consts"]
  bwd_key = tuple(_rule_functions(bwd))
  key = _rule_key(enc, "vjp", thunk, call_jaxpr, (num_consts, params["symbolic_zeros"], bwd_key))
  # (the functions alone: a bwd that calls its custom_vjp function again, as
  # odeint's, binds new static args at every order)
  functions = ("vjp", tuple(_rule_functions(thunk, statics=False)),
               tuple(_rule_functions(bwd, statics=False)))
  cut = _cut(enc, key, functions, "custom_vjp", bwd.debug_info.func_name)
  idx, entry = enc.state.reserve("rules", key if cut is None else ("cut", key))
  if entry is None:
    return idx
  msg = entry.vjp
  msg.fwd_name = thunk.debug_info.func_name
  msg.bwd_name = bwd.debug_info.func_name
  msg.fwd_debug_info.CopyFrom(enc.debug_info_msg(thunk.debug_info))
  msg.bwd_debug_info.CopyFrom(enc.debug_info_msg(bwd.debug_info))
  if cut is not None:
    msg.trace_error = cut
    return idx
  # (kept per process as a jvp rule is: see _traced_jvp)
  exact = (_exact(key, thunk) and rule_of(bwd) is None
           and not any(type(x) is _Same for x in key[3][2]))
  memo_key = (key, compat.memo.context_key()) if exact else None
  traced = _TRACED_VJP.get(memo_key) if memo_key is not None else None
  if traced is None:
    traced = _trace_vjp(msg, thunk, bwd, out_trees, call_jaxpr, num_consts)
    if traced is None:
      return idx  # (msg.trace_error says why)
    if memo_key is not None and _const_bytes(traced[1], traced[7]) <= _TRACED_MAX_CONST_BYTES:
      _TRACED_VJP.put(memo_key, traced)
  fwd_jaxpr, fwd_consts, closed_over, out_tree, res_tree, input_fwds, bwd_jaxpr, bwd_consts = traced
  msg.out_tree.CopyFrom(enc.value(out_tree, f"{path}.out_tree").treedef)
  msg.res_tree.CopyFrom(enc.value(res_tree, f"{path}.res_tree").treedef)
  msg.input_fwds.extend(-1 if f is None else f for f in input_fwds)
  msg.closed_over_inputs = closed_over
  with enc.state.inside_rule(functions):
    msg.fwd = enc.closed_jaxpr(_closed(fwd_jaxpr, fwd_consts), f"{path}.fwd")
    msg.bwd = enc.closed_jaxpr(_closed(bwd_jaxpr, bwd_consts), f"{path}.bwd")
  return idx


# The traced custom_vjp rules, as _TRACED_JVP: (fwd jaxpr, its consts, closed
# over inputs, out_tree, res_tree, input_fwds, bwd jaxpr, its consts).
_TRACED_VJP = compat.memo.memo()


def _trace_vjp(msg, thunk, bwd, out_trees, call_jaxpr, num_consts):
  """The rule's fwd and bwd traced (see _TRACED_VJP), or None with
  msg.trace_error set: a rule JAX itself could not trace is saved as such."""
  in_avals = call_jaxpr.in_avals
  try:
    fwd_jaxpr, fwd_consts, closed_over = _trace_fwd(thunk, len(in_avals) - num_consts)
    out_tree, res_tree, input_fwds = out_trees()
    _check_no_tracers(fwd_consts)
  except Exception as e:
    msg.trace_error = _trace_error("custom_vjp fwd rule", msg.fwd_name, e)
    return None
  fwd_out = [v.aval for v in fwd_jaxpr.outvars]
  res_out = iter(fwd_out[:len(fwd_out) - len(call_jaxpr.out_avals)])
  res_avals = [next(res_out) if f is None else in_avals[f] for f in input_fwds]
  ct_avals = [a.to_tangent_aval() for a in call_jaxpr.out_avals]
  try:
    bwd_jaxpr, bwd_consts = _trace_bwd(bwd, [*res_avals, *ct_avals],
                                       [a.to_tangent_aval() for a in in_avals[num_consts:]])
    _check_no_tracers(bwd_consts)
  except Exception as e:
    msg.trace_error = _trace_error("custom_vjp bwd rule", msg.bwd_name, e)
    return None
  return (fwd_jaxpr, fwd_consts, closed_over, out_tree, res_tree, list(input_fwds),
          bwd_jaxpr, bwd_consts)


def _trace_fwd(thunk, n):
  """(fwd jaxpr, consts, k): the fwd thunk traced with every tangent nonzero
  but the first k's. A call traced again (JAX rebinds it: get_bind_params,
  lift_fwd) takes the values its function closed over as its first inputs,
  and JAX refuses their tangents (CustomVJPException); k is the fewest
  leading inputs whose tangents must be zero, as in any derivative JAX takes.
  Each k refused costs little: lift_fwd refuses before tracing anything."""
  for k in range(n + 1):
    try:
      return (*thunk.call_wrapped(*([False] * k + [True] * (n - k))), k)
    except compat.CustomVJPException:
      if k == n:
        raise


def _trace_error(what, name, e) -> str:
  if isinstance(e, DecodeError) and e.message.startswith(_CANNOT):
    return e.message[len(_CANNOT):]  # a decoded rule's own error: kept as it was
  first = str(e).strip().splitlines()[0] if str(e).strip() else ""
  return f"the {what} {name!r} could not be traced when the program was saved: {type(e).__name__}: {first}"


def _check_no_tracers(consts):
  if any(isinstance(c, compat.Tracer) for c in consts):
    raise TypeError("the rule closes over a value traced by an enclosing transformation")


_CANNOT = "cannot differentiate: "


def _raise_trace_error(msg, path):
  raise DecodeError(f"{_CANNOT}{msg.trace_error}", path)


def _trace_bwd(bwd, in_avals, out_avals):
  """Traces a Python bwd function to a jaxpr; zero outputs made explicit."""
  def bwd_flat(*args):
    outs = compat.bwd_cotangents(bwd.call_wrapped(*args))
    return [(_zeros(getattr(x, "aval", a)) if (x is None or _is_zero(x)) else x)
            for x, a in zip(outs, out_avals)]
  with compat.no_current_trace():
    jaxpr, _, consts = compat.trace_to_jaxpr_dynamic(
        compat.wrap_init(bwd_flat, debug_info=bwd.debug_info), list(in_avals))
  return jaxpr, consts


def encode_lin_rule(enc, eqn, path) -> int:
  params = eqn.params
  bwd, num_res = params["bwd"], params["num_res"]
  key = ("lin", tuple(_rule_functions(bwd)), tuple(str(v.aval) for v in eqn.invars),
         tuple(params["in_zeros"]), params["symbolic_zeros"])
  idx, entry = enc.state.reserve("rules", key)
  if entry is None:
    return idx
  msg = entry.lin
  res_avals = [v.aval for v in eqn.invars[:num_res]]
  nz_avals = iter(v.aval for v in eqn.invars[num_res:])
  # Zero inputs' tangent avals are unknown here; bwd_flat takes them from Zero.aval.
  out_avals = [None if z else next(nz_avals) for z in params["in_zeros"]]
  msg.name = bwd.debug_info.func_name
  msg.debug_info.CopyFrom(enc.debug_info_msg(bwd.debug_info))
  try:
    jaxpr, consts = _trace_bwd(bwd, [*res_avals, *params["out_avals"]], out_avals)
  except Exception as e:
    raise EncodeError(f"tracing the custom_lin bwd {msg.name!r} failed: {type(e).__name__}: {e}", path) from e
  msg.bwd = enc.closed_jaxpr(_closed(jaxpr, consts), f"{path}.bwd")
  return idx


def computation_from_jaxpr(jaxpr, name=None):
  """A Python reducer for `reduce`, evaluating its jaxpr."""
  n = len(jaxpr.in_avals) // 2
  def computation(x, y):
    xs = list(x) if isinstance(x, (tuple, list)) else [x]
    ys = list(y) if isinstance(y, (tuple, list)) else [y]
    out = compat.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs, *ys)
    return tuple(out) if n > 1 or isinstance(x, (tuple, list)) else out[0]
  if isinstance(name, str) and name:
    computation.__qualname__ = name
    computation.__name__ = name.rsplit(".", 1)[-1]
  return computation


# --- decoding ----------------------------------------------------------------

def _eval_with_zeros(cj, args):
  """Evaluates a bwd jaxpr; symbolic-zero cotangents become explicit zeros."""
  args = [_zeros(a) if _is_zero(x) else x for x, a in zip(args, cj.in_avals)]
  return compat.eval_jaxpr(cj.jaxpr, cj.consts, *args)


def rule_of(thunk):
  """The decoded rule (JvpRule, VjpRule, ...) behind a rule param's thunk
  (a WrappedFun of one of its methods), or None."""
  return getattr(getattr(thunk, "f", None), "__self__", None)


def _decoded_rule_key(fun, param):
  """The structural key of a decoded custom_jvp rule's thunk, for the
  checker's memo of verdicts on rules (compat.memo.fingerprint)."""
  rule = rule_of(fun)
  sig = rule.signature() if isinstance(rule, JvpRule) else None
  if sig is None:
    raise compat.memo.NoKey
  jvp, out_zeros = sig
  return ("jvp_rule", param(jvp), tuple(out_zeros))


compat.memo.register_keyer(compat.WrappedFun, _decoded_rule_key)


def _saved(rule, field: str):
  """A decoded rule's saved jaxpr `field`, decoded at its first use, outside
  any trace: JAX asks for it while tracing (a vjp of the program), and
  decoding there would make the arrays of its literals part of that trace."""
  with compat.eval_context():
    return rule._dec.closed_jaxpr(getattr(rule._msg, field), f"{rule._path}.{field}")


class JvpRule:
  """A decoded custom_jvp rule; `thunk` is the eqn's `jvp_jaxpr_fun`."""

  def __init__(self, dec, msg: pb.CustomJvpRule, path):
    self._dec, self._msg, self._path = dec, msg, path
    self._cache = {}
    self.checked = {}  # the checker's findings on this rule, once per rule however many eqns use it
    self.thunk = compat.wrap_init(self._jvp_jaxpr, debug_info=dec.debug_info(msg.debug_info, msg.name))

  def _jvp_jaxpr(self, *in_zeros):
    key = tuple(bool(z) for z in in_zeros)
    out = self._cache.get(key)
    if out is None:
      out = self._cache[key] = self._build(key)
    return out

  def signature(self):
    """(the rule's jvp ClosedJaxpr, out_zeros) as saved, or None for a rule
    saved as not traceable."""
    if self._msg.trace_error:
      return None
    return _saved(self, "jvp"), list(self._msg.out_zeros)

  def _build(self, in_zeros):
    if self._msg.trace_error:
      _raise_trace_error(self._msg, self._path)
    cj = _saved(self, "jvp")
    out_zeros = list(self._msg.out_zeros)
    if not any(in_zeros):
      return cj.jaxpr, cj.consts, out_zeros
    # Symbolic-zero tangents: feed explicit zeros to the all-nonzero rule.
    n = len(in_zeros)
    primal_avals = cj.in_avals[:n]
    nz_avals = [a for a, z in zip(cj.in_avals[n:], in_zeros) if not z]
    zero_avals = cj.in_avals[n:]

    def f(*args):
      primals, nz = args[:n], iter(args[n:])
      tangents = [_zeros(a) if z else next(nz) for a, z in zip(zero_avals, in_zeros)]
      return compat.eval_jaxpr(cj.jaxpr, cj.consts, *primals, *tangents)

    with compat.no_current_trace():
      jaxpr, _, consts = compat.trace_to_jaxpr_dynamic(
          compat.wrap_init(f, debug_info=self.thunk.debug_info), [*primal_avals, *nz_avals])
    return jaxpr, consts, out_zeros


class VjpRule:
  """A decoded custom_vjp rule: the eqn's fwd_jaxpr_thunk, bwd and out_trees."""

  def __init__(self, dec, msg: pb.CustomVjpRule, path):
    self._dec, self._msg, self._path = dec, msg, path
    self._fwd = None
    self._bwd = None
    self.fwd_thunk = compat.wrap_init(
        self._fwd_jaxpr, debug_info=dec.debug_info(msg.fwd_debug_info, msg.fwd_name))
    self.bwd = compat.wrap_init(
        self._bwd_call, debug_info=dec.debug_info(msg.bwd_debug_info, msg.bwd_name))
    if msg.trace_error:
      self.out_trees = lambda: _raise_trace_error(msg, path)
      return
    out_tree = dec.treedef(msg.out_tree, path + ".out_tree")
    res_tree = dec.treedef(msg.res_tree, path + ".res_tree")
    input_fwds = [None if f < 0 else f for f in msg.input_fwds]
    if len(input_fwds) != res_tree.num_leaves:
      raise DecodeError("input_fwds does not match the residual tree", path)
    self.out_trees = lambda: (out_tree, res_tree, list(input_fwds))

  def signature(self):
    """(fwd ClosedJaxpr, bwd ClosedJaxpr, out_tree, res_tree, input_fwds) as
    saved, or None for a rule saved as not traceable."""
    if self._msg.trace_error:
      return None
    out_tree, res_tree, input_fwds = self.out_trees()
    return _saved(self, "fwd"), _saved(self, "bwd"), out_tree, res_tree, input_fwds

  def _fwd_jaxpr(self, *nonzeros):
    if self._msg.trace_error:
      _raise_trace_error(self._msg, self._path)
    if any(nonzeros[:self._msg.closed_over_inputs]):  # (as JAX's lift_fwd refuses them)
      raise compat.CustomVJPException()
    if self._fwd is None:
      self._fwd = _saved(self, "fwd")
    return self._fwd.jaxpr, self._fwd.consts

  def _bwd_call(self, *args):
    if self._bwd is None:
      self._bwd = _saved(self, "bwd")
    return compat.bwd_return(_eval_with_zeros(self._bwd, args))


class LinRule:
  """A decoded custom_lin bwd."""

  def __init__(self, dec, msg: pb.CustomLinRule, path):
    self._dec, self._msg, self._path = dec, msg, path
    self._cj = None
    self.bwd = compat.wrap_init(self._call, debug_info=dec.debug_info(msg.debug_info, msg.name))

  def _call(self, *args):
    if self._cj is None:
      self._cj = _saved(self, "bwd")
    return _eval_with_zeros(self._cj, args)


# The decoded form of each kind of Module.rules entry (see wire.walk.RULE_JAXPRS).
RULES = {"jvp": JvpRule, "vjp": VjpRule, "lin": LinRule}
