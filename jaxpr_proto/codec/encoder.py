"""ClosedJaxpr -> jaxpr_proto.v1.Module.

The encoder walks the jaxpr once. Everything that repeats is interned in the
Module's tables (`_intern_*`); sub-jaxprs are interned by object identity, so
that a jaxpr JAX shares among eqns is stored once. Eqn params go through the
per-primitive param codecs (`param_codecs`) or else the generic value codec
(`Encoder.value`), whose type table is the allow-list of what can be written.
"""
from __future__ import annotations

import jax

from jaxpr_proto import compat
from jaxpr_proto._version import __version__
from jaxpr_proto.codec import avals, effects, names, param_codecs, sharding, tracebacks, values
from jaxpr_proto.codec.names import REGISTRY
from jaxpr_proto.codec.state import EncodeState, paused_gc
from jaxpr_proto.compat import memo as _memo
from jaxpr_proto.compat import public_defaults
from jaxpr_proto.compat.change import same_value
from jaxpr_proto.errors import EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns
from jaxpr_proto.wire.versions import stamp


# (a literal's value by memo.literal_key, names.generation()) -> its Value (see
# EncodeState.memoized): see Encoder.literal.
_LITERAL_VALUES = _memo.memo()


class Encoder:
  """Writes one Module; `state` holds its tables (see codec.state)."""

  def __init__(self, debug_info: bool = True, out_of_line=None, pickle_functions: bool = False):
    # out_of_line: a wire.external.Sink that takes the bytes of big arrays
    self.state = st = EncodeState(pb.Module(), debug_info, out_of_line=out_of_line)
    self.pickle_functions = pickle_functions  # unregistered callbacks as cloudpickled code
    st.module.tracebacks.add()  # entry 0 of both: none
    st.module.name_stacks.add()
    st.interned["tracebacks"][None] = 0
    st.interned["name_stacks"][()] = 0
    assert self._intern_context(compat.default_context()) == 0

  # --- module -------------------------------------------------------------
  def module(self, closed_jaxpr) -> pb.Module:
    st = self.state
    m = st.module
    m.producer.jaxpr_proto_version = __version__
    m.producer.jax_version = jax.__version__
    m.producer.jaxlib_version = jax.lib.__version__ if hasattr(jax.lib, "__version__") else jax.__version__
    m.root = self.closed_jaxpr(closed_jaxpr, "")
    for ns in sorted(st.namespaces):
      m.namespaces.add(namespace=ns, version=jax.__version__ if ns.startswith("jax") else "")
    if st.symbolic_scope is not None:
      m.symbolic_scope.constraints.extend(compat.symbolic_constraints(st.symbolic_scope))
    return self.finish()

  def finish(self) -> pb.Module:
    """The module with the features and format version of all that was
    written: again after writing more into it (a Function's signature)."""
    m = self.state.module
    del m.required_features[:]
    m.required_features.extend(sorted(self.state.features))
    stamp(m)  # the oldest format version that reads this file
    return m

  # --- interning ----------------------------------------------------------
  def string(self, s: str) -> int:
    return self.state.intern("strings", s, lambda: s)

  def aval(self, a, path: str) -> int:
    try:
      key = (type(a), a, getattr(a, "sharding", None))
      hash(key)
    except TypeError:
      key = id(a)
    return self.state.intern("avals", key, lambda: avals.encode_aval(self, a, path), keep=a)

  def param_bytes(self, data: bytes) -> int:
    """The index of a Param given as its deterministic serialization."""
    return self.state.intern("params", data, lambda: pb.Param.FromString(data))

  def primitive(self, prim, path: str) -> int:
    def make():
      ns, name = REGISTRY.name_of(prim, path)
      self.state.namespaces.add(ns)
      return pb.PrimitiveName(namespace=ns, name=name)
    return self.state.intern("primitives", id(prim), make, keep=prim)

  def _intern_context(self, ctx) -> int:
    return self.state.intern("contexts", id(ctx), lambda: self._encode_context(ctx), keep=ctx)

  def _encode_context(self, ctx) -> pb.EqnContext:
    msg = pb.EqnContext(threefry_partitionable=ctx.threefry_partitionable,
                        remove_size_one_mesh_axis=ctx.remove_size_one_mesh_axis)
    if ctx.compute_type is not None:
      msg.compute_type = ctx.compute_type
    msg.cur_abstract_mesh.CopyFrom(sharding.encode_mesh(ctx.cur_abstract_mesh, "ctx"))
    if ctx.xla_metadata is not None:
      msg.xla_metadata.CopyFrom(self.value(dict(ctx.xla_metadata), "ctx.xla_metadata"))
    for name, unset in compat.CONTEXT_FIELDS.items():
      v = getattr(ctx, name, unset)
      if not same_value(v, unset):
        msg.fields.add(name=name, value=self.value(v, f"ctx.{name}"))
        self.state.features.add("eqn_context_fields")
    return msg

  # --- jaxprs -------------------------------------------------------------
  def closed_jaxpr(self, cj, path: str, content=None) -> int:
    """The index of `cj` in Module.closed_jaxprs, one entry per object.
    `content` is an exact key of all that is written of it (see
    custom_rules.call_content): a copy equal to one written before is an
    entry naming that one's jaxpr and consts (own_jaxpr), not written again."""
    st = self.state
    i, msg = st.reserve("closed_jaxprs", id(cj), cj)
    if msg is None:
      return i
    if content is not None:
      first = st.interned["closed_jaxprs"].setdefault(content, i)
      if first != i:
        msg.CopyFrom(st.module.closed_jaxprs[first])
        msg.own_jaxpr = True
        return i
    j = cj.jaxpr
    first = None if id(j) in st.interned["jaxprs"] else self._copied(j)
    if first is not None:
      msg.jaxpr, msg.same_vars = first, True
    else:
      new = id(j) not in st.interned["jaxprs"]
      msg.jaxpr = self.jaxpr(j, path)
      key = self._copy_key(j)
      if new and key is not None:  # (kept alive by its entry)
        st.interned["jaxpr_copies"].setdefault(key, []).append((j, msg.jaxpr))
    for k, c in enumerate(cj.consts):
      msg.consts.append(self.value(c, f"{path}.consts[{k}]"))
    return i

  def _copied(self, j):
    """The index of the jaxpr written before of which `j`, another object,
    is JAX's copy (Jaxpr.replace(): the same variables and eqns, which JAX's
    printer names alike), or None."""
    key = self._copy_key(j)
    for other, i in self.state.interned["jaxpr_copies"].get(key, ()):
      if (other is not j and _same_objects(other.eqns, j.eqns)
          and _same_objects(other.invars, j.invars)
          and _same_objects(other.constvars, j.constvars)
          and _same_objects(other.outvars, j.outvars) and other.effects == j.effects
          and other.debug_info == j.debug_info
          and getattr(other, "is_high", False) == getattr(j, "is_high", False)):
        return i
    return None

  @staticmethod
  def _copy_key(j):
    first = j.eqns[0] if j.eqns else (j.invars[0] if j.invars else None)
    return None if first is None else _memo.identity(first)

  def jaxpr(self, jaxpr, path: str) -> int:
    i, msg = self.state.reserve("jaxprs", id(jaxpr), jaxpr)  # reserved first: params may refer back
    if msg is not None:
      self._encode_jaxpr(jaxpr, msg, path)
    return i

  def _encode_jaxpr(self, jaxpr, msg: pb.Jaxpr, path: str) -> None:
    ids: dict = {}

    def define(v, where):
      if v in ids:
        raise EncodeError(f"variable {v} is defined twice", where)
      ids[v] = n = len(ids)
      return pb.Var(id=n, aval=self.aval(v.aval, where))

    def atom(x, where):
      if isinstance(x, compat.Literal):
        return pb.Atom(literal=self.literal(x, where))
      try:
        return pb.Atom(var=ids[x])
      except KeyError:
        raise EncodeError(f"variable {x} is used before it is defined", where) from None

    msg.constvars.extend(define(v, f"{path}.constvars[{k}]") for k, v in enumerate(jaxpr.constvars))
    msg.invars.extend(define(v, f"{path}.invars[{k}]") for k, v in enumerate(jaxpr.invars))
    cols = self._eqn_columns(jaxpr.eqns, ids, f"{path}." if path else "")
    if columns.write(msg, cols):
      self.state.features.add("eqn_columns")
    msg.outvars.extend(atom(x, f"{path}.outvars[{k}]") for k, x in enumerate(jaxpr.outvars))
    msg.effects.extend(effects.encode_effect(self, eff, ids, f"{path}.effects") for eff in effects.sorted_effects(jaxpr.effects, ids))
    if jaxpr.debug_info is not None and self.state.debug_info:
      msg.debug_info.CopyFrom(self.debug_info_msg(jaxpr.debug_info))
    if getattr(jaxpr, "is_high", False):
      msg.is_high = True

  def literal(self, x, where) -> pb.Literal:
    # A literal's value is plain data (1.0, 0, True, again and again): its
    # Value and the bytes it adds to the message are kept per process.
    try:
      key = (_memo.literal_key(x.val), names.generation())
    except _memo.NoKey:
      key = None
    value = self.state.memoized(_LITERAL_VALUES, key, lambda: self.value(x.val, where))
    return pb.Literal(value=value, aval=self.aval(x.aval, where))

  def _eqn_columns(self, eqns, ids: dict, prefix: str) -> columns.Columns:
    """The eqns as columns (lists), numbering the variables they define in
    `ids`. What repeats from eqn to eqn (a primitive, a params dict, an
    aval, a traceback, a name stack, a context) is looked up by identity
    first, and the error paths are built only on the slow paths."""
    st = self.state
    c = columns.Columns()
    c.unset = False
    prim_col, opc, ops, lits = c.primitive, c.operand_count, c.operands, c.literals = [], [], [], []
    resc, res, res_avals = c.result_count, c.results, c.result_avals = [], [], []
    parc, pars, effs = c.param_count, c.params, c.effects = [], [], {}
    tb_col, ns_col, ctx_col = c.traceback, c.name_stack, c.context = [], [], []
    memo = st.by_id  # identity(object) -> its index (or param indices); the objects are kept
    identity = _memo.identity
    keep = st.keep
    tb_seen = st.interned["tracebacks"]
    debug = st.debug_info
    for k, e in enumerate(eqns):
      p = e.primitive
      i = memo.get(identity(p))
      if i is None:
        i = memo[identity(p)] = self.primitive(p, f"{prefix}eqn[{k}]")
      prim_col.append(i)
      ins = e.invars
      opc.append(len(ins))
      for j, x in enumerate(ins):
        if isinstance(x, compat.Literal):
          ops.append(0)
          lits.append(self.literal(x, f"{prefix}eqn[{k}].invars[{j}]"))
          continue
        i = ids.get(x)
        if i is None:
          raise EncodeError(f"variable {x} is used before it is defined", f"{prefix}eqn[{k}].invars[{j}]")
        ops.append(i + 1)
      ps = e.params
      q = memo.get(identity(ps))
      if q is None:
        full = public_defaults.completed(e)
        if full is None:
          q = memo[identity(ps)] = param_codecs.encode_params(self, e, f"{prefix}eqn[{k}]")
          keep.append(ps)
        else:  # (not memoized: what it binds may depend on this eqn's operands)
          q = param_codecs.encode_params(self, e.replace(params=full), f"{prefix}eqn[{k}]")
      parc.append(len(q))
      pars.extend(q)
      if e.effects:
        effs[k] = [effects.encode_effect(self, eff, ids, f"{prefix}eqn[{k}].effects")
                   for eff in effects.sorted_effects(e.effects, ids)]
      si = e.source_info
      if debug:
        tb = si.traceback
        i = tb_seen.get(tb) if tb is not None else 0
        tb_col.append(i if i is not None else tracebacks.encode_traceback(self, tb))
        ns = si.name_stack
        i = memo.get(identity(ns))
        if i is None:
          i = memo[identity(ns)] = tracebacks.encode_name_stack(self, ns)
          keep.append(ns)
        ns_col.append(i)
      else:
        tb_col.append(0)
        ns_col.append(0)
      ctx = e.ctx
      i = memo.get(identity(ctx))
      if i is None:
        i = memo[identity(ctx)] = self._intern_context(ctx)
      ctx_col.append(i)
      outs = e.outvars
      resc.append(len(outs))
      for j, v in enumerate(outs):
        a = v.aval
        i = memo.get(identity(a))
        if i is None:
          i = memo[identity(a)] = self.aval(a, f"{prefix}eqn[{k}].outvars[{j}]")
          keep.append(a)
        res_avals.append(i)
        if isinstance(v, compat.DropVar):
          res.append(0)
        elif v in ids:
          raise EncodeError(f"variable {v} is defined twice", f"{prefix}eqn[{k}].outvars[{j}]")
        else:
          ids[v] = n = len(ids)
          res.append(n + 1)
    c.n = len(prim_col)
    return c

  def debug_info_msg(self, d) -> pb.DebugInfo:
    out = pb.DebugInfo(traced_for=d.traced_for, func_src_info=d.func_src_info or "")
    if d.arg_names is not None:
      out.arg_names.CopyFrom(_optional_strings(d.arg_names))
    paths = d.result_paths
    if callable(paths):
      paths = paths()
    if isinstance(paths, tuple):
      out.result_paths.CopyFrom(_optional_strings(paths))
    return out

  def symbolic_dim(self, d, path) -> str:
    return avals.encode_symbolic_dim(self, d, path)

  # --- values -------------------------------------------------------------
  # The generic value codec, as a method (no extra frame: values nest sub-jaxprs).
  value = values.encode


def _same_objects(xs, ys) -> bool:
  return len(xs) == len(ys) and all(x is y for x, y in zip(xs, ys))


def _optional_strings(xs) -> pb.OptionalStrings:
  out = pb.OptionalStrings()
  for i, x in enumerate(xs):
    if x is None:
      out.missing.append(i)
      out.values.append("")
    else:
      out.values.append(str(x))
  return out


def encode(closed_jaxpr, *, debug_info: bool = True, out_of_line=None,
           pickle_functions: bool = False) -> pb.Module:
  if not isinstance(closed_jaxpr, compat.ClosedJaxpr):
    raise EncodeError(f"expected a ClosedJaxpr, got {type(closed_jaxpr).__qualname__}")
  with paused_gc():
    return Encoder(debug_info=debug_info, out_of_line=out_of_line,
                   pickle_functions=pickle_functions).module(closed_jaxpr)
