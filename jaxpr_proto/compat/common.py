"""What every supported JAX minor shares (the JAX 0.10 form). The per-minor
adapters (v0_9.py ... v0_12.py) start from this and redefine what differs;
see jaxpr_proto/compat/__init__.py."""
from __future__ import annotations

import contextlib
import functools
import os
import threading

import jax
import jax.extend.core as jex_core
import numpy as np
from jax._src import ad_checkpoint
from jax._src import core
from jax._src import dtypes as jax_dtypes
from jax._src import effects as effects_lib
from jax._src import linear_util as lu
from jax._src import literals
from jax._src import mesh as mesh_lib
from jax._src import partition_spec
from jax._src import sharding_impls
from jax._src import source_info_util
from jax._src.interpreters import partial_eval as pe
from jax._src.random import prng
from jax._src.state import types as state_types

from jaxpr_proto.compat import memo
from jaxpr_proto.errors import DecodeError, UnresolvedError

# jaxpr_proto's own frames (where it traces a custom rule or a function for
# the user) are not the user's: files would hold this package's line numbers.
# Its cli/ is: the demo's model is a user program.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _entry in sorted(os.listdir(_PACKAGE)):
  if _entry != "cli" and (_entry.endswith(".py") or os.path.isdir(os.path.join(_PACKAGE, _entry))):
    source_info_util.register_exclusion(
        os.path.join(_PACKAGE, _entry) + ("" if _entry.endswith(".py") else os.sep))

ClosedJaxpr = jex_core.ClosedJaxpr
Jaxpr = jex_core.Jaxpr
JaxprEqn = core.JaxprEqn
Var = core.Var
Literal = core.Literal
DropVar = core.DropVar
Primitive = jex_core.Primitive
Device = jax.Device
Tracer = core.Tracer
ShapedArray = core.ShapedArray
AbstractToken = core.AbstractToken
abstract_token = core.abstract_token
DebugInfo = core.DebugInfo
JaxprEqnContext = core.JaxprEqnContext
MemorySpace = core.MemorySpace
SourceInfo = source_info_util.SourceInfo
Traceback = source_info_util.Traceback
PyTreeDef = jax.tree_util.PyTreeDef
NameStack = source_info_util.NameStack
Scope = source_info_util.Scope
Transform = source_info_util.Transform
AbstractMesh = mesh_lib.AbstractMesh
Mesh = mesh_lib.Mesh
AxisType = mesh_lib.AxisType
NamedSharding = jax.sharding.NamedSharding
PartitionSpec = jax.sharding.PartitionSpec
UNCONSTRAINED = partition_spec.PartitionSpec.UNCONSTRAINED
UNSPECIFIED = sharding_impls.UNSPECIFIED
float0 = jax.dtypes.float0
TypedInt = literals.TypedInt
TypedFloat = literals.TypedFloat
TypedComplex = literals.TypedComplex
TypedNdArray = literals.TypedNdArray
Effect = effects_lib.Effect
WrappedFun = lu.WrappedFun
wrap_init = lu.wrap_init
eval_jaxpr = core.eval_jaxpr
# The call primitive of a closed jaxpr (from JAX 0.11 an alias of eval_jaxpr_p).
closed_call_p = core.closed_call_p
jaxpr_as_fun = jex_core.jaxpr_as_fun
trace_to_jaxpr_dynamic = pe.trace_to_jaxpr_dynamic
convert_constvars_jaxpr = pe.convert_constvars_jaxpr
partial_eval_jaxpr_nounits = pe.partial_eval_jaxpr_nounits


# --- PRNG key dtypes -------------------------------------------------------

def is_key_dtype(dtype) -> bool:
  return isinstance(dtype, prng.KeyTy)


# Dtypes that JAX traces but XLA cannot compile on these backends: a program
# computing with one fails to compile, and one with a constant of it (`x * 2`,
# a reduction's zero, a Pallas interpreter's buffer) aborts the process
# (XLA's literal conversion, for float6 in JAX 0.10-0.12: checked on CPU and
# on a TPU v5e; GPU untested, so not listed).
UNCOMPILABLE_DTYPES = {"cpu": frozenset({"float6_e2m3fn", "float6_e3m2fn"}),
                       "tpu": frozenset({"float6_e2m3fn", "float6_e3m2fn"})}


