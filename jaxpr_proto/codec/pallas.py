"""Pallas kernels: the params of `pallas_call`, encode and decode side by side.

A pallas_call eqn holds its kernel (`jaxpr`, whose inputs are refs in
Pallas's memory spaces), its `grid_mapping` (the grid, and for each input
and output a BlockMapping: its block shape, its index map as a closed jaxpr,
the whole array's type), its scratch shapes, compiler and cost params, and
`interpret` and `name`. Pallas's plain data (block dims, memory spaces,
compiler params, cost estimates) is written by the generic value codec as
allow-listed enums and records (`compat.pallas.PARAM_TYPES`); GridMapping
and BlockMapping, which hold Python callables and validate what they are
built from, are Extensions (`jax::pallas.GridMapping`,
`jax::pallas.BlockMapping`, and `jax::pallas.Ref` for the ref types among
their avals) that decoding builds field by field, each field checked for its
type. How the fields fit together (the kernel's signature against the
blocks, the index maps' against the grid) is checked by the param rule of
pallas_call (`check/param_rules.py`).

Pallas is never imported here: its types are registered with `names` as
its modules are imported, by the user or, where a file names Pallas's
primitives or types, by `names` itself (from `compat.optional`'s fixed
table of JAX's modules).
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing

import jax

from jaxpr_proto import compat
from jaxpr_proto.codec import extensions, names
from jaxpr_proto.compat import pallas as cp
from jaxpr_proto.errors import DecodeError, EncodeError, VersionError

FEATURE = "pallas"
_GRID_MAPPING = "jax::pallas.GridMapping"
_BLOCK_MAPPING = "jax::pallas.BlockMapping"
_REF = "jax::pallas.Ref"

# A grid of more steps than this, or a block dim beyond it, is refused (an
# int32 loop counter runs the grid, and block sizes are array dims).
MAX_GRID = (1 << 31) - 1

# --- refs among a GridMapping's avals ------------------------------------------------

class _Ref:
  """An AbstractRef inside a Pallas mapping, written by its inner type and
  memory space (the generic value codec writes array types only)."""
  __slots__ = ("ref",)

  def __init__(self, ref):
    self.ref = ref


def _avals_out(avals, path):
  out = []
  for k, a in enumerate(avals):
    if cp.is_abstract_ref(a):
      if a.kind is not None:
        raise EncodeError(f"a ref of kind {a.kind!r} is not supported", f"{path}[{k}]")
      out.append(_Ref(a))
    else:
      out.append(a)
  return tuple(out)


def _ref_fields(v):
  if type(v) is not _Ref:
    return None
  return _REF, [("inner", v.ref.inner_aval), ("memory_space", v.ref.memory_space)]


def _memory_space_ok(ms) -> bool:
  if ms is None:
    return True
  if not isinstance(ms, enum.Enum):
    return False
  name = names.ENUMS.name(type(ms))
  return name is not None and name.startswith("jax::pallas.") and name.endswith("MemorySpace")


def _build_ref(codec, fields, path):
  inner, ms = fields.get("inner"), fields.get("memory_space")
  if set(fields) != {"inner", "memory_space"} or type(inner) is not compat.ShapedArray \
      or not _memory_space_ok(ms):
    raise DecodeError(f"{_REF} needs an array type (inner) and a Pallas memory space or None",
                      path)
  return cp.abstract_ref(inner, ms)


# --- BlockMapping ------------------------------------------------------------------------

def _block_mapping_fields(v):
  if not cp.is_block_mapping(v):
    return None

  def fields(path):
    f = cp.block_mapping_fields(v)
    if not cp.is_abstract_ref(f["transformed_block_aval"]):
      raise EncodeError("a BlockMapping whose block type is not a ref is not supported", path)
    f["transformed_block_aval"] = _avals_out([f["transformed_block_aval"]], path)[0]
    f["transforms"] = tuple(f["transforms"])
    return list(f.items())
  return _BLOCK_MAPPING, fields


def _is_block_dim(d) -> bool:
  return cp.block_dim_size(d) is not None and _int_in(cp.block_dim_size(d), 1, MAX_GRID) and (
      not hasattr(d, "padding") or (type(d.padding) is tuple and len(d.padding) == 2
                                    and all(_int_in(p, 0, MAX_GRID) for p in d.padding)))


def _int_in(x, lo, hi) -> bool:
  return type(x) is int and lo <= x <= hi


def _closed(j):
  """A closed jaxpr of `j` (a file of JAX >= 0.11 writes closed jaxprs as
  jaxprs, which JAX 0.10 decodes open)."""
  if isinstance(j, compat.ClosedJaxpr):
    return j
  if isinstance(j, compat.Jaxpr):
    return compat.ClosedJaxpr(j, [])
  return None


def _build_block_mapping(codec, f, path):
  want = set(cp._BLOCK_MAPPING_FIELDS)
  if set(f) != want:
    raise DecodeError(f"{_BLOCK_MAPPING} needs fields {sorted(want)}, got {sorted(f)}", path)
  f = dict(f)
  f["index_map_jaxpr"] = _closed(f["index_map_jaxpr"])
  checks = [
      ("block_shape", type(f["block_shape"]) is tuple and all(map(_is_block_dim, f["block_shape"])),
       "a tuple of block dims (Blocked, Element, Squeezed, ...) of sizes from 1"),
      ("transformed_block_aval", cp.is_abstract_ref(f["transformed_block_aval"]), "a ref type"),
      ("index_map_jaxpr", f["index_map_jaxpr"] is not None, "a closed jaxpr"),
      ("index_map_out_tree", isinstance(f["index_map_out_tree"], jax.tree_util.PyTreeDef),
       "a pytree structure"),
      ("array_aval", type(f["array_aval"]) is compat.ShapedArray, "an array type"),
      ("origin", type(f["origin"]) is str, "a str"),
      ("transforms", f["transforms"] == (), "empty (block transforms are not supported)"),
      ("pipeline_mode", f["pipeline_mode"] is None or type(f["pipeline_mode"]).__name__ == "Buffered",
       "None or a Buffered"),
      ("debug", type(f["debug"]) is bool, "a bool"),
  ]
  for name, ok, what in checks:
    if not ok:
      raise DecodeError(f"{_BLOCK_MAPPING}.{name} must be {what}", f"{path}.{name}")
  try:
    return cp.make_block_mapping(**f)
  except Exception as e:
    raise DecodeError(f"cannot build a BlockMapping: {type(e).__name__}: {e}", path) from None


# --- GridMapping -------------------------------------------------------------------------

def _grid_mapping_fields(v):
  if not cp.is_grid_mapping(v):
    return None

  def fields(path):
    f = cp.grid_mapping_fields(v)
    for k in ("get_grid_indices", "local_grid_env"):
      if f.pop(k) is not None:
        raise EncodeError(f"a GridMapping with a {k} function is not supported", f"{path}.{k}")
    if any(cp.is_dynamic_grid_dim(d) or type(d) is not int for d in f["grid"]):
      raise EncodeError(f"a grid of dynamic or symbolic sizes is not supported ({f['grid']})",
                        f"{path}.grid")
    f["block_mappings"] = tuple(f["block_mappings"])
    f["index_map_avals"] = _avals_out(f["index_map_avals"], f"{path}.index_map_avals")
    f["scratch_avals"] = _avals_out(f["scratch_avals"], f"{path}.scratch_avals")
    return list(f.items())
  return _GRID_MAPPING, fields


def _is_aval(a) -> bool:
  return type(a) is compat.ShapedArray or cp.is_abstract_ref(a)


def _build_grid_mapping(codec, f, path):
  want = set(cp._GRID_MAPPING_FIELDS) - {"get_grid_indices", "local_grid_env"}
  if set(f) != want:
    raise DecodeError(f"{_GRID_MAPPING} needs fields {sorted(want)}, got {sorted(f)}", path)
  grid = f["grid"]
  checks = [
      ("grid", type(grid) is tuple and all(_int_in(d, 0, MAX_GRID) for d in grid),
       f"a tuple of sizes from 0 to {MAX_GRID}"),
      ("grid_names", f["grid_names"] is None or (
          type(f["grid_names"]) is tuple and len(f["grid_names"]) == len(grid)
          and all(type(n) in (str, int) for n in f["grid_names"])),
       "None or a name (str or int) for each grid axis"),
      ("block_mappings", type(f["block_mappings"]) is tuple and all(
          cp.is_block_mapping(b) for b in f["block_mappings"]), "a tuple of BlockMappings"),
      ("index_map_tree", isinstance(f["index_map_tree"], jax.tree_util.PyTreeDef),
       "a pytree structure"),
      ("index_map_avals", type(f["index_map_avals"]) is tuple and all(
          map(_is_aval, f["index_map_avals"])), "a tuple of types"),
      ("vmapped_dims", type(f["vmapped_dims"]) is tuple and len(set(f["vmapped_dims"])) == len(
          f["vmapped_dims"]) and all(_int_in(d, 0, len(grid) - 1) for d in f["vmapped_dims"]),
       "distinct axes of the grid"),
      ("scratch_avals", type(f["scratch_avals"]) is tuple and all(
          map(_is_aval, f["scratch_avals"])), "a tuple of types"),
      ("num_index_operands", _int_in(f["num_index_operands"], 0, MAX_GRID), "a count"),
      ("num_inputs", _int_in(f["num_inputs"], 0, MAX_GRID), "a count"),
      ("num_outputs", _int_in(f["num_outputs"], 0, MAX_GRID), "a count"),
      ("debug", type(f["debug"]) is bool, "a bool"),
  ]
  for name, ok, what in checks:
    if not ok:
      raise DecodeError(f"{_GRID_MAPPING}.{name} must be {what}", f"{path}.{name}")
  steps = 1
  for d in grid:
    steps *= d
  if steps > MAX_GRID:
    raise DecodeError(f"a grid of {steps} steps is beyond {MAX_GRID}", f"{path}.grid")
  try:
    return cp.make_grid_mapping(**f)
  except Exception as e:
    raise DecodeError(f"cannot build a GridMapping: {type(e).__name__}: {e}", path) from None


extensions.register(_ref_fields, lambda name: name == _REF, _build_ref, feature=FEATURE)
extensions.register(_block_mapping_fields, lambda name: name == _BLOCK_MAPPING,
                    _build_block_mapping, feature=FEATURE)
extensions.register(_grid_mapping_fields, lambda name: name == _GRID_MAPPING,
                    _build_grid_mapping, feature=FEATURE)


# --- pallas_call's params ------------------------------------------------------------------

def _newer_fields(dec, msg, path) -> None:
  """A record of a Pallas type written by another JAX with fields this JAX's
  class lacks (compiler params gain fields from one minor to the next) is a
  VersionError naming them."""
  if msg.WhichOneof("kind") != "record" or not msg.record.type.startswith("jax::pallas."):
    return
  cls = names.RECORDS.get(msg.record.type)
  if cls is None or dec.upgrader is None:
    return
  known = {f.name for f in dataclasses.fields(cls) if f.init} if dataclasses.is_dataclass(cls) else None
  extra = sorted(f.name for f in msg.record.fields if known is not None and f.name not in known)
  if extra:
    raise VersionError(f"{msg.record.type} has fields {', '.join(extra)}, which the "
                       f"{cls.__qualname__} of JAX {jax.__version__} lacks "
                       f"({dec.upgrader.describe()})", path)


def _typed(param, ok, what):
  """A param codec: the generic value codec, and a decoded value of the type
  `ok` admits."""
  def encode(enc, value, eqn, path):
    return enc.value(value, path)

  def decode(dec, msg, path):
    _newer_fields(dec, msg, path)
    v = dec.value(msg, path)
    if not ok(v):
      raise DecodeError(f"pallas_call's {param} must be {what}", path)
    return v
  return encode, decode


def _record_of(*class_names):
  def ok(v):
    name = names.RECORDS.name(type(v))
    return name is not None and name.startswith("jax::pallas.") and (
        name.rsplit(".", 1)[-1] in class_names) and _fields_ok(v)
  return ok


def _fields_ok(v) -> bool:
  """Each field of a Pallas record of the type its class declares, where
  that is a Literal (InterpretParams' modes: the interpreter raises on any
  other), a bool or an int (a count: from 0; a number of cores from 1; an
  optional int, None or an int64)."""
  try:
    hints = typing.get_type_hints(type(v))
  except Exception:  # annotations naming what this process has not loaded
    return True
  for f in dataclasses.fields(v):
    x, t = getattr(v, f.name), hints.get(f.name)
    options = typing.get_args(t) if typing.get_origin(t) in (typing.Union, types.UnionType) else (t,)
    literals = [a for o in options if typing.get_origin(o) is typing.Literal
                for a in typing.get_args(o)]
    if literals and x not in literals and not (x is None and type(None) in options):
      return False
    if t is bool and type(x) is not bool:
      return False
    if t is int and not (type(x) is int and x >= (1 if f.name.startswith("num_") else 0)):
      return False
    if set(options) == {int, type(None)} and x is not None and not (
        type(x) is int and _INT64[0] <= x <= _INT64[1]):  # (an optional int: a seed, a size)
      return False
  return True


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _kernel(v) -> bool:
  return isinstance(v, compat.Jaxpr) or isinstance(v, compat.ClosedJaxpr)


def _metadata():
  def encode(enc, value, eqn, path):
    if value is None:
      return enc.value(None, path)
    if not cp.is_frozen_dict(value):
      raise EncodeError(f"pallas_call's metadata {value!r} is not a FrozenDict", path)
    return enc.value(dict(value), path)

  def decode(dec, msg, path):
    v = dec.value(msg, path)
    if v is None:
      return None
    if type(v) is not dict or not all(type(k) is str and type(x) is str for k, x in v.items()):
      raise DecodeError("pallas_call's metadata must be None or a dict of strs", path)
    return cp.frozen_dict(v)
  return encode, decode


_COMPILER_PARAMS = _record_of("CompilerParams")
_INTERPRET_PARAMS = _record_of("InterpretParams")

PARAM_CODECS = {
    ("pallas_call", "jaxpr"): _typed("jaxpr", _kernel, "a jaxpr"),
    ("pallas_call", "grid_mapping"): _typed("grid_mapping", cp.is_grid_mapping, "a GridMapping"),
    ("pallas_call", "compiler_params"): _typed(
        "compiler_params", lambda v: v is None or _COMPILER_PARAMS(v),
        "None or the CompilerParams of a Pallas backend"),
    ("pallas_call", "cost_estimate"): _typed(
        "cost_estimate", lambda v: v is None or _record_of("CostEstimate")(v),
        "None or a CostEstimate"),
    # (InterpretParams' grid_point_recorder, a function, only as None.)
    ("pallas_call", "interpret"): _typed(
        "interpret", lambda v: type(v) is bool or (
            _INTERPRET_PARAMS(v) and getattr(v, "grid_point_recorder", None) is None),
        "a bool or InterpretParams (without a grid_point_recorder)"),
    ("pallas_call", "metadata"): _metadata(),
}
