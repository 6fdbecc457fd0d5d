"""Type checking (jaxpr_proto.check.checker): JAX's own type check of a
jaxpr, eqn by eqn, made cheap while loading (a jaxpr of plain eqns checked
without JAX's per-eqn cost, shared sub-jaxprs checked once, type rules
memoized process-wide), and what the checker needs to check a sub-jaxpr
on its own."""
from __future__ import annotations

import contextlib
import functools
import threading

import jax
import numpy as np
from jax._src import core
from jax._src import mesh as mesh_lib
from jax._src import partition_spec
from jax._src import sharding_impls
from jax._src.random import prng

from jaxpr_proto.compat import memo
from jaxpr_proto.compat.jax_names import TypedNdArray

JaxprTypeError = core.JaxprTypeError
typecompat = core.typecompat
jaxprs_in_params = core.jaxprs_in_params


def check_jaxpr_eqns(jaxpr) -> None:
  """JAX's own type check of one jaxpr, without pretty-printing the whole
  jaxpr: raises JaxprTypeError(message, eqn_index) at the first bad eqn.
  Sub-jaxprs are checked as far as JAX's rules check them."""
  check = getattr(core, "_check_jaxpr", None)
  if check is None:  # pragma: no cover - a JAX without the internal entry point
    return core.check_jaxpr(jaxpr)
  if not _plain_jaxpr_passes(jaxpr):
    check(_pp_context(), jaxpr)


def _pp_context():
  """What JAX's type rules print their errors with: a new one per check, as
  core.check_jaxpr makes, so that variables are named from 'a' up."""
  return functools.cache(lambda: (core.JaxprPpContext(), core.JaxprPpSettings()))


def _plain_jaxpr_passes(jaxpr) -> bool:
  """Whether JAX's check of `jaxpr` (core._check_jaxpr) passes, found
  without its per-eqn cost where every eqn is plain: variables of array
  type, no effects, no call or ref primitives. Each eqn is checked as JAX
  checks it (operands bound before, literals of their type, each binder
  bound once and of the type that the eqn's type rule gives; the rule of a
  jit, cond or scan checks the jaxprs in its params, as in JAX's loop), but
  the rule runs (memoized, in the eqn's context) once per distinct params,
  context and operand types of the jaxpr, where JAX's loop calls it at
  every eqn. False for any other jaxpr, and for any failure: JAX's own
  check then runs, and names it. Only while loading
  (`shared_sub_jaxprs_checked_once`). It mirrors core._check_jaxpr: a new
  JAX minor's check is read again (docs/new_jax_minor.md)."""
  if getattr(_checked, "passed", None) is None or core.config.debug_key_reuse.value:
    return False  # (with the flag, JAX's check_jaxpr checks key reuse too)
  try:
    return _plain_check(jaxpr)
  except Exception:  # (a type rule that raised: JAX's check raises it with its eqn)
    return False


_SCALARS = frozenset({bool, int, float, complex})

# JAX's own type rules that read only their operands' types, not a literal
# operand's value: jit's (core._check_call, JAX 0.10-0.12), where a literal
# is often an argument (a layer's index, a jnp function's 0.0).
_RULES_OF_TYPES = frozenset({"jit", "pjit"})