def backend_lacking(dtype) -> str | None:
  """The default backend's name where it cannot compile `dtype`, else None
  (the backend is only looked up for such a dtype)."""
  if not any(dtype.name in names for names in UNCOMPILABLE_DTYPES.values()):
    return None
  backend = jax.default_backend()
  return backend if dtype.name in UNCOMPILABLE_DTYPES.get(backend, ()) else None


def key_impl_name(dtype) -> str:
  return dtype._impl.name


def key_impl(name: str, path: str = ""):
  impl = prng.prngs.get(name)
  if impl is None:
    raise DecodeError(f"unknown PRNG implementation {name!r}", path)
  return impl


def key_dtype(name: str, path: str = ""):
  return prng.KeyTy(key_impl(name, path))


def is_key_array(x) -> bool:
  return isinstance(x, prng.PRNGKeyArray)


def key_data(x):
  return np.asarray(jax.random.key_data(x))


def wrap_key_data(data, impl_name: str):
  return jax.random.wrap_key_data(data, impl=impl_name)


# --- symbolic dims ---------------------------------------------------------

def evaluate_dim(d, env: dict) -> int:
  """The size of symbolic dim `d` where its dim vars have the sizes `env`."""
  return int(d._evaluate(env))


def is_symbolic_dim(d) -> bool:
  return core.is_symbolic_dim(d)


# --- remat policies --------------------------------------------------------
checkpoint_policies = ad_checkpoint.checkpoint_policies


# JAX 0.10 and 0.11 build the named remat policies as records (DotsSaveable,
# SaveOnlyTheseNames, SaveAnyNamesButThese); JAX 0.9 and 0.12 build them as
# closures. Files always carry the record form, so that they move between
# releases; these two functions convert in the closure releases.

def policy_record(fn):
  """(record name, {field: value}) of a remat policy closure, or None."""
  import types
  if not isinstance(fn, types.FunctionType):
    return None
  p = checkpoint_policies
  if fn is p.dots_saveable:
    return "jax::ad_checkpoint.DotsSaveable", {"only_if_no_batch_dims": False}
  if fn is p.dots_with_no_batch_dims_saveable:
    return "jax::ad_checkpoint.DotsSaveable", {"only_if_no_batch_dims": True}
  for factory, record, field in (
      (p.save_only_these_names, "jax::ad_checkpoint.SaveOnlyTheseNames", "saveable_names"),
      (p.save_any_names_but_these, "jax::ad_checkpoint.SaveAnyNamesButThese", "names")):
    probe = factory("x")
    if isinstance(probe, types.FunctionType) and fn.__code__ is probe.__code__:
      (names,) = (c.cell_contents for c in fn.__closure__)
      return record, {field: frozenset(names)}
  return None


# The memory kinds an offloading remat policy may move residuals between:
# JAX offloads from the device (it fails on `pinned_host` as the source) to a
# memory kind that `core.mem_kind_to_space` reads.
OFFLOAD_SRC = ("device",)
OFFLOAD_DST = ("device", "pinned_host", "unpinned_host")


def _memory_kind(allowed):
  return (lambda v: type(v) is str and v in allowed,
          f"one of the memory kinds {', '.join(allowed)}")


def _names(v) -> bool:
  return type(v) is frozenset and all(type(n) is str for n in v)


# What each field of a remat policy (a record's, or a factory's argument) must
# be, by its name: (check, what it must be). codec/policies.py checks decoded
# policies with it, closure_policy the records it builds closures of.
POLICY_FIELDS = {
    "only_if_no_batch_dims": (lambda v: type(v) is bool, "a bool"),
    **{name: (_names, "a frozenset of str")
       for name in ("saveable_names", "names", "names_which_can_be_saved",
                    "names_which_can_be_offloaded")},
    "offload_src": _memory_kind(OFFLOAD_SRC),
    "offload_dst": _memory_kind(OFFLOAD_DST),
}


