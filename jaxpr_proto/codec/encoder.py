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
from jaxpr_proto.codec import avals, effects, param_codecs, sharding, tracebacks, values
from jaxpr_proto.codec.names import REGISTRY
from jaxpr_proto.codec.state import EncodeState
from jaxpr_proto.compat.change import same_value
from jaxpr_proto.errors import EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire.versions import stamp


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

  def param(self, msg: pb.Param) -> int:
    return self.state.intern("params", msg.SerializeToString(deterministic=True), lambda: msg)

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
  def closed_jaxpr(self, cj, path: str) -> int:
    i, msg = self.state.reserve("closed_jaxprs", id(cj), cj)
    if msg is not None:
      msg.jaxpr = self.jaxpr(cj.jaxpr, path)
      for k, c in enumerate(cj.consts):
        msg.consts.append(self.value(c, f"{path}.consts[{k}]"))
    return i

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
        return pb.Atom(literal=pb.Literal(value=self.value(x.val, where),
                                          aval=self.aval(x.aval, where)))
      try:
        return pb.Atom(var=ids[x])
      except KeyError:
        raise EncodeError(f"variable {x} is used before it is defined", where) from None

    msg.constvars.extend(define(v, f"{path}.constvars[{k}]") for k, v in enumerate(jaxpr.constvars))
    msg.invars.extend(define(v, f"{path}.invars[{k}]") for k, v in enumerate(jaxpr.invars))
    for k, e in enumerate(jaxpr.eqns):
      where = f"{path}.eqn[{k}]" if path else f"eqn[{k}]"
      out = msg.eqns.add()
      out.primitive = self.primitive(e.primitive, where)
      out.invars.extend(atom(x, f"{where}.invars[{j}]") for j, x in enumerate(e.invars))
      out.params.extend(param_codecs.encode_params(self, e, where))
      out.effects.extend(effects.encode_effect(self, eff, ids, f"{where}.effects") for eff in effects.sorted_effects(e.effects, ids))
      si = e.source_info
      out.traceback = tracebacks.encode_traceback(self, si.traceback)
      out.name_stack = tracebacks.encode_name_stack(self, si.name_stack)
      out.context = self._intern_context(e.ctx)
      for j, v in enumerate(e.outvars):
        if isinstance(v, compat.DropVar):
          out.outvars.add(drop=pb.DropVar(aval=self.aval(v.aval, f"{where}.outvars[{j}]")))
        else:
          out.outvars.add(var=define(v, f"{where}.outvars[{j}]"))
    msg.outvars.extend(atom(x, f"{path}.outvars[{k}]") for k, x in enumerate(jaxpr.outvars))
    msg.effects.extend(effects.encode_effect(self, eff, ids, f"{path}.effects") for eff in effects.sorted_effects(jaxpr.effects, ids))
    if jaxpr.debug_info is not None and self.state.debug_info:
      msg.debug_info.CopyFrom(self.debug_info_msg(jaxpr.debug_info))
    if getattr(jaxpr, "is_high", False):
      msg.is_high = True

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
  return Encoder(debug_info=debug_info, out_of_line=out_of_line,
                 pickle_functions=pickle_functions).module(closed_jaxpr)
