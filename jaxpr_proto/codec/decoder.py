"""jaxpr_proto.v1.Module -> ClosedJaxpr.

Table entries are decoded on first reference and cached by index, so shared
sub-jaxprs stay shared and each error names the path of the reference that
reached it. Decoding never imports a module the file names and never looks
up or calls a name taken from the file: every name is looked up in this
package's tables (which may import one of JAX's own optional modules from
the fixed table compat/optional.py, picked by the name, never named by it).
"""
from __future__ import annotations

import contextlib
import re
from typing import Callable

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto._version import __version__
from jaxpr_proto.codec import (avals, custom_rules, effects, encoder, names, param_codecs,
                               pytrees, sharding, tracebacks, values)
from jaxpr_proto.compat import memo as _memo
from jaxpr_proto.compat import standins, upgrade
from jaxpr_proto.errors import (DecodeError, Error, InternalError, PrimitiveVersionError,
                                UnknownPrimitiveError, VersionError)
from jaxpr_proto.codec.names import REGISTRY
from jaxpr_proto.codec.state import _IN_PROGRESS, DecodeState
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns, walk
from jaxpr_proto.wire.versions import check_version, jax_version_of


# The compute types compute_on accepts (jax/_src/compute_on.py's _check_valid);
# lowering fails on any other.
# The effects of an eqn that has none (JAX's own eqns share one such, as here).
NO_EFFECTS = frozenset()

# (primitive name, a Param's bytes, names.generation()) -> (name, value) of the
# params whose value is plain data (param_codecs.is_plain), decoded before.
_PLAIN_PARAMS = _memo.memo()

# (aval, a literal's Value bytes, JAX's configuration) -> its value, for the
# literals that are arrays or scalars (`x * 2.0` in every layer of every
# program): shared, as one program's uses of a literal share one value, and
# so made read-only. (Not with arrays outside the message, or symbolic dims.)
_LITERALS = _memo.memo()
_SHAREABLE_TYPES = frozenset({bool, np.ndarray, compat.TypedNdArray,
                              *(t for t in np.sctypeDict.values() if issubclass(t, np.generic))})
_SHARED_LITERAL_BYTES = 1 << 10  # (a bigger value is decoded at each use: not kept alive)

_COMPUTE_TYPE = re.compile(r"device_host|device|tpu_sparsecore|gpu_stream:[0-9]{1,9}")


