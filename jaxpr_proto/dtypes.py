"""The stable table between numpy/JAX dtypes and the schema's Dtype enum."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from jaxpr_proto import _jax
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

_D = pb.Dtype
_NAMED = {
    "bool": _D.DTYPE_BOOL, "int8": _D.DTYPE_INT8, "int16": _D.DTYPE_INT16,
    "int32": _D.DTYPE_INT32, "int64": _D.DTYPE_INT64, "uint8": _D.DTYPE_UINT8,
    "uint16": _D.DTYPE_UINT16, "uint32": _D.DTYPE_UINT32,
    "uint64": _D.DTYPE_UINT64, "float16": _D.DTYPE_FLOAT16,
    "float32": _D.DTYPE_FLOAT32, "float64": _D.DTYPE_FLOAT64,
    "bfloat16": _D.DTYPE_BFLOAT16, "complex64": _D.DTYPE_COMPLEX64,
    "complex128": _D.DTYPE_COMPLEX128, "int2": _D.DTYPE_INT2,
    "int4": _D.DTYPE_INT4, "uint2": _D.DTYPE_UINT2, "uint4": _D.DTYPE_UINT4,
    "float8_e3m4": _D.DTYPE_FLOAT8_E3M4, "float8_e4m3": _D.DTYPE_FLOAT8_E4M3,
    "float8_e4m3b11fnuz": _D.DTYPE_FLOAT8_E4M3B11FNUZ,
    "float8_e4m3fn": _D.DTYPE_FLOAT8_E4M3FN,
    "float8_e4m3fnuz": _D.DTYPE_FLOAT8_E4M3FNUZ,
    "float8_e5m2": _D.DTYPE_FLOAT8_E5M2,
    "float8_e5m2fnuz": _D.DTYPE_FLOAT8_E5M2FNUZ,
    "float8_e8m0fnu": _D.DTYPE_FLOAT8_E8M0FNU,
    "float4_e2m1fn": _D.DTYPE_FLOAT4_E2M1FN,
    "float6_e2m3fn": _D.DTYPE_FLOAT6_E2M3FN,
    "float6_e3m2fn": _D.DTYPE_FLOAT6_E3M2FN,
}


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
_TO_ENUM[np.dtype(_jax.float0)] = _D.DTYPE_FLOAT0
_FROM_ENUM[_D.DTYPE_FLOAT0] = np.dtype(_jax.float0)

# Bits per element of the sub-byte types, which are packed in Array.data.
SUB_BYTE_BITS = {_D.DTYPE_INT2: 2, _D.DTYPE_UINT2: 2, _D.DTYPE_INT4: 4,
                 _D.DTYPE_UINT4: 4, _D.DTYPE_FLOAT4_E2M1FN: 4}


def encode_dtype(dtype, path: str = "") -> tuple[int, str]:
  """Returns (Dtype enum number, key impl name or "")."""
  if _jax.is_key_dtype(dtype):
    return _D.DTYPE_KEY, _jax.key_impl_name(dtype)
  try:
    return _TO_ENUM[np.dtype(dtype)], ""
  except (KeyError, TypeError):
    raise EncodeError(f"unsupported dtype {dtype!r}", path) from None


def decode_dtype(num: int, key_impl: str = "", path: str = ""):
  if num == _D.DTYPE_KEY:
    return _jax.key_dtype(key_impl, path)
  try:
    return _FROM_ENUM[num]
  except KeyError:
    name = pb.Dtype.Name(num) if num in pb.Dtype.values() else str(num)
    raise DecodeError(f"unknown or unsupported dtype {name}", path) from None


def dtype_name(num: int) -> str:
  return pb.Dtype.Name(num)[len("DTYPE_"):].lower() if num in pb.Dtype.values() else str(num)


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
