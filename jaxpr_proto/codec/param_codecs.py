"""Per-primitive param codecs, and the extension codecs of the value codec.

Most params are plain data and go through the generic value codec. The
params listed in PARAM_CODECS hold Python callables (custom rules) and are
written by their own codec instead. EXTENSIONS handles objects that are
neither plain data nor allow-listed records: PRNG implementations and remat
policies built by closures.
"""
from __future__ import annotations

import types

import jax

from jaxpr_proto import compat
from jaxpr_proto.codec import custom_rules
from jaxpr_proto.compat import standins
from jaxpr_proto.errors import DecodeError, EncodeError, VersionError
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _rule_param(encode_rule, attr):
  """A param that refers to a custom rule in Module.rules."""
  def encode(enc, value, eqn, path):
    return pb.Value(rule=encode_rule(enc, eqn, path))

  def decode(dec, msg, path):
    if msg.WhichOneof("kind") != "rule":
      raise DecodeError("expected a custom rule reference", path)
    return getattr(dec.rule(msg.rule, path), attr)
  return encode, decode


def _reduce_computation():
  """reduce's Python `computation`: rebuilt on load from its `jaxpr` param
  (see FIXUPS), keeping the function's name for printing."""
  codec = "jax::reduce_computation"

  def encode(enc, value, eqn, path):
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return pb.Value(extension=pb.Extension(
        codec=codec, fields=[pb.RecordField(name="name", value=pb.Value(str=name))]))

  def decode(dec, msg, path):
    ext = msg.extension if msg.WhichOneof("kind") == "extension" else None
    if ext is None or ext.codec != codec or len(ext.fields) != 1 or ext.fields[0].name != "name" \
        or ext.fields[0].value.WhichOneof("kind") != "str":
      raise DecodeError(f"expected a {codec} with a str name", path)
    return ext.fields[0].value.str  # the name; the fixup builds the function
  return encode, decode


# (primitive name, param name) -> (encode, decode)
PARAM_CODECS = {
    ("custom_jvp_call", "jvp_jaxpr_fun"): _rule_param(custom_rules.encode_jvp_rule, "thunk"),
    ("custom_vjp_call", "fwd_jaxpr_thunk"): _rule_param(custom_rules.encode_vjp_rule, "fwd_thunk"),
    ("custom_vjp_call", "bwd"): _rule_param(custom_rules.encode_vjp_rule, "bwd"),
    ("custom_vjp_call", "out_trees"): _rule_param(custom_rules.encode_vjp_rule, "out_trees"),
    ("custom_lin", "bwd"): _rule_param(custom_rules.encode_lin_rule, "bwd"),
    ("reduce", "computation"): _reduce_computation(),
}


def _reduce_fixup(params, path):
  jaxpr = params.get("jaxpr")
  if not isinstance(jaxpr, compat.ClosedJaxpr):
    raise DecodeError("reduce needs a closed jaxpr param 'jaxpr'", path)
  params["computation"] = custom_rules.computation_from_jaxpr(jaxpr, params.get("computation"))


# Per-primitive fixups run after all params are decoded.
FIXUPS = {"reduce": _reduce_fixup}


def encode_params(enc, eqn, path) -> list[int]:
  """Indices into Module.params of the eqn's params, in JAX's order."""
  out = []
  name = eqn.primitive.name
  for k, v in eqn.params.items():
    where = f"{path}.params.{k}"
    codec = PARAM_CODECS.get((name, k))
    value = codec[0](enc, v, eqn, where) if codec else enc.value(v, where)
    out.append(enc.param(pb.Param(name=k, value=value)))
  return out


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


def decode_param(dec, prim_name, msg, path):
  codec = PARAM_CODECS.get((prim_name, msg.name))
  return codec[1](dec, msg.value, path) if codec else dec.value(msg.value, path)


# --- extensions --------------------------------------------------------------

def _closure_args(fn, factory, argnames):
  """The factory arguments that built the closure `fn`, or None."""
  probe = factory(*([None] * len(argnames)))
  if (not isinstance(fn, types.FunctionType) or not isinstance(probe, types.FunctionType)
      or fn.__code__ is not probe.__code__):
    return None
  cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
  return [cells.get(a) for a in argnames]