def closure_policy(record_name: str):
  """A builder (fields -> policy closure) for a policy record this JAX lacks
  (JAX 0.10-0.11's records; JAX 0.11's offloading ones), or None. It takes
  each field only as the record holds it (POLICY_FIELDS: a frozenset of str,
  a bool, a memory kind), raising TypeError otherwise: the factories take any
  iterable (a str as its letters) and any truth value."""
  p = checkpoint_policies

  def fields(f, *names):
    if set(f) != set(names):
      raise TypeError(f"needs the fields {sorted(names)}, got {sorted(f)}")
    for name in names:
      ok, what = POLICY_FIELDS[name]
      if not ok(f[name]):
        r = repr(f[name])
        raise TypeError(f"{name} must be {what}, got {type(f[name]).__name__} "
                        f"{r if len(r) < 60 else r[:57] + '...'}")
    return f

  return {
      "jax::ad_checkpoint.SaveOnlyTheseNames":
          lambda f: p.save_only_these_names(*sorted(fields(f, "saveable_names")["saveable_names"])),
      "jax::ad_checkpoint.SaveAnyNamesButThese":
          lambda f: p.save_any_names_but_these(*sorted(fields(f, "names")["names"])),
      "jax::ad_checkpoint.DotsSaveable":
          lambda f: (p.dots_with_no_batch_dims_saveable
                     if fields(f, "only_if_no_batch_dims")["only_if_no_batch_dims"]
                     else p.dots_saveable),
      "jax::ad_checkpoint.OffloadDotWithNoBatchDims":
          lambda f: p.offload_dot_with_no_batch_dims(**fields(f, "offload_src", "offload_dst")),
      "jax::ad_checkpoint.SaveAndOffloadOnlyTheseNames":
          lambda f: p.save_and_offload_only_these_names(**fields(
              f, "names_which_can_be_saved", "names_which_can_be_offloaded",
              "offload_src", "offload_dst")),
  }.get(record_name)


# PartitionSpec.unreduced_kind's enum: none before JAX 0.11 (see v0_11/adapter.py).
UNREDUCED_KINDS = None


# FlatTree params (JAX >= 0.11's scan ft_in and ft_out) are written as
# extensions "jax::flattree.<kind>": the fields of each kind, in order, with
# the type that a stand-in (compat.standins) relies on, None for any.
FLATTREE_FIELDS: dict[str, dict[str, type | None]] = {
    "tuple": {"elts": tuple}, "pytree": {"xs": tuple, "tree": jax.tree_util.PyTreeDef},
    "singleton": {"val": None}, "static": {"val": None}, "filtered": {"val": None},
    "dict": {"keys": tuple, "vals": tuple}, "either": {"is_right": bool, "val": None},
}


# This JAX has no FlatTrees (see v0_11/adapter.py): files that carry them are
# read into standins.FlatTreeStandIn for the upgraders.
def flattree_fields(v):
  return None


FLATTREE_BUILDERS: dict = {}


def scan_flattrees(num_consts, num_carry, num_xs, num_ys):
  raise NotImplementedError("FlatTrees need JAX >= 0.11")

# HiJAX primitives (JAX >= 0.11): call_hi_primitive's `_prim` param is an
# object of a HiPrim class. Those a file may carry, by registered name:
# {name: (class, build(in_avals, params))}; see v0_12.py.
HIPRIMS: dict = {}


def is_hiprim(v) -> bool:
  return False


def hiprim_functions(prim) -> dict:
  return {}


# custom_vjp_call's `bwd` (a WrappedFun) returns the input cotangents; from
# JAX 0.11 it returns (cotangents, logs).
def bwd_cotangents(ret):
  return ret


def bwd_return(cotangents):
  return cotangents


Inline = None  # jit's inline param is a bool (an enum from JAX 0.11)


def copy_jaxpr(j):
  """j with variables of its own, as a second trace of one function gives
  (JAX's printer names variables by identity); its eqns' params, sub-jaxprs
  and source info are j's."""
  new = {}

  def bind(v):
    if isinstance(v, core.DropVar):
      return core.DropVar(v.aval)
    new[v] = out = core.Var(v.aval)
    for field in ("initial_qdd", "final_qdd"):  # (JAX 0.10)
      if getattr(v, field, None) is not None:
        setattr(out, field, getattr(v, field))
    return out

  def use(x):
    return x if isinstance(x, core.Literal) else new.get(x, x)

  constvars = [bind(v) for v in j.constvars]
  invars = [bind(v) for v in j.invars]
  eqns = [e.replace(invars=[use(x) for x in e.invars], outvars=[bind(v) for v in e.outvars])
          for e in j.eqns]
  return j.replace(constvars=constvars, invars=invars, eqns=eqns,
                   outvars=[use(x) for x in j.outvars], debug_info=j.debug_info)


def jaxpr_key(j) -> int:
  """Identifies a jaxpr across its closed forms (see v0_11.py)."""
  return id(j)


