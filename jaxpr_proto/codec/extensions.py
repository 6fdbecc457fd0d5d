"""Extensions: values that are neither plain data nor allow-listed records,
each written and read by one registered `Extension` (both directions at once,
like torch export's ExtensionHandler): PRNG implementations and devices by
name, FlatTrees, functions and HiJAX primitives as the jaxprs they hold, and
remat policies built by closures as their factory's arguments.

An Extension message names its codec and holds fields of the generic value
codec; decoding looks the codec up here and builds only what it names.
"""
from __future__ import annotations

import dataclasses
import math
import types
from typing import Callable

import jax

from jaxpr_proto import compat
from jaxpr_proto.codec import names, policies
from jaxpr_proto.compat import standins
from jaxpr_proto.errors import DecodeError, EncodeError, VersionError
from jaxpr_proto.v1 import jaxpr_pb2 as pb


@dataclasses.dataclass(frozen=True)
class Extension:
  """One kind of extension value."""
  # value -> (codec name, fields) if the value is of this kind, else None;
  # fields are [(name, value)], or a function of the path that gives them.
  fields_of: Callable[[object], tuple | None]
  owns: Callable[[str], bool]  # whether a codec name is this kind's
  build: Callable[[str, dict, str], object]  # (codec name, fields, path) -> value
  feature: str | None = None  # the format feature a file writing it needs


EXTENSIONS: list[Extension] = []


def register(fields_of, owns, build, feature: str | None = None) -> None:
  """Registers a kind of extension; a file that writes one of its codecs
  lists `feature` in Module.required_features (wire.versions)."""
  EXTENSIONS.append(Extension(fields_of, owns, build, feature))
  names.note_change()


# Fields added after their codec, which an older reader refuses: a file that
# writes one lists the feature in Module.required_features (wire.versions).
_FIELD_FEATURES = {("jax::function", "name"): "function_names"}


def encode(enc, v, path) -> pb.Extension | None:
  """The Extension message of `v`, or None when no extension writes it."""
  for e in EXTENSIONS:
    got = e.fields_of(v)
    if got is not None:
      name, fields = got
      if callable(fields):  # computed here, where the path is known
        fields = fields(path)
      out = pb.Extension(codec=name)
      if e.feature:
        enc.state.features.add(e.feature)
      for f, x in fields:
        out.fields.add(name=f, value=enc.value(x, f"{path}.{f}"))
        feature = _FIELD_FEATURES.get((name, f))
        if feature:
          enc.state.features.add(feature)
      return out
  return None


def decode(dec, msg: pb.Extension, path):
  fields = {f.name: dec.value(f.value, f"{path}.{f.name}") for f in msg.fields}
  for e in EXTENSIONS:
    if e.owns(msg.codec):
      return e.build(msg.codec, fields, path)
  raise DecodeError(f"unknown extension codec {msg.codec!r}", path)


def param_value(enc, codec: str, fields, path) -> pb.Value:
  """The Value of a per-primitive param codec's Extension: `fields` are
  [(name, value)], each written by the generic value codec."""
  return pb.Value(extension=pb.Extension(codec=codec, fields=[
      pb.RecordField(name=f, value=enc.value(v, f"{path}.{f}")) for f, v in fields]))


def param_fields(dec, msg: pb.Value, codec: str, allowed, path) -> dict:
  """{name: value} of a param codec's Extension named `codec`, each field
  one of `allowed`, at most once."""
  ext = msg.extension if msg.WhichOneof("kind") == "extension" else None
  if ext is None or ext.codec != codec:
    raise DecodeError(f"expected a {codec} extension", path)
  fields = {}
  for f in ext.fields:
    if f.name in fields or f.name not in allowed:
      raise DecodeError(f"{codec} field {f.name!r} is unknown or given twice", path)
    fields[f.name] = dec.value(f.value, f"{path}.{f.name}")
  return fields


def _named(codec: str) -> Callable[[str], bool]:
  return lambda name: name == codec


# --- PRNG implementations and devices, by name ------------------------------------

def _build_prng_impl(codec, fields, path):
  name = fields.get("name")
  if not isinstance(name, str):
    raise DecodeError("prng_impl needs a str name", path)
  return compat.key_impl(name, path)


register(lambda v: ("jax::prng_impl", [("name", v.name)]) if compat.is_prng_impl_obj(v) else None,
         _named("jax::prng_impl"), _build_prng_impl)


