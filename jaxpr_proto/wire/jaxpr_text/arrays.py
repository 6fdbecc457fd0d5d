"""An Array's bytes as the numbers a reader can edit, and back, exactly.

Each element is written in the shortest form that reads back to the same
bits in its dtype (`2.0`, `0.1`, `-inf`); a NaN other than the dtype's own
is `nan(0x7fc00001)`, its bits. What cannot be written so (sub-byte and
key types, float0, bytes that are not whole elements) is base64 of the
bytes instead: `format_elements` returns None for it.
"""
from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np

from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import dtypes as wire_dtypes

INLINE_MAX = 256  # arrays of up to this many elements are written as numbers


def _np_dtype(name: str):
  try:
    return np.dtype(getattr(ml_dtypes, name, None) or name).newbyteorder("<")
  except TypeError:
    return None


# The dtypes whose elements are written as numbers: whole bytes each.
NUMERIC: dict[int, np.dtype] = {}
for _num, _name in wire_dtypes.NAMES.items():
  _dt = _np_dtype(_name)
  if _dt is not None and _dt.itemsize > 0 and _num not in (
      pb.DTYPE_INT2, pb.DTYPE_UINT2, pb.DTYPE_INT4, pb.DTYPE_UINT4, pb.DTYPE_FLOAT4_E2M1FN):
    NUMERIC[_num] = _dt

# The element type of a typed Python scalar's bytes, whatever its dtype.
PYTHON_SCALAR = {pb.ARRAY_KIND_TYPED_INT: np.dtype("<i8"),
                 pb.ARRAY_KIND_TYPED_FLOAT: np.dtype("<f8"),
                 pb.ARRAY_KIND_TYPED_COMPLEX: np.dtype("<c16")}

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(x, dt) -> int:
  return int(np.array(x, dt).view(_UINT[dt.itemsize]))


def _float_text(x, dt) -> str:
  """The shortest decimal that reads back (as a Python float, then cast to
  `dt`) to the bits of `x`; NaNs other than the dtype's own by their bits."""
  f = float(x)
  bits = _bits(x, dt)
  if math.isnan(f):
    if bits == _bits(np.array(math.nan, dt), dt):
      return "nan"
    return f"nan(0x{bits:0{2 * dt.itemsize}x})"
  if math.isinf(f):
    return "inf" if f > 0 else "-inf"
  if dt == np.float64:
    return repr(f)
  with np.errstate(over="ignore", invalid="ignore"):
    for digits in range(1, 18):
      s = f"{f:.{digits}g}"
      if _bits(np.array(float(s), dt), dt) == bits:
        return _as_float(s)
  return _as_float(repr(f))  # exact: f is the element's value


def _as_float(s: str) -> str:
  """A decimal that reads as a float, not an int ('2' -> '2.0')."""
  return s if any(c in s for c in ".eEn") else s + ".0"


def element_text(x, dt) -> str:
  kind = dt.kind
  if kind == "b":
    return "True" if bool(x) else "False"
  if kind in "iu":
    return str(int(x))
  if kind == "c":
    part = np.dtype(f"<f{dt.itemsize // 2}")
    return f"complex({_float_text(x.real, part)}, {_float_text(x.imag, part)})"
  return _float_text(x, dt)


def format_elements(data: bytes, dt: np.dtype, n: int) -> list[str] | None:
  """The `n` elements of `data` in dtype `dt`, as text; None where the bytes
  are not n whole elements."""
  if len(data) != n * dt.itemsize:
    return None
  a = np.frombuffer(data, dt)
  return [element_text(x, dt) for x in a]


def element_bytes(values: list, dt: np.dtype) -> bytes:
  """The bytes of elements read from text: Python bools, ints, floats,
  complexes, or ("bits", int) for a NaN given by its bits. ValueError or
  OverflowError for one that is not of the dtype."""
  if dt.kind in "iu":
    info = np.iinfo(dt)
    out = []
    for v in values:
      if type(v) is not int or not info.min <= v <= info.max:
        raise ValueError(f"{v!r} is not a {dt.name}")
      out.append(v)
    return np.array(out, dt).tobytes()
  if dt.kind == "b":
    if any(type(v) is not bool for v in values):
      raise ValueError("elements of a bool array are True or False")
    return np.array(values, dt).tobytes()
  out = bytearray()
  for v in values:
    out += _float_bytes(v, dt)
  return bytes(out)


def _float_bytes(v, dt) -> bytes:
  if dt.kind == "c":
    if not isinstance(v, complex):
      raise ValueError(f"{v!r} is not a complex number")
    part = np.dtype(f"<f{dt.itemsize // 2}")
    return _float_bytes(v.real, part) + _float_bytes(v.imag, part)
  if isinstance(v, tuple) and v[0] == "bits":
    bits = v[1]
    if not 0 <= bits < 1 << (8 * dt.itemsize):
      raise ValueError(f"nan bits 0x{bits:x} do not fit a {dt.name}")
    return int(bits).to_bytes(dt.itemsize, "little")
  if type(v) is bool or not isinstance(v, (int, float)):
    raise ValueError(f"{v!r} is not a number")
  with np.errstate(over="ignore", invalid="ignore"):
    return np.array(float(v), dt).tobytes()


def python_scalar_text(data: bytes, kind: int) -> str | None:
  """A typed Python scalar's value (its bytes: int64, float64 or complex128)."""
  dt = PYTHON_SCALAR[kind]
  if len(data) != dt.itemsize:
    return None
  return element_text(np.frombuffer(data, dt)[0], dt)


def pack_float(v: float) -> bytes:
  return struct.pack("<d", v)
