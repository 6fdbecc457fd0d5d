"""numpy / JAX dtypes <-> the schema's Dtype enum (named in `wire.dtypes`)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import dtypes as wire_dtypes

# The dtypes numpy / ml_dtypes name, by the schema's names (float0 is JAX's).
_NAMED = {name: num for num, name in wire_dtypes.NAMES.items() if name != "float0"}


def _np_dtype(name):
  try:
    return np.dtype(getattr(ml_dtypes, name, None) or name)
  except TypeError:
    return None


# Only the dtypes that this numpy/ml_dtypes install knows take part.
_TO_ENUM: dict[np.dtype, int] = {}
_FROM_ENUM: dict[int, np.dtype] = {}
for _name, _num in _NAMED.items():
  _dt = _np_dtype(_name)
  if _dt is not None:
    _TO_ENUM[_dt] = _num
    _FROM_ENUM[_num] = _dt
_TO_ENUM[np.dtype(compat.float0)] = pb.DTYPE_FLOAT0
_FROM_ENUM[pb.DTYPE_FLOAT0] = np.dtype(compat.float0)

# Bits per element of the sub-byte types, which are packed in Array.data.
SUB_BYTE_BITS = {pb.DTYPE_INT2: 2, pb.DTYPE_UINT2: 2, pb.DTYPE_INT4: 4,
                 pb.DTYPE_UINT4: 4, pb.DTYPE_FLOAT4_E2M1FN: 4}


def encode_dtype(dtype, path: str = "") -> tuple[int, str]:
  """Returns (Dtype enum number, key impl name or "")."""
  if compat.is_key_dtype(dtype):
    return pb.DTYPE_KEY, compat.key_impl_name(dtype)
  try:
    return _TO_ENUM[np.dtype(dtype)], ""
  except (KeyError, TypeError):
    raise EncodeError(f"unsupported dtype {dtype!r}", path) from None


def decode_dtype(num: int, key_impl: str = "", path: str = ""):
  if num == pb.DTYPE_KEY:
    return compat.key_dtype(key_impl, path)
  try:
    return _FROM_ENUM[num]
  except KeyError:
    name = pb.Dtype.Name(num) if num in pb.Dtype.values() else str(num)
    raise DecodeError(f"unknown or unsupported dtype {name}", path) from None


def _jnp_scalar_types():
  import jax.numpy as jnp
  out = {}
  for name in _NAMED:
    t = getattr(jnp, name, None)
    if isinstance(t, type) and isinstance(getattr(t, "dtype", None), np.dtype):
      out[np.dtype(t.dtype)] = t
  return out


_JNP_SCALAR_TYPES = _jnp_scalar_types()


def jnp_scalar_type(dtype):
  """The jax.numpy scalar type (jnp.float32, ...) of a numpy dtype, or None."""
  return _JNP_SCALAR_TYPES.get(np.dtype(dtype))


def by_name() -> dict[str, np.dtype]:
  """{name: dtype} of the dtypes this install knows, by full and short name
  ('float32' and 'f32'), as command lines and argument specs spell them."""
  out = {}
  for name, num in _NAMED.items():
    dt = _FROM_ENUM.get(num)
    if dt is not None:
      out[name] = out[wire_dtypes.short_name(name)] = dt
  return out
