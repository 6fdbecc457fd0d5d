"""Per-primitive param codecs.

Most params are plain data and go through the generic value codec
(`values`). The params listed in PARAM_CODECS hold Python callables (custom
rules, reduce's computation) and are written by their own codec instead;
FIXUPS rebuild what depends on several params once all are decoded.
"""
from __future__ import annotations

from jaxpr_proto import compat
from jaxpr_proto.codec import callbacks, custom_rules, custom_vmap, extensions, names, pallas, policies
from jaxpr_proto.compat import memo
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _rule_param(encode_rule, attr):
  """A param that refers to a custom rule in Module.rules."""
  def encode(enc, value, eqn, path):
    return pb.Value(rule=encode_rule(enc, eqn, path))

  def decode(dec, msg, path):
    if msg.WhichOneof("kind") != "rule":
      raise DecodeError("expected a custom rule reference", path)
    rule = dec.rule(msg.rule, path)
    if not hasattr(rule, attr):  # another kind of rule (a jvp rule for a vjp param)
      raise DecodeError(f"rules[{msg.rule}] is a {type(rule).__name__}, which has no {attr}", path)
    return getattr(rule, attr)
  return encode, decode


def _custom_call():
  """A custom_jvp/custom_vjp call_jaxpr: a closed jaxpr written as any other,
  but once for equal copies (custom_rules.call_content)."""
  def encode(enc, value, eqn, path):
    if not isinstance(value, compat.ClosedJaxpr):
      return enc.value(value, path)
    return pb.Value(closed_jaxpr=enc.closed_jaxpr(value, path, custom_rules.call_content(enc, value)))

  def decode(dec, msg, path):
    return dec.value(msg, path)
  return encode, decode


def _reduce_computation():
  """reduce's Python `computation`: rebuilt on load from its `jaxpr` param
  (see FIXUPS), keeping the function's name for printing."""
  codec = "jax::reduce_computation"

  def encode(enc, value, eqn, path):
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return extensions.param_value(enc, codec, [("name", name)], path)

  def decode(dec, msg, path):
    name = extensions.param_fields(dec, msg, codec, ("name",), path).get("name")
    if not isinstance(name, str):
      raise DecodeError(f"expected a {codec} with a str name", path)
    return name  # the name; the fixup builds the function
  return encode, decode


def _linear_call_transpose():
  """linear_call's transpose_thunk, a Python thunk: called at encode time (as
  JAX's transpose rule would call it), and saved as what it returns, the
  transpose's closed jaxpr and its consts; on load, a thunk returning them."""
  codec = "jax::linear_call_transpose"

  def encode(enc, value, eqn, path):
    try:
      transpose, consts = value()
      custom_rules._check_no_tracers(consts)
    except Exception as e:
      raise EncodeError(f"linear_call's transpose could not be traced: {type(e).__name__}: {e}",
                        path) from None
    fields = [("transpose", transpose), ("consts", tuple(consts)),
              ("name", getattr(value, "__qualname__", "transpose_thunk"))]
    return extensions.param_value(enc, codec, fields, path)

  def decode(dec, msg, path):
    fields = extensions.param_fields(dec, msg, codec, ("transpose", "consts", "name"), path)
    transpose, consts, name = fields.get("transpose"), fields.get("consts"), fields.get("name")
    if set(fields) != {"transpose", "consts", "name"} or not isinstance(
        transpose, compat.ClosedJaxpr) or type(consts) is not tuple or not isinstance(name, str):
      raise DecodeError(f"{codec} needs a closed jaxpr transpose, a tuple of consts and a "
                        "str name", path)
    def thunk():
      return transpose, list(consts)
    thunk.__qualname__ = name  # printed as the original's
    return thunk
  return encode, decode