def no_current_trace():
  """A context in which tracing starts afresh (as JAX's thunks run)."""
  return core.set_current_trace(None)


def eval_context():
  """A context in which JAX computes eagerly, whatever trace is current:
  arrays made there are values, never tracers."""
  return core.eval_context()


# --- objects that the value codec writes by name ----------------------------

def is_prng_impl_obj(x) -> bool:
  return isinstance(x, prng.PRNGImpl)


@functools.cache
def policy_factories() -> dict[str, tuple]:
  """{name: (factory, argument names)}: the remat policy factories of
  `jax.checkpoint_policies` whose closures are written by their arguments,
  each public function there of named arguments alone (a policy itself
  takes `prim`; one of `*names` is written as a record, policy_record):
  save_from_both_policies, offload_dot_with_no_batch_dims,
  save_and_offload_only_these_names."""
  import inspect
  import types
  out = {}
  for name, fn in sorted(vars(checkpoint_policies).items()):
    if name.startswith("_") or not isinstance(fn, types.FunctionType):
      continue
    params = list(inspect.signature(fn).parameters.values())
    if (not params or params[0].name == "prim"
        or any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) for q in params)):
      continue
    out[f"jax::{name}"] = (fn, tuple(q.name for q in params))
  return out


@functools.cache
def _policy_codes() -> dict:
  """{code object: factory name} of the closures policy_factories build: a
  function defined in the factory (a constant of its code), or the one a
  call with None arguments returns (JAX 0.11's offload_dot_with_no_batch_dims
  builds it in a helper)."""
  import types
  out = {}
  for name, (factory, argnames) in policy_factories().items():
    for c in factory.__code__.co_consts:
      if isinstance(c, types.CodeType):
        out[c] = name
    try:
      probe = factory(**dict.fromkeys(argnames))
    except Exception:  # a factory that reads its arguments (names into a set)
      continue
    if isinstance(probe, types.FunctionType):
      out.setdefault(probe.__code__, name)
  return out


def policy_factory_of(fn) -> str | None:
  """The name (in policy_factories) of the factory whose closure `fn` is."""
  return _policy_codes().get(getattr(fn, "__code__", None))


def symbolic_constraints(scope) -> list[str]:
  return [c.debug_str for c in scope._explicit_constraints]


def named_axis_effect(name):
  return core.NamedAxisEffect(name)


NamedAxisEffect = core.NamedAxisEffect


def internal_pytree_types():
  """JAX's own pytree node classes that appear in eqn params."""
  from jax._src import custom_derivatives
  from jax._src.state import indexing
  from jax._src.lax.control_flow.solves import _LinearSolveTuple
  return {"jax::NDIndexer": indexing.NDIndexer, "jax::Slice": indexing.Slice,
          "jax::Residuals": custom_derivatives.Residuals,
          "jax::_LinearSolveTuple": _LinearSolveTuple,
          "jax::checkify.Error": CheckifyError,
          **{f"jax::checkify.{n}": c for n, c in CHECKIFY_EXCEPTIONS.items()}}


def extra_enum_types():
  """Enums of jaxlib that appear in eqn params."""
  from jax._src.lib import _jax as jaxlib_ext
  return {"jax::ArrayCopySemantics": jaxlib_ext.ArrayCopySemantics}


def local_device(platform: str, index: int):
  devs = [d for d in jax.local_devices() if d.platform == platform] or jax.local_devices()
  return devs[index % len(devs)] if devs else None


# --- type checking (jaxpr_proto.check.checker) -------------------------------------

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


AbstractRef = state_types.AbstractRef
short_dtype_name = jax_dtypes.short_dtype_name

# Pretty-printing pieces (for the structural diff).
JaxprPpContext = core.JaxprPpContext
JaxprPpSettings = core.JaxprPpSettings
pp_vars = core.pp_vars
pp_var = core.pp_var
pp_eqn = core.pp_eqn