def _plain_check(jaxpr) -> bool:
  ident, array, var, literal = memo.identity, core.ShapedArray, core.Var, core.Literal
  rules, typecheck, typematch = core.custom_typechecks, core.typecheck, core.typematch
  if jaxpr.effects:  # (an eqn has effects: found before the work, not after it)
    return False
  bound = set()
  for v in (*jaxpr.constvars, *jaxpr.invars):
    if type(v) is not var or type(v.aval) is not array or v in bound or \
        getattr(v, "initial_qdd", None) is not None or not typematch(v.aval, v.aval):
      return False  # (JAX's check matches a binder's type with itself too: it may raise)
    bound.add(v)

  literals = {}  # (literal's type, the value's) -> whether the value is of the literal's type

  def literal_ok(x):
    val = x.val
    t = type(val)
    if t is TypedNdArray and type(val.aval) is array:
      key = (ident(x.aval), val.aval)  # (its type, core.typeof's)
    elif t in _SCALARS or isinstance(val, np.generic):
      key = (ident(x.aval), t, val if t is int else None)  # (an int's value may not fit)
    else:
      return typecheck(x.aval, val)
    ok = literals.get(key)
    if ok is None:
      ok = literals[key] = typecheck(x.aval, val)
    return ok

  def operand_keys(atoms, by_value):
    keys = []
    for x in atoms:
      if type(x) is var:
        if x not in bound:
          return None
        keys.append(ident(x.aval))
      elif type(x) is literal and type(x.aval) is array and literal_ok(x):
        keys.append(ident(x) if by_value else ident(x.aval))  # (a custom rule may read the value)
      else:
        return None
    return tuple(keys)

  pp_context = _pp_context()
  types = {}  # (primitive, params, context, operand keys) -> the rule's output types
  matched = set()  # (binder's type, computed type) pairs that typematch
  for eqn in jaxpr.eqns:
    prim, params = eqn.primitive, eqn.params
    if eqn.effects or prim.call_primitive or getattr(prim, "ref_primitive", True):
      return False
    rule = rules.get(prim)
    keys = operand_keys(eqn.invars, rule is not None and prim.name not in _RULES_OF_TYPES)
    if keys is None:
      return False
    key = (prim, ident(params), ident(eqn.ctx), keys)
    out = types.get(key)
    if out is None:
      with eqn.ctx.manager:  # (a rule checks the jaxprs in params, as core.check_jaxpr: once each)
        if rule is not None:
          out, effs = rule(pp_context, *eqn.invars, **params)
        else:
          out, effs = core.check_eqn(prim, [x.aval for x in eqn.invars], params)
      out = types[key] = tuple(out)
      if effs or any(type(a) is not array for a in out):
        return False
    if len(out) != len(eqn.outvars):
      return False
    for v, a in zip(eqn.outvars, out):
      if type(v.aval) is not array:
        return False
      pair = (ident(v.aval), ident(a))
      if pair not in matched:
        if not typematch(v.aval, a):
          return False
        matched.add(pair)
      if type(v) is var:
        if v in bound:
          return False
        bound.add(v)
      elif type(v) is not core.DropVar:
        return False
  return operand_keys(jaxpr.outvars, False) is not None


_checked = threading.local()  # .passed: the jaxprs checked in this thread's current load, and how


@contextlib.contextmanager
def shared_sub_jaxprs_checked_once():
  """Within it, JAX's check of a call's sub-jaxpr (`core.check_jaxpr`, which
  `core._check_call` runs for jit, closed_call and the like) runs once per
  jaxpr and axis environment in this thread: a jaxpr calling a shared
  sub-jaxpr twice, nested N deep, is checked in N steps, not 2**N."""
  if not getattr(core.check_jaxpr, "_jaxpr_proto_once", False):
    core.check_jaxpr = _check_once(core.check_jaxpr)  # once per process; a no-op outside
  if not getattr(core.check_eqn, "_jaxpr_proto_memo", False):
    core.check_eqn = _check_eqn_memo(core.check_eqn)
  for prim, rule in list(core.custom_typechecks.items()):  # (a module imported since may add one)
    if not getattr(rule, "_jaxpr_proto_memo", False):
      core.custom_typechecks[prim] = _custom_typecheck_memo(prim, rule)
  outer = getattr(_checked, "passed", None)
  if outer is None:
    _checked.passed, _checked.params_keys = {}, {}
  try:
    yield
  finally:
    if outer is None:
      _checked.passed = _checked.params_keys = None


def _check_once(original):
  def check_jaxpr(jaxpr):
    passed = getattr(_checked, "passed", None)
    if passed is None:
      return original(jaxpr)
    vma = getattr(core.config, "_check_vma", None)
    env = core.get_axis_env()
    key = (id(jaxpr), id(env), vma.value if vma is not None else None)
    seen = passed.get(key)
    if seen is None:
      try:
        if not _plain_jaxpr_passes(jaxpr):
          original(jaxpr)
      except Exception as e:
        # (kept too, and raised again where met again: a bad jaxpr under N
        # nested calls, each checked by the plain check and then by JAX's,
        # costs N checks, not 2**N)
        passed[key] = jaxpr, env, e
        raise
      seen = passed[key] = jaxpr, env, None  # kept alive, so that their ids stay their own
    if seen[2] is not None:
      raise seen[2]
  check_jaxpr._jaxpr_proto_once = True
  return check_jaxpr


# JAX's param value types whose equality is exact: singletons, objects
# compared by identity, and shardings and meshes, which the decoder builds
# only from strs and ints. (Not PyTreeDef or dataclass records: they compare
# what they hold with ==, where 4 == 4.0 == True.)
for _t in (sharding_impls.NamedSharding, type(sharding_impls.UNSPECIFIED),
           partition_spec.PartitionSpec, mesh_lib.AbstractMesh, mesh_lib.Mesh, prng.PRNGImpl,
           core.Primitive, jax.Device):
  memo.register_value_type(_t)

_EQN_TYPES = memo.memo()  # (primitive, in_avals, params, JAX config) -> (out_avals, effects)