def _device_fields(v):
  # Devices are written by platform and local index, and bound on load.
  if not isinstance(v, compat.Device):
    return None
  same = compat.platform_devices(v.platform)
  return "jax::device", [("platform", v.platform), ("index", same.index(v) if v in same else v.id)]


def _build_device(codec, fields, path):
  platform, index = fields.get("platform"), fields.get("index")
  if not isinstance(platform, str) or not isinstance(index, int) or index < 0:
    raise DecodeError("device needs a str platform and an int index", path)
  return compat.local_device(platform, index)


register(_device_fields, _named("jax::device"), _build_device)


# A SingleDeviceSharding (a callback's result sharding): its device, bound on load
# as devices are, and its memory kind.
def _single_device_sharding_fields(v):
  if type(v) is not jax.sharding.SingleDeviceSharding:
    return None
  (device,) = v.device_set
  return "jax::single_device_sharding", [("device", device), ("memory_kind", v.memory_kind)]


def _build_single_device_sharding(codec, fields, path):
  device, kind = fields.get("device"), fields.get("memory_kind")
  if not isinstance(device, compat.Device) or not (kind is None or isinstance(kind, str)):
    raise DecodeError("single_device_sharding needs a device and a str or None memory kind", path)
  if kind is not None and kind not in {m.kind for m in device.addressable_memories()}:
    raise DecodeError(f"memory kind {kind!r} is none of {device}'s", path)
  return jax.sharding.SingleDeviceSharding(device, memory_kind=kind)


register(_single_device_sharding_fields, _named("jax::single_device_sharding"),
         _build_single_device_sharding)


# --- lax.Tolerance: a unary op's accuracy (`lax.exp(x, accuracy=Tolerance(...))`) ----

def _tolerance_fields(v):
  if type(v) is not jax.lax.Tolerance:
    return None
  return "jax::tolerance", [("atol", v.atol), ("rtol", v.rtol), ("ulps", v.ulps)]


def _build_tolerance(codec, fields, path):
  # Lowering hands these to StableHLO's ResultAccuracyAttr: two finite
  # doubles and an int64.
  atol, rtol, ulps = fields.get("atol"), fields.get("rtol"), fields.get("ulps")
  if set(fields) != {"atol", "rtol", "ulps"}:
    raise DecodeError(f"tolerance needs the fields atol, rtol and ulps, got {sorted(fields)}", path)
  for name, x in (("atol", atol), ("rtol", rtol)):
    # (-0.0 too: StableHLO's verifier refuses a negative zero)
    if type(x) not in (float, int) or not 0 <= x < float("inf") or math.copysign(1, x) < 0:
      raise DecodeError(f"tolerance's {name} must be a finite non-negative number, got {x!r}", path)
  if type(ulps) is not int or not 0 <= ulps < 1 << 63:
    raise DecodeError(f"tolerance's ulps must be an int64 >= 0, got {ulps!r}", path)
  try:
    return jax.lax.Tolerance(atol=atol, rtol=rtol, ulps=ulps)
  except ValueError as e:  # all three zero
    raise DecodeError(f"cannot build a tolerance: {e}", path) from None


register(_tolerance_fields, _named("jax::tolerance"), _build_tolerance)


# --- FlatTrees (JAX >= 0.11's scan ft_in / ft_out) -----------------------------------

_FLATTREE = "jax::flattree."


def _flattree_fields(v):
  ft = compat.flattree_fields(v)
  return None if ft is None else (_FLATTREE + ft[0], ft[1])


def _build_flattree(codec: str, fields: dict, path: str):
  kind = codec[len(_FLATTREE):]
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


register(_flattree_fields, lambda name: name.startswith(_FLATTREE), _build_flattree)


# --- functions and HiJAX primitives (JAX >= 0.11), as the jaxprs they hold -----------