def _policy_extension(v):
  if not isinstance(v, types.FunctionType):
    return None
  for name, (factory, argnames) in compat.policy_factories().items():
    args = _closure_args(v, factory, argnames)
    if args is not None:
      return name, list(zip(argnames, args))
  return None


def extension_for(v):
  """(codec name, [(field, value)]) for an extension-coded value, or None."""
  if compat.is_prng_impl_obj(v):
    return "jax::prng_impl", [("name", v.name)]
  if isinstance(v, compat.Device):
    # Devices are written by platform and local index, and bound on load.
    same = [d for d in jax.local_devices() if d.platform == v.platform]
    return "jax::device", [("platform", v.platform), ("index", same.index(v) if v in same else v.id)]
  ft = compat.flattree_fields(v)
  if ft is not None:
    return f"jax::flattree.{ft[0]}", ft[1]
  if isinstance(v, TracedFunction):
    return "jax::function", v.fields
  if compat.is_hiprim(v):
    return "jax::hiprim", lambda path: _hiprim_fields(v, path)  # computed (or refused) in encode_extension
  return _policy_extension(v)


def _hiprim_fields(v, path):
  for name, (cls, _) in compat.HIPRIMS.items():
    if type(v) is cls:
      if v.effects:
        raise EncodeError(f"HiJAX primitive {name} with effects {v.effects} is not supported", path)
      params = dict(v.params)
      for p, in_avals in compat.hiprim_functions(v).items():
        params[p] = TracedFunction(params[p], in_avals)
      return [("type", name), ("in_avals", tuple(v.in_avals)), ("out_aval", v.out_aval),
              ("params", params)]
  raise EncodeError(
      f"HiJAX primitive {type(v).__module__}.{type(v).__qualname__} is not supported "
      f"(jaxpr_proto rebuilds only {', '.join(sorted(compat.HIPRIMS)) or 'none'} on JAX "
      f"{jax.__version__}; custom_root's holds Python functions)", path)


class TracedFunction:
  """A Python function param of a HiJAX primitive (custom_root's f, solve,
  ...), called with pytrees of the given avals: written as the jaxpr it
  traces to, read back as a function that evaluates that jaxpr."""
  __slots__ = ("fn", "in_avals")

  def __init__(self, fn, in_avals):
    self.fn, self.in_avals = fn, in_avals

  def fields(self, path):
    source = getattr(self.fn, "_jaxpr_proto_source", None)
    if source is not None:  # a function this package decoded: written as it was read
      return list(zip(("jaxpr", "in_tree", "out_tree"), source))

    def sds(a):
      return jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
    args = jax.tree.map(sds, self.in_avals)
    try:
      cj, out_shape = jax.make_jaxpr(self.fn, return_shape=True)(*args)
    except Exception as e:
      raise EncodeError(f"cannot trace the function {getattr(self.fn, '__name__', self.fn)!r}: "
                        f"{type(e).__name__}: {e}", path) from None
    return [("jaxpr", cj), ("in_tree", jax.tree.structure(args)),
            ("out_tree", jax.tree.structure(out_shape))]


def _decode_function(fields: dict, path: str):
  if set(fields) != {"jaxpr", "in_tree", "out_tree"}:
    raise DecodeError(f"jax::function needs fields jaxpr, in_tree, out_tree; got {sorted(fields)}", path)
  cj, in_tree, out_tree = fields["jaxpr"], fields["in_tree"], fields["out_tree"]
  if (not isinstance(cj, compat.ClosedJaxpr) or not isinstance(in_tree, jax.tree_util.PyTreeDef)
      or not isinstance(out_tree, jax.tree_util.PyTreeDef)
      or in_tree.num_leaves != len(cj.in_avals) or out_tree.num_leaves != len(cj.out_avals)):
    raise DecodeError("jax::function: its trees do not match its jaxpr", path)
  run = compat.jaxpr_as_fun(cj)

  def function(*args):
    leaves = jax.tree.leaves(args)
    if len(leaves) != in_tree.num_leaves:
      raise TypeError(f"expected {in_tree.num_leaves} inputs, got {len(leaves)}")
    return jax.tree.unflatten(out_tree, run(*leaves))
  function.__name__ = function.__qualname__ = "jaxpr_proto_function"
  function._jaxpr_proto_source = (cj, in_tree, out_tree)
  return function