def _check_eqn_memo(original):
  """JAX's type rule of an eqn, memoized process-wide while loading: the
  same primitive on the same input types with the same params (none of them
  a jaxpr, which JAX would check too) has the same output types and effects
  under the same configuration (`memo.context_key`), in this file or the
  next. `jp.clear_caches()` empties it."""
  def check_eqn(prim, in_avals, params):
    if getattr(_checked, "passed", None) is None:
      return original(prim, in_avals, params)

    def key():
      # (eqns that the decoder gave one group's params share the dict: its key is made once)
      keys = _checked.params_keys
      entry = keys.get(memo.identity(params))
      if entry is None:  # (kept: its identity stays its own)
        entry = keys[memo.identity(params)] = memo.params_key(params), params
      return prim, tuple(in_avals), entry[0], memo.context_key()
    return _memoized_type(_EQN_TYPES, key, lambda: original(prim, in_avals, params))
  check_eqn._jaxpr_proto_memo = True
  return check_eqn


_CUSTOM_TYPES = memo.memo()  # (primitive, operands' types, params, JAX config) -> (out types, effects)


def _custom_typecheck_memo(prim, original):
  """One of JAX's own type rules (broadcast_in_dim, reshape, iota, ...; and
  those of jit, cond, scan, whose params hold jaxprs and have no key),
  memoized as `_check_eqn_memo` memoizes the others: by the types of the
  operands, and a literal's value too, which a rule may read."""
  def rule(ctx_factory, *in_atoms, **params):
    if getattr(_checked, "passed", None) is None:
      return original(ctx_factory, *in_atoms, **params)

    def key():  # (params is a new dict at each call: no key of it to keep)
      return (prim, tuple(map(_operand_key, in_atoms)), memo.params_key(params),
              memo.context_key())
    return _memoized_type(_CUSTOM_TYPES, key, lambda: original(ctx_factory, *in_atoms, **params))
  rule._jaxpr_proto_memo = True
  return rule


def _memoized_type(store, make_key, compute):
  """(output types as a list, effects) of a type rule, `compute()`, kept in
  `store` under `make_key()` (computed afresh where there is no key)."""
  def typed():
    out_types, effs = compute()
    return tuple(out_types), effs
  out_types, effs = store.lookup(make_key, typed)
  return list(out_types), effs


def _operand_key(x):
  if isinstance(x, core.Literal):
    return ("literal", x.aval, memo.literal_key(x.val))
  if type(x) is core.Var:
    return x.aval
  raise memo.NoKey  # (a mutable value's state)


def check_jaxpr_frame_eqn_index(tb) -> int | None:
  """The eqn index of the outermost core._check_jaxpr frame of a traceback."""
  code = getattr(getattr(core, "_check_jaxpr", None), "__code__", None)
  while tb is not None:
    if tb.tb_frame.f_code is code:
      return tb.tb_frame.f_locals.get("eqn_idx")
    tb = tb.tb_next
  return None


def sub_jaxpr_contexts(eqn) -> list:
  """The context managers JAX's type check enters for the sub-jaxprs of `eqn`
  (the named axes a shard_map or pmap binds), so that a sub-jaxpr can be
  checked on its own."""
  name, params = eqn.primitive.name, eqn.params
  out = []
  if name == "shard_map":
    from jax._src import config as _cfg
    from jax._src import shard_map as _sm
    mesh = params.get("mesh")
    axes = params.get("newly_manual_axes", params.get("manual_axes"))
    if mesh is not None and axes is not None:
      out.append(lambda: _sm._extend_axis_env(mesh, frozenset(axes)))
      if "check_vma" in params:
        out.append(lambda: _cfg._check_vma(params["check_vma"]))
  elif name == "xla_pmap":  # JAX 0.9
    axis_name, axis_size = params.get("axis_name"), params.get("axis_size")
    if axis_name is not None and axis_size is not None:
      out.append(lambda: core.extend_axis_env_nd([(axis_name, axis_size)]))
  return out


# Primitives whose custom type check checks their sub-jaxprs too; a call
# primitive without one recurses through core._check_call. (closed_call's
# rule, core._check_closed_call, checks only the call's signature.)
_RECURSIVE_TYPECHECKS = frozenset({"jit", "pjit", "core_call", "shard_map"})


def typecheck_reaches_sub_jaxprs(eqn) -> bool:
  """Whether JAX's check of `eqn` checks its sub-jaxprs too; where unsure,
  False (they are then checked on their own)."""
  prim = eqn.primitive
  if prim.name in _RECURSIVE_TYPECHECKS:
    return True
  return bool(prim.call_primitive) and prim not in core.custom_typechecks