def _hiprim_fields(v, path):
  for name, (cls, _) in compat.HIPRIMS.items():
    if type(v) is cls:
      if v.effects:
        raise EncodeError(f"HiJAX primitive {name} with effects {v.effects} is not supported", path)
      params = dict(v.params)
      for p, (in_avals, _, _) in compat.hiprim_functions(v).items():
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
    name = getattr(self.fn, "__qualname__", None)
    name = [("name", name)] if isinstance(name, str) else []  # JAX prints it
    source = getattr(self.fn, "_jaxpr_proto_source", None)
    if source is not None:  # a function this package decoded: written as it was read
      return list(zip(("jaxpr", "in_tree", "out_tree"), source)) + name

    def sds(a):
      return jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
    args = jax.tree.map(sds, self.in_avals)
    try:
      cj, out_shape = jax.make_jaxpr(self.fn, return_shape=True)(*args)
    except Exception as e:
      raise EncodeError(f"cannot trace the function {getattr(self.fn, '__name__', self.fn)!r}: "
                        f"{type(e).__name__}: {e}", path) from None
    return [("jaxpr", cj), ("in_tree", jax.tree.structure(args)),
            ("out_tree", jax.tree.structure(out_shape))] + name


def _build_function(codec: str, fields: dict, path: str):
  if not {"jaxpr", "in_tree", "out_tree"} <= set(fields) <= {"jaxpr", "in_tree", "out_tree", "name"}:
    raise DecodeError("jax::function needs fields jaxpr, in_tree, out_tree (and a name); "
                      f"got {sorted(fields)}", path)
  name = fields.get("name", "jaxpr_proto_function")  # files written before names were kept
  if not isinstance(name, str) or len(name) > 200:
    raise DecodeError("jax::function's name must be a string of at most 200 characters", path)
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
  function.__qualname__, function.__name__ = name, name.rsplit(".", 1)[-1]
  function._jaxpr_proto_source = (cj, in_tree, out_tree)
  return function


def _build_hiprim(codec: str, fields: dict, path: str):
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
  for p, (args, outs, as_tangents) in compat.hiprim_functions(prim).items():
    why = _function_misfit(prim.params.get(p), args, outs, as_tangents)
    if why:
      raise DecodeError(f"{name}'s {p} {why}", f"{path}.params.{p}")
  return prim


def _function_misfit(fn, args, outs, as_tangents):
  """Why the decoded function `fn` cannot be called with pytrees of avals
  `args` and return avals `outs` (its outputs' tangent avals, where
  as_tangents), or None."""
  source = getattr(fn, "_jaxpr_proto_source", None)
  if source is None:
    return "is not a function"
  cj, in_tree, out_tree = source
  leaves, tree = jax.tree.flatten(args)
  if tree != in_tree:
    return f"takes arguments {in_tree} where it is called with {tree}"
  for k, (a, b) in enumerate(zip(cj.in_avals, leaves)):
    if not compat.typecompat(a, b):
      return f"takes {a.str_short()} as input {k} where it is called with {b.str_short()}"
  leaves, tree = jax.tree.flatten(outs)
  if tree != out_tree:
    return f"returns {out_tree} where {tree} is expected"
  for k, (a, b) in enumerate(zip(cj.out_avals, leaves)):
    if not compat.typecompat(a.to_tangent_aval() if as_tangents else a, b):
      return f"returns {a.str_short()} as output {k} where {b.str_short()} is expected"
  return None


register(lambda v: ("jax::function", v.fields) if isinstance(v, TracedFunction) else None,
         _named("jax::function"), _build_function)
register(lambda v: ("jax::hiprim", lambda path: _hiprim_fields(v, path)) if compat.is_hiprim(v) else None,
         _named("jax::hiprim"), _build_hiprim)


# --- remat policies that JAX builds as closures ---------------------------------------

def _policy_extension(v):
  name = compat.policy_factory_of(v) if isinstance(v, types.FunctionType) else None
  if name is None:
    return None
  _, argnames = compat.policy_factories()[name]
  cells = dict(zip(v.__code__.co_freevars, (c.cell_contents for c in v.__closure__ or ())))
  return name, [(a, cells.get(a)) for a in argnames]


def _build_policy(codec, fields, path):
  fn, argnames = compat.policy_factories()[codec]
  if set(fields) != set(argnames):
    raise DecodeError(f"{codec} needs fields {argnames}, got {sorted(fields)}", path)
  bad = policies.build_problem(codec, fields)  # (JAX calls the policy only under vjp)
  if bad is not None:
    raise DecodeError(f"{codec}'s {bad[0]} {bad[1]}", f"{path}.{bad[0]}")
  try:
    return fn(**{a: fields[a] for a in argnames})
  except Exception as e:
    raise DecodeError(f"cannot build {codec}: {e}", path) from None


register(_policy_extension, lambda name: name in compat.policy_factories(), _build_policy)
