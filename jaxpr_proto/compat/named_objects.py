"""The objects that the value codec writes by name: PRNG implementations,
named-axis and other effects, the JAX modules whose types params may hold,
JAX's own pytree nodes and enums, devices."""
from __future__ import annotations

import jax
from jax._src import core
from jax._src.random import prng
from jax._src.state import types as state_types

from jaxpr_proto.compat.checkify_errors import CHECKIFY_EXCEPTIONS, CheckifyError


def is_prng_impl_obj(x) -> bool:
  return isinstance(x, prng.PRNGImpl)


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


def platform_devices(platform: str) -> list:
  """This process's devices of `platform` (a CPU device on a TPU host is not
  among `jax.local_devices()`, which are the default backend's), or the
  default backend's where this process has no such platform (a TPU file
  read on a CPU)."""
  try:
    return jax.local_devices(backend=platform)
  except RuntimeError:  # (JAX's answer to a backend it has not initialized)
    return jax.local_devices()


def local_device(platform: str, index: int):
  devs = platform_devices(platform)
  return devs[index % len(devs)] if devs else None


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