# The JAX modules whose enums, NamedTuples and dataclasses may appear in eqn
# params; the value codec allow-lists those types as `jax::<module>.<Class>`.
PARAM_TYPE_MODULES = (
    "jax._src.lax.lax", "jax._src.lax.slicing", "jax._src.lax.convolution",
    "jax._src.lax.windowed_reductions", "jax._src.lax.linalg",
    "jax._src.lax.fft", "jax._src.lax.ann", "jax._src.lax.special",
    "jax._src.lax.parallel", "jax._src.lax.other",
    "jax._src.lax.control_flow.loops", "jax._src.lax.control_flow.solves",
    "jax._src.lax.control_flow.conditionals",
    "jax._src.ad_checkpoint", "jax._src.sharding_impls", "jax._src.layout",
    "jax._src.mesh", "jax._src.core", "jax._src.dispatch", "jax._src.api",
    "jax._src.random.prng", "jax._src.numpy.lax_numpy",
    "jax._src.numpy.einsum", "jax._src.cudnn.scaled_matmul_stablehlo",
    "jax._src.state.types", "jax._src.callback", "jax._src.ffi",
    "jax._src.tpu.linalg.eigh", "jax._src.lax.utils",
    "jax._src.memory", "jax._src.compute_on", "jax._src.xla_metadata_lib",
    "jax._src.pjit", "jax._src.shard_map", "jax._src.custom_derivatives",
)
PARAM_TYPE_PREFIX = "jax._src."

# Effect singletons, by registered name: (module, attribute).
EFFECT_SINGLETONS = {
    "jax::debug": ("jax._src.debugging", "debug_effect"),
    "jax::ordered_debug": ("jax._src.debugging", "ordered_debug_effect"),
    "jax::io": ("jax._src.callback", "_IOEffect"),
    "jax::ordered_io": ("jax._src.callback", "_OrderedIOEffect"),
    "jax::no_dce": ("jax._src.lax.lax", "no_dce_effect"),
    "jax::internal_mutable_array": ("jax._src.core", "internal_mutable_array_effect"),
    "jax::shape_assertion": ("jax._src.export.shape_poly", "shape_assertion_effect"),
    "jax::ffi": ("jax._src.ffi", "_FfiEffect"),
    "jax::buffer_callback": ("jax._src.buffer_callback", "_BufferCallbackEffect"),
}

# Effects on a jaxpr input, by registered name.
INPUT_EFFECTS = {"jax::ref_read": state_types.ReadEffect,
                 "jax::ref_write": state_types.WriteEffect,
                 "jax::ref_accum": state_types.AccumEffect}


def pytree_node_registry():
  """JAX's registry of custom pytree node classes, or None."""
  try:
    from jax._src.tree_util import _registry
    return _registry
  except ImportError:  # pragma: no cover - a JAX without it
    return None


def jit_info(f):
  """(fun, PjitInfo) of a jax.jit-wrapped function, or None (guarded)."""
  try:
    cache_miss = f._cache_miss
    cache_miss = getattr(cache_miss, "__wrapped__", cache_miss)
    cells = dict(zip(cache_miss.__code__.co_freevars,
                     (c.cell_contents for c in cache_miss.__closure__)))
    return cells["fun"], cells["jit_info"]
  except Exception:  # a JAX that builds jit differently: no custom reduction
    return None


# --- host callbacks: the user's function inside a callback param ---------------------

from jax._src import callback as _callback_lib  # noqa: E402
from jax._src import debugging as _debugging  # noqa: E402

CALLBACK_PRIMITIVES = frozenset({"debug_callback", "pure_callback", "io_callback"})
# The name JAX gives jax.debug.callback's flat function (printed as its param).
_DEBUG_FLAT_QUALNAME = "debug_callback.<locals>._debug_callback.<locals>._flat_callback"


def callback_parts(prim_name: str, value):
  """(the user's function, in_tree, static_args or None) of a callback
  primitive's `callback` param as JAX's API makes it, or None for another
  value: for debug_callback a closure over them, else a _FlatCallback."""
  if prim_name == "debug_callback":
    code = getattr(value, "__code__", None)
    if code is None or getattr(value, "__module__", None) != _debugging.__name__ \
        or value.__name__ != "_flat_callback":
      return None
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in value.__closure__ or ())))
    if not {"callback", "in_tree", "static_args"} <= set(cells):
      return None
    return cells["callback"], cells["in_tree"], dict(cells["static_args"])
  if isinstance(value, _callback_lib._FlatCallback):
    return value.callback_func, value.in_tree, None
  return None


def make_callback(prim_name: str, fn, in_tree, static_args):
  """The `callback` param that JAX's API would make for `fn`."""
  if prim_name == "debug_callback":
    flat = _debugging._make_flat_callback(in_tree, fn, dict(static_args or {}))
    flat.__qualname__ = _DEBUG_FLAT_QUALNAME  # printed as the original's
    flat.__module__ = _debugging.__name__
    return flat
  return _callback_lib._FlatCallback(fn, in_tree)