# (primitive name, param name) -> (encode, decode)
PARAM_CODECS = {
    ("custom_jvp_call", "call_jaxpr"): _custom_call(),
    ("custom_vjp_call", "call_jaxpr"): _custom_call(),
    ("custom_jvp_call", "jvp_jaxpr_fun"): _rule_param(custom_rules.encode_jvp_rule, "thunk"),
    ("custom_vjp_call", "fwd_jaxpr_thunk"): _rule_param(custom_rules.encode_vjp_rule, "fwd_thunk"),
    ("custom_vjp_call", "bwd"): _rule_param(custom_rules.encode_vjp_rule, "bwd"),
    ("custom_vjp_call", "out_trees"): _rule_param(custom_rules.encode_vjp_rule, "out_trees"),
    ("custom_lin", "bwd"): _rule_param(custom_rules.encode_lin_rule, "bwd"),
    ("reduce", "computation"): _reduce_computation(),
    **callbacks.PARAM_CODECS,
    ("linear_call", "transpose_thunk"): _linear_call_transpose(),
    ("custom_vmap_call", "rule"): (custom_vmap.encode, custom_vmap.decode),
    **pallas.PARAM_CODECS,
}


def _reduce_fixup(params, path):
  jaxpr = params.get("jaxpr")
  if not isinstance(jaxpr, compat.ClosedJaxpr):
    raise DecodeError("reduce needs a closed jaxpr param 'jaxpr'", path)
  params["computation"] = custom_rules.computation_from_jaxpr(jaxpr, params.get("computation"))


def _custom_vmap_fixup(params, path):
  if isinstance(params.get("in_tree"), compat.PyTreeDef):
    params["in_tree"] = compat.tracing_treedef(params["in_tree"])
  custom_vmap.fixup(params, path)


def _remat_fixup(params, path):
  policy = params.get("policy")
  if policy is None or type(policy).__module__ == "jaxpr_proto.check.checker":  # (told already)
    return
  why = policies.problem(policy)  # (JAX calls it only under vjp: 'str' is not callable there)
  if why:
    raise DecodeError(f"remat's policy: {why}", f"{path}.params.policy")


# Per-primitive fixups run after all params are decoded.
FIXUPS = {"reduce": _reduce_fixup, "custom_vmap_call": _custom_vmap_fixup, "remat2": _remat_fixup}


# (a param's name, its value by memo.value_key, names.generation()) -> the
# Param's bytes (see EncodeState.memoized): a param of plain data, written
# without referring to any table of the Module (an aval, a primitive, a
# jaxpr), is the same bytes in every Module. Most params are such, and
# writing them was most of an encoder's time.
_PLAIN = memo.memo()


def encode_params(enc, eqn, path) -> list[int]:
  """Indices into Module.params of the eqn's params, in JAX's order, each
  interned as it is written."""
  name, st, generation = eqn.primitive.name, enc.state, names.generation()
  out = []
  for k, v in eqn.params.items():
    codec = PARAM_CODECS.get((name, k))
    try:
      key = None if codec else (k, memo.value_key(v), generation)
    except memo.NoKey:
      key = None
    data = st.memoized(_PLAIN, key, lambda: _param_bytes(enc, eqn, k, v, codec, path))
    out.append(enc.param_bytes(data))
  return out


def _param_bytes(enc, eqn, k, v, codec, path) -> bytes:
  where = f"{path}.params.{k}"
  value = codec[0](enc, v, eqn, where) if codec else enc.value(v, where)
  return pb.Param(name=k, value=value).SerializeToString(deterministic=True)


def decode_params(dec, prim_name, indices, path) -> dict:
  params = {}
  for i in indices:
    name, value = dec.param(i, prim_name, path)
    if name in params:
      raise DecodeError(f"param {name!r} given twice", f"{path}.params.{name}")
    params[name] = value
  fixup = FIXUPS.get(prim_name)
  if fixup is not None:
    fixup(params, path)
  return params


# Param values decoded from tables of their Module: not plain data.
_FROM_TABLES = (compat.ShapedArray, compat.AbstractToken, compat.Primitive)


def is_plain(v) -> bool:
  """Whether a decoded param value is plain data: immutable values with an
  exact key (compat.memo.value_key), none of them read from a Module's tables;
  its Param's bytes mean the same value in every Module."""
  try:
    memo.value_key(v)
  except memo.NoKey:
    return False
  return _no_table_value(v)


def _no_table_value(v) -> bool:
  if isinstance(v, tuple):
    return all(map(_no_table_value, v))
  return not isinstance(v, _FROM_TABLES)


def decode_param(dec, prim_name, msg, path):
  codec = PARAM_CODECS.get((prim_name, msg.name))
  return codec[1](dec, msg.value, path) if codec else dec.value(msg.value, path)
