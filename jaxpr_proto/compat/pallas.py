"""Pallas (`jax._src.pallas`) for the codec, lazily: nothing here imports
Pallas. The names registry imports it (from `compat.optional`'s table) where
a file names its `pallas_call` primitive or one of its param types and the
process has not imported it yet; then, and in a process that imported it
itself, these functions give the codec Pallas's classes and enums, looked
up in `sys.modules` only.

Pallas's own classes are the same in JAX 0.10, 0.11 and 0.12 where the codec
uses them (GridMapping, BlockMapping, the block dims); the compiler params
gained fields from one minor to the next (a file that sets one reads only
where the field exists).
"""
from __future__ import annotations

import sys

import jax

CORE = "jax._src.pallas.core"
PALLAS_CALL = "jax._src.pallas.pallas_call"

# The Pallas classes whose values pallas_call's params hold as plain data:
# written by the generic value codec as enums and records, by the name
# `jax::<module less jax._src.>.<class>` (as names.py names JAX's own).
# An explicit list: Pallas's modules hold other dataclasses too (BlockSpec
# with its index_map function, meshes, lowering contexts), which a file must
# never build.
PARAM_TYPES = {
    "jax._src.pallas.core": (
        "Blocked", "Element", "Squeezed", "BoundedSlice", "Indirect", "Buffered",
        "RevisitMode", "CostEstimate", "MemorySpace"),
    "jax._src.pallas.primitives": ("DeviceIdType",),
    "jax._src.pallas.mosaic.core": (
        "CompilerParams", "MemorySpace", "GridDimensionSemantics", "SemaphoreType", "CoreType",
        "KernelType", "SideEffectType"),
    "jax._src.pallas.mosaic.interpret.params": ("InterpretParams", "LoggingMode"),
    "jax._src.pallas.triton.core": ("CompilerParams",),
    "jax._src.pallas.mosaic_gpu.core": ("CompilerParams", "MemorySpace", "SemaphoreType",
                                        "TraceScope"),
    "jax.experimental.mosaic.gpu.core": ("LoweringSemantics",),
}
PARAM_TYPE_PREFIX = "jax._src."


def loaded() -> bool:
  """Whether this process has imported Pallas's pallas_call."""
  return PALLAS_CALL in sys.modules and CORE in sys.modules


def _core():
  return sys.modules.get(CORE)


def param_types(modules=None) -> dict[str, type]:
  """{registered name: class} of the PARAM_TYPES this process has imported
  (of the modules `modules` only, where given)."""
  out = {}
  for mod_name, classes in PARAM_TYPES.items():
    mod = sys.modules.get(mod_name) if modules is None or mod_name in modules else None
    if mod is None:
      continue
    short = mod_name.removeprefix(PARAM_TYPE_PREFIX).removeprefix("jax.")
    for cls_name in classes:
      cls = getattr(mod, cls_name, None)
      if isinstance(cls, type) and cls.__module__ == mod_name:
        out[f"jax::{short}.{cls.__qualname__}"] = cls
  return out


def is_grid_mapping(v) -> bool:
  core = _core()
  return core is not None and type(v) is core.GridMapping


def is_block_mapping(v) -> bool:
  core = _core()
  return core is not None and type(v) is core.BlockMapping


def grid_mapping_fields(gm) -> dict:
  """The init fields of a GridMapping, by name."""
  return {f: getattr(gm, f) for f in _GRID_MAPPING_FIELDS}


_GRID_MAPPING_FIELDS = ("grid", "grid_names", "block_mappings", "index_map_tree",
                        "index_map_avals", "vmapped_dims", "scratch_avals",
                        "num_index_operands", "num_inputs", "num_outputs",
                        "get_grid_indices", "local_grid_env", "debug")
_BLOCK_MAPPING_FIELDS = ("block_shape", "transformed_block_aval", "index_map_jaxpr",
                         "index_map_out_tree", "array_aval", "origin", "transforms",
                         "pipeline_mode", "debug")


def block_mapping_fields(bm) -> dict:
  return {f: getattr(bm, f) for f in _BLOCK_MAPPING_FIELDS}


def make_grid_mapping(**fields):
  """A GridMapping (Pallas's constructor, which checks nothing itself)."""
  return _core().GridMapping(**fields)


def make_block_mapping(**fields):
  """A BlockMapping; one whose index map has consts allows them."""
  jaxpr = fields["index_map_jaxpr"]
  return _core().BlockMapping(**fields, allow_captured_consts=bool(getattr(jaxpr, "consts", ())))


def block_dim_types() -> tuple:
  """(Blocked, Element, Squeezed, BoundedSlice, Indirect) of this JAX."""
  core = _core()
  return tuple(getattr(core, n) for n in ("Blocked", "Element", "Squeezed", "BoundedSlice",
                                          "Indirect") if hasattr(core, n))


def is_squeezed(d) -> bool:
  return type(d) is _core().Squeezed


def block_dim_size(d):
  """The size of a block dim (1 for Squeezed), or None for another value."""
  if type(d) not in block_dim_types():
    return None
  return 1 if is_squeezed(d) else d.block_size


def is_dynamic_grid_dim(d) -> bool:
  core = _core()
  return core is not None and d is getattr(core, "dynamic_grid_dim", object())


def frozen_dict(d: dict):
  """pallas_call's metadata: a FrozenDict of strs."""
  from jax._src.frozen_dict import FrozenDict  # loaded with Pallas
  return FrozenDict(d)


def is_frozen_dict(v) -> bool:
  fd = sys.modules.get("jax._src.frozen_dict")
  return fd is not None and type(v) is fd.FrozenDict


def abstract_ref(inner, memory_space):
  from jax._src.state import types as state_types
  return state_types.AbstractRef(inner, memory_space)


def is_abstract_ref(v) -> bool:
  from jax._src.state import types as state_types
  return type(v) is state_types.AbstractRef


def is_pallas_call(prim) -> bool:
  mod = sys.modules.get(PALLAS_CALL)
  return mod is not None and prim is getattr(mod, "pallas_call_p", None)


INDEX_DTYPES = ("int32", "int64")
JAX_VERSION = jax.__version__