# Param values of the callback primitives written by name (debug_callback's effect).
CALLBACK_SINGLETONS = {
    "jax::debug_effect": _debugging.debug_effect,
    "jax::ordered_debug_effect": _debugging.ordered_debug_effect,
}


from jax._src import custom_batching as _custom_batching  # noqa: E402


def tracing_treedef(t):
  """`t` in the registry where JAX builds custom_vmap_call's in_tree (JAX
  0.10 has one registry)."""
  return t


def custom_vmap_rule(fn):
  """custom_vmap_call's `rule` param for the batching rule `fn`, as JAX's
  custom_vmap makes it."""
  return _custom_batching.ClosedRule(fn, core.DebugInfo("custom_vmap rule", fn.__qualname__,
                                                       None, None))


def is_closed_rule(value) -> bool:
  """Whether a `rule` param is a ClosedRule (JAX calls it without consts)."""
  return isinstance(value, _custom_batching.ClosedRule)


def call_custom_vmap_rule(fn, axis_size, in_batched, args):
  """(out, out_batched) of a custom_vmap rule, called as JAX's batching rule calls it."""
  return _custom_batching.call_rule(fn, axis_size, in_batched, args)


from jax._src.export import shape_poly as _shape_poly  # noqa: E402

dim_as_value_p = _shape_poly.dim_as_value_p


def size_as_value(size: int):
  """(closed_call primitive, its params) that give `size` as dim_as_value
  would: for a dim_as_value whose symbolic dim was made a size (a saved
  custom_vmap rule at a batch size), which JAX can neither evaluate nor
  lower."""
  return closed_call_p, {"call_jaxpr": jax.make_jaxpr(
      lambda: np.array(size, core.dim_value_dtype()))()}


# --- checkify's errors: pytree nodes and effects in err_tree and out_trees ------------

from jax._src import checkify as _checkify  # noqa: E402

CheckifyError = _checkify.Error
CHECKIFY_FILE = _checkify.__file__  # a JAX file: no user frame
CheckifyErrorEffect = _checkify.ErrorEffect
# The exception classes whose treedefs an Error's metadata holds, by name
# (BatchedError only exists while an Error is read).
CHECKIFY_EXCEPTIONS = {c.__name__: c for c in (
    _checkify.FailedCheckError, _checkify.NaNError, _checkify.OOBError,
    _checkify.DivisionByZeroError)}


def reserve_checkify_codes(largest: int) -> None:
  """Makes checkify's process-wide error codes, which key an Error's
  metadata, start after `largest`: a loaded program holds codes another
  process gave out, and a check that this process checkifies later must
  not take one of them."""
  import itertools
  first = _checkify.next_code()
  if first <= largest:
    _checkify.next_code = itertools.count(largest + 1).__next__


# --- what a file names that this process lacks (unresolved="placeholder") ------------

class UnresolvedPrimitive(core.Primitive):
  """Stands in a loaded program for an eqn whose primitive, or whose host
  callback, the reading process does not have: the program prints, checks
  structurally and diffs as the original; binding it (running, tracing,
  transforming the program) raises UnresolvedError naming the eqn."""
  multiple_results = True

  def __init__(self, name: str, why: str, path: str = "", outvars=(), effects=frozenset()):
    super().__init__(name)
    self.why, self.path = why, path
    # JAX's type check takes the eqn's stored output types and effects: the
    # rest of the program is still checked.
    out = [v.aval for v in outvars]
    self.abstract_eval = lambda *args, **params: (list(out), set(effects))

  def bind(self, *args, **params):
    raise UnresolvedError(f"{self.why}; the program was loaded with placeholders "
                          "(unresolved='placeholder') and cannot run this eqn", self.path)


class UnresolvedCallback:
  """A host callback this process does not run: a name bound to nothing, or
  pickled code that was not unpickled. `why` says which; `shown` is how it
  prints."""

  def __init__(self, name: str, why: str | None = None, shown: str | None = None):
    self.name = name
    self.why = why or f"callback {name!r} is not bound in this process"
    self.shown = shown or f"unresolved callback {name}"

  def __call__(self, *args, **kwargs):
    raise UnresolvedError(self.why)

  def __repr__(self):
    return f"<{self.shown}>"