def _decode_hiprim(fields: dict, path: str):
  if set(fields) != {"type", "in_avals", "out_aval", "params"}:
    raise DecodeError(f"jax::hiprim needs fields type, in_avals, out_aval, params; got {sorted(fields)}", path)
  name, in_avals, params = fields["type"], fields["in_avals"], fields["params"]
  entry = compat.HIPRIMS.get(name) if isinstance(name, str) else None
  if entry is None:
    raise VersionError(f"HiJAX primitive {name!r} is not known to JAX {jax.__version__}", path)
  if not isinstance(in_avals, tuple) or not isinstance(params, dict) or not all(
      isinstance(k, str) for k in params):
    raise DecodeError("jax::hiprim needs a tuple of in_avals and a dict of params", path)
  try:
    prim = entry[1](in_avals, fields["out_aval"], params)
  except Exception as e:  # the constructor's own checks
    raise DecodeError(f"cannot build {name}: {type(e).__name__}: {e}", path) from None
  if prim.out_aval != fields["out_aval"]:  # what the eqn's outputs are typed by
    raise DecodeError(f"{name}: out_aval {fields['out_aval']} does not follow from its inputs "
                      f"and params ({prim.out_aval})", path)
  return prim


def _decode_flattree(kind: str, fields: dict, path: str):
  expected = compat.FLATTREE_FIELDS.get(kind)
  if expected is None:
    raise DecodeError(f"unknown FlatTree kind {kind!r}", path)
  if set(fields) != set(expected):
    raise DecodeError(f"jax::flattree.{kind} needs fields {list(expected)}, got {sorted(fields)}", path)
  build = compat.FLATTREE_BUILDERS.get(kind)
  if build is None:  # a JAX without FlatTrees: for the upgraders
    for name, want in expected.items():
      if want is not None and not isinstance(fields[name], want):
        raise DecodeError(f"jax::flattree.{kind}.{name} must be a {want.__name__}", path)
    return standins.FlatTreeStandIn(kind, fields)
  try:
    return build(fields)
  except Exception as e:  # the constructors assert their parts' types
    raise DecodeError(f"cannot build jax::flattree.{kind}: {type(e).__name__}: {e}", path) from None


def encode_extension(enc, v, path) -> pb.Extension:
  name, fields = extension_for(v)
  if callable(fields):  # computed here, where the path is known
    fields = fields(path)
  out = pb.Extension(codec=name)
  for f, x in fields:
    out.fields.add(name=f, value=enc.value(x, f"{path}.{f}"))
  return out


def decode_extension(dec, msg: pb.Extension, path):
  fields = {f.name: dec.value(f.value, f"{path}.{f.name}") for f in msg.fields}
  if msg.codec == "jax::device":
    platform, index = fields.get("platform"), fields.get("index")
    if not isinstance(platform, str) or not isinstance(index, int) or index < 0:
      raise DecodeError("device needs a str platform and an int index", path)
    return compat.local_device(platform, index)
  if msg.codec == "jax::prng_impl":
    name = fields.get("name")
    if not isinstance(name, str):
      raise DecodeError("prng_impl needs a str name", path)
    return compat.key_impl(name, path)
  if msg.codec == "jax::hiprim":
    return _decode_hiprim(fields, path)
  if msg.codec == "jax::function":
    return _decode_function(fields, path)
  if msg.codec.startswith("jax::flattree."):
    return _decode_flattree(msg.codec[len("jax::flattree."):], fields, path)
  factory = compat.policy_factories().get(msg.codec)
  if factory is None:
    raise DecodeError(f"unknown extension codec {msg.codec!r}", path)
  fn, argnames = factory
  if set(fields) != set(argnames):
    raise DecodeError(f"{msg.codec} needs fields {argnames}, got {sorted(fields)}", path)
  try:
    return fn(*(fields[a] for a in argnames))
  except Exception as e:
    raise DecodeError(f"cannot build {msg.codec}: {e}", path) from None