class Decoder:
  """Reads one Module; `state` holds what it has decoded (see codec.state)."""

  def __init__(self, m: pb.Module, source=None, callbacks=None, trust_pickled_code=False,
               placeholders=False, dim_env=None):
    self.m = m
    # source: of external arrays' bytes; dim_env: {name: size} of symbolic dims
    # to read as those sizes (a saved custom_vmap rule at a batch size)
    self.state = DecodeState(m, source=source, dim_env=dim_env)
    self.upgrader = upgrade.for_module(m)  # None: written by this JAX's primitives
    self.callbacks = callbacks  # {name: host function} bound for this load only
    self.bound_callbacks: dict = {}  # name -> the function each callback name was bound to
    self.trust_pickled_code = trust_pickled_code  # unpickle callbacks saved as code
    # unresolved="placeholder": a primitive or callback this process lacks becomes an
    # UnresolvedPrimitive eqn, listed in `unresolved` as (path, why), instead of an error.
    self.placeholders = placeholders
    self.unresolved: list[tuple[str, str]] = []
    # The eqns of jaxprs (by index) already read as columns, by the checker's structure stage.
    self.columns: dict[int, columns.Columns] = {}

  @staticmethod
  def with_dims(cj, dim_env: dict):
    """A decoded closed jaxpr with the symbolic dims of `dim_env` ({name:
    size}) made those sizes (a dim_as_value of one, that size): written, and
    read again with them bound."""
    m = encoder.encode(cj)
    with compat.eval_context():  # (JAX calls it while tracing: literals stay values)
      return Decoder(m, dim_env=dim_env).closed_jaxpr(m.root, "")

  # --- tables -------------------------------------------------------------
  # closed_jaxpr and jaxpr recurse as deep as sub-jaxprs nest: no helper
  # frames between them, so that MAX_DEPTH stays far from Python's limit.
  def closed_jaxpr(self, i: int, path: str):
    st = self.state
    cj = st.begin("closed_jaxprs", i, "closed jaxpr", path)
    if cj is None:
      try:
        msg = st.entry("closed_jaxprs", i, "closed jaxpr", path)
        jaxpr = self.jaxpr(msg.jaxpr, path)
        if msg.own_jaxpr:  # (another entry's jaxpr, as an object of its own)
          jaxpr = compat.copy_jaxpr(jaxpr)
        elif msg.same_vars:  # (JAX's copy of another entry's jaxpr: its variables and eqns)
          jaxpr = jaxpr.replace()
        walk.check_consts(self.m, msg, f"{path}.consts" if path else "consts")
        # The file's constvars (JAX >= 0.11 counts constvars only once consts are attached).
        constvars = jaxpr.invars[:len(msg.consts)] if compat.UNIFIED_JAXPR else jaxpr.constvars
        consts = [self.const(c, v.aval, f"{path}.consts[{k}]" if path else f"consts[{k}]")
                  for k, (c, v) in enumerate(zip(msg.consts, constvars))]
        # (From JAX 0.11 a jaxpr without consts is its own closed form.)
        cj = jaxpr if compat.UNIFIED_JAXPR and not consts else compat.ClosedJaxpr(jaxpr, consts)
      except BaseException:
        st.abort("closed_jaxprs", i)
        raise
      st.end("closed_jaxprs", i, cj)
    return cj

  def jaxpr(self, i: int, path: str):
    st = self.state
    j = st.begin("jaxprs", i, "jaxpr", path)
    if j is None:
      try:
        msg = st.entry("jaxprs", i, "jaxpr", path)
        with st.nested(path):
          j = self._decode_jaxpr(msg, path, i)
      except BaseException:
        st.abort("jaxprs", i)
        raise
      st.end("jaxprs", i, j)
      st.jaxpr_paths[i] = path
    return j

  def aval(self, i: int, path: str):
    return self.state.get("avals", i, "aval", path, lambda: avals.decode_aval(
        self, self.state.entry("avals", i, "aval", path), f"{path}(aval {i})"))

  def primitive(self, i: int, path: str):
    return self.state.get("primitives", i, "primitive", path, lambda: self._primitive(i, path))

  def _primitive(self, i: int, path: str):
    msg = self.state.entry("primitives", i, "primitive", path)
    jax_ns = self.upgrader and msg.namespace.split(".")[0] == "jax"
    name = self.upgrader.primitive_name(msg.name) if jax_ns else msg.name
    try:
      return REGISTRY.lookup(msg.namespace, name, path)
    except UnknownPrimitiveError as e:
      if jax_ns and self.upgrader.expansion(name) is not None:
        return standins.Expanded(name)  # see _decode_jaxpr
      why = e.message
      if jax_ns and self.upgrader.newer:
        why = f"{e.message} ({self.upgrader.describe()})"
      if self.placeholders:
        return compat.UnresolvedPrimitive(name, why)  # made per eqn in _decode_jaxpr
      if why != e.message:
        raise PrimitiveVersionError(why, path) from None
      raise

  def param(self, i: int, prim_name: str, path: str):
    """(name, value) of Module.params[i]; decoded once per primitive, and
    once per process where the value is plain data (param_codecs.is_plain):
    then the same bytes are the same value in any Module (not with arrays
    outside the message, or with symbolic dims read as sizes). (No helper
    frame: params nest sub-jaxprs.)"""
    done = self.state.decoded["params"]
    p = done.get((i, prim_name))
    if p is None:
      msg = self.state.entry("params", i, "param", f"{path}.params")
      key = None
      if self.state.source is None and self.state.dim_env is None:
        key = (prim_name, msg.SerializeToString(), names.generation())
        p = _PLAIN_PARAMS.get(key)
      if p is None:
        p = (msg.name, param_codecs.decode_param(self, prim_name, msg, f"{path}.params.{msg.name}"))
        if key is not None and param_codecs.is_plain(p[1]):
          _PLAIN_PARAMS.put(key, p)
      done[(i, prim_name)] = p
    return p

  def rule(self, i: int, path: str):
    def make():
      msg = self.state.entry("rules", i, "rule", path)
      kind = msg.WhichOneof("kind")
      where = f"{path}(rule {i})"
      if kind is None:
        raise DecodeError("empty custom rule", where)
      return custom_rules.RULES[kind](self, getattr(msg, kind), where)
    return self.state.get("rules", i, "rule", path, make)

  def context(self, i: int, path: str):
    ctx = self.state.decoded["contexts"].get(i)
    if ctx is None:
      msg = self.state.entry("contexts", i, "context", path)
      mesh = sharding.decode_mesh(msg.cur_abstract_mesh, path + ".context")
      xla_metadata = None
      if msg.HasField("xla_metadata"):
        md = self.value(msg.xla_metadata, path + ".context.xla_metadata")
        if not isinstance(md, dict):
          raise DecodeError("xla_metadata must be a dict", path)
        xla_metadata = md
      compute_type = msg.compute_type if msg.HasField("compute_type") else None
      if compute_type is not None and not _COMPUTE_TYPE.fullmatch(compute_type):
        raise DecodeError(f"compute_type {compute_type!r} is none of JAX's (device_host, "
                          "device, tpu_sparsecore, gpu_stream:N)", path + ".context")
      ctx = self.state.decoded["contexts"][i] = compat.make_context(
          compute_type,
          msg.threefry_partitionable, mesh, msg.remove_size_one_mesh_axis,
          xla_metadata, self._context_fields(msg, path + ".context"))
    return ctx

  def _context_fields(self, msg, path: str) -> dict:
    """The later-JAX fields of an EqnContext: this JAX's CONTEXT_FIELDS, unset
    ones at their "not set" value. A field this JAX lacks is refused (writers
    leave out unset fields, so it changes the program)."""
    fields = dict(compat.CONTEXT_FIELDS)
    seen = set()
    for j, p in enumerate(msg.fields):
      where = f"{path}.fields[{j}]"
      if p.name in seen:
        raise DecodeError(f"duplicate context field {p.name!r}", where)
      seen.add(p.name)
      v = self.value(p.value, where)
      if p.name not in fields:
        raise VersionError(
            f"eqn context field {p.name}={v!r} is not known to JAX {compat.jax.__version__}"
            f"{self._file_jax()}", where)
      fields[p.name] = v
    return fields

  def _file_jax(self) -> str:
    v = jax_version_of(self.m)
    return f" (the file was written by JAX {v})" if v else ""

  # --- jaxprs -------------------------------------------------------------
  def _decode_jaxpr(self, msg: pb.Jaxpr, path: str, msg_index: int | None = None):
    scope = walk.Scope()
    aval = self.aval
    prefix = f"{path}." if path else ""

    def define(v, k, what):  # (the path is made only for an error)
      if v.id in scope.vars:
        scope.define(v, f"{prefix}{what}[{k}]")  # raises
      av = done_avals.get(v.aval)
      if av is None or av is _IN_PROGRESS:
        av = aval(v.aval, f"{prefix}{what}[{k}]")
      var = scope.vars[v.id] = compat.Var(av)
      return var

    def atom(a, where):
      if walk.operand_kind(a, where) == "var":
        return scope.use(a.var, where)
      av = aval(a.literal.aval, where)
      return compat.Literal(self.literal(a.literal.value, av, where), av)

    done_avals = self.state.decoded["avals"]
    constvars = [define(v, k, "constvars") for k, v in enumerate(msg.constvars)]
    invars = [define(v, k, "invars") for k, v in enumerate(msg.invars)]
    # The eqns, from either form of the message. What eqns share (a primitive
    # with its params, source info and context; an aval) is decoded once; the
    # loop builds an error's path only to raise it. (One method: it recurses
    # into sub-jaxprs through the params, so no helper frames.)
    c = self.columns.pop(msg_index, None) if msg_index is not None else None
    if c is None:
      c = columns.of(msg, prefix)
    st = self.state
    vars_ = scope.vars
    calls: dict = {}  # (primitive, *params) -> what they decode to
    origins: dict = {}  # (traceback, name stack, context) -> (source info, context)
    literals: dict = {}  # (aval, value's bytes) -> (value, aval)
    Var, JaxprEqn, Expanded = compat.Var, compat.JaxprEqn, standins.Expanded
    P, OC, OPS, LITS = c.primitive, c.operand_count, c.operands, c.literals
    RC, RES, RAV = c.result_count, c.results, c.result_avals
    PC, PARS, TB, NS, CTX, EFFS = c.param_count, c.params, c.traceback, c.name_stack, c.context, c.effects
    placeholders = self.placeholders
    eqns, alone = [], []
    o = r = q = lit = 0
    st.where_prefix = prefix
    for k, (p, tb, ns, cx, n_par, n_ops, n_res) in enumerate(zip(P, TB, NS, CTX, PC, OC, RC)):
      st.eqn_index = k
      if n_par == 1:
        key = (p, PARS[q])
        q += 1
      elif n_par:
        key = (p, *PARS[q:q + n_par])
        q += n_par
      else:
        key = (p,)
      call = calls.get(key)
      if call is None:  # decoded once: the params fixed up and upgraded for the primitive
        where = st.where
        prim = self.primitive(p, where)
        params = param_codecs.decode_params(self, prim.name, key[1:], where)
        if self.upgrader:
          params = self.upgrader.params(prim.name, params, where)
        else:
          standins.refuse_stand_ins(prim.name, params, where, "")
        if st.dim_env and prim is compat.dim_as_value_p:  # a size here (with_dims)
          prim, params = compat.size_as_value(params["dim"])
        call = calls[key] = (prim, params, [], type(prim) is not Expanded and not placeholders)
      prim, params, uses, plain = call  # (one params dict for the group, as JAX shares them)
      origin = origins.get((tb, ns, cx))
      if origin is None:
        where = st.where
        origin = origins[(tb, ns, cx)] = (tracebacks.decode_source_info(self, tb, ns, where),
                                          self.context(cx, where))
      si, ctx = origin
      if n_ops == 1:
        ins = [vars_.get(OPS[o] - 1)]  # (None for a literal: id -1)
      else:
        ins = [vars_.get(x - 1) for x in OPS[o:o + n_ops]]
      if None in ins:
        for j, x in enumerate(OPS[o:o + n_ops]):
          if x:
            ins[j] = scope.use(x - 1, f"{st.where}.invars[{j}]")  # raises if undefined
          else:
            lm = LITS[lit]
            lit += 1
            lkey = (lm.aval, lm.value.SerializeToString())
            value = literals.get(lkey)
            if value is None:  # (literals repeat: `x * 2.0` in every layer)
              at = f"{st.where}.invars[{j}]"
              av = self.aval(lm.aval, at)
              value = literals[lkey] = (self.literal(lm.value, av, at), av)
            ins[j] = compat.Literal(*value)
      o += n_ops
      x = RES[r] if n_res == 1 else 0
      av = done_avals.get(RAV[r]) if x else None
      if av is not None and av is not _IN_PROGRESS and x - 1 not in vars_:  # one new variable
        v = vars_[x - 1] = Var(av)
        outs = [v]
        r += 1
        n_res = 0  # (done)
      else:
        outs = []
      if n_res:
        for j, (x, a) in enumerate(zip(RES[r:r + n_res], RAV[r:r + n_res])):
          av = done_avals.get(a)
          if av is None or av is _IN_PROGRESS:
            av = self.aval(a, f"{st.where}.outvars[{j}]")
          if not x:
            outs.append(compat.DropVar(av))
          elif x - 1 in vars_:
            raise DecodeError(f"variable id {x - 1} is defined twice (not SSA)", f"{st.where}.outvars[{j}]")
          else:
            v = vars_[x - 1] = Var(av)
            outs.append(v)
        r += n_res
      effs = NO_EFFECTS
      if EFFS and k in EFFS:
        effs = effects.decode_effects(self, EFFS[k], scope, f"{st.where}.effects")
      if plain:
        uses.append(k)
      else:
        if type(prim) is Expanded:  # a newer JAX's primitive, computed
          prim, params = self.upgrader.expand(prim.name, ins, outs, params, st.where)
        if placeholders:
          prim = self._placeholder_for(prim, params, st.where, outs, effs)
        if prim is call[0]:
          uses.append(k)
        else:  # an eqn of its own
          alone.append((prim, params, [k]))
      eqns.append(JaxprEqn(ins, outs, prim, params, effs, si, ctx))
    st.eqn_index = -1
    outvars = [atom(a, f"{prefix}outvars[{k}]") for k, a in enumerate(msg.outvars)]
    effs = effects.decode_effects(self, msg.effects, scope, f"{prefix}effects")
    debug = self.debug_info(msg.debug_info) if msg.HasField("debug_info") else None
    if debug is None:
      debug = compat.DebugInfo("jaxpr_proto", None, tuple([None] * len(invars)), None)
    try:
      j = compat.Jaxpr(constvars, invars, outvars, eqns, effs, debug, msg.is_high)
    except Exception as e:
      raise DecodeError(f"invalid jaxpr: {e}", path) from None
    # (primitive, params, eqn indices) of each group of eqns that share them,
    # for the param checks (check.param_rules)
    self.state.calls[id(j)] = [x[:3] for x in calls.values() if x[2]] + alone
    return j

  def _placeholder_for(self, prim, params, where, outs, effs):
    """The eqn's own UnresolvedPrimitive where its primitive, or its host
    callback, is unresolved; else `prim`."""
    why = None
    if isinstance(prim, compat.UnresolvedPrimitive):
      why = prim.why
    elif prim.name in compat.CALLBACK_PRIMITIVES:
      parts = compat.callback_parts(prim.name, params.get("callback"))
      if parts is not None and isinstance(parts[0], compat.UnresolvedCallback):
        why = parts[0].why
    if why is None:
      return prim
    self.unresolved.append((where, why))
    return compat.UnresolvedPrimitive(prim.name, why, where, outs, effs)

  def debug_info(self, msg: pb.DebugInfo, func_name: str | None = None):
    def strings(o):
      missing = set(o.missing)
      return tuple(None if i in missing else s for i, s in enumerate(o.values))
    arg_names = strings(msg.arg_names) if msg.HasField("arg_names") else None
    result_paths = strings(msg.result_paths) if msg.HasField("result_paths") else None
    src = msg.func_src_info or None
    if src is None and func_name:
      src = func_name
    return compat.DebugInfo(msg.traced_for or "jaxpr_proto", src, arg_names, result_paths)

  def symbolic_dim(self, s: str, path: str):
    return avals.decode_symbolic_dim(self, s, path)

  # --- values -------------------------------------------------------------
  def literal(self, msg: pb.Value, aval, path):
    """A literal's value is of its aval's dtype and shape (lowering makes the
    constant from the value, the types from the aval). An array or scalar
    value of at most 1 KiB is decoded once per process (`_LITERALS`)."""
    key = None
    if (self.state.source is None and self.state.dim_env is None
        and msg.WhichOneof("kind") not in walk.NESTING  # (no table of this Module's)
        and all(type(d) is int for d in getattr(aval, "shape", (None,)))):
      data = msg.SerializeToString()
      key = (aval, data, _memo.context_key()) if len(data) <= _SHARED_LITERAL_BYTES else None
      v = _LITERALS.get(key) if key is not None else None
      if v is not None:
        return v
    v = self._literal(msg, aval, path)
    if key is not None and type(v) in _SHAREABLE_TYPES:
      if isinstance(v, np.ndarray):
        v.flags.writeable = False  # (shared by the programs that use it)
      _LITERALS.put(key, v)
    return v

  def _literal(self, msg: pb.Value, aval, path):
    v = self.value(msg, path)
    dtype = getattr(v, "dtype", np.dtype(bool) if type(v) is bool else None)
    if dtype is None or dtype != getattr(aval, "dtype", None) or np.shape(v) != tuple(getattr(aval, "shape", ())):
      raise DecodeError(f"the literal's value, a {type(v).__name__} of dtype {dtype} and shape "
                        f"{np.shape(v)}, is not of its type {aval.str_short()}", path)
    return v

  def const(self, msg: pb.Value, aval, path):
    return self.value(msg, path)

  def treedef(self, msg: pb.TreeDef, path):
    return pytrees.decode_treedef(msg, self.value, path)

  # The generic value codec, as a method (no extra frame: values nest sub-jaxprs).
  value = values.decode


@contextlib.contextmanager
def refusing(where: Callable[[], str]):
  """Lets jaxpr_proto errors through and turns any other exception into one,
  at the path `where()` names: deep nesting is the file's fault, anything else
  a gap in the checks (an InternalError)."""
  try:
    yield
  except Error:
    raise
  except RecursionError:
    raise DecodeError("structure nested too deeply", where()) from None
  except Exception as e:  # a bug, a gap in the checks, or a JAX change
    raise internal_error(e, where()) from e


def decode(m: pb.Module) -> tuple[Decoder, object]:
  """Module -> (its Decoder, the root ClosedJaxpr). Malformed input raises
  DecodeError and nothing else. JAX's type rules are not checked here: see
  `jaxpr_proto.check.decode`, the path every loader takes."""
  check_version(m)
  dec = Decoder(m)
  with refusing(lambda: dec.state.where):
    return dec, dec.closed_jaxpr(m.root, "")


def internal_error(e: Exception, path: str) -> InternalError:
  """The error for an exception the checks did not foresee: it does not blame
  the file, and names both versions for a bug report."""
  return InternalError(
      f"internal error of jaxpr_proto {__version__} with JAX {jax.__version__} "
      f"(the file may be fine; please report this): {type(e).__name__}: {e}", path)
