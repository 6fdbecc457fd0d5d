"""Arrays: numpy, JAX and typed-scalar values as Array messages (little-endian
bytes; sub-byte types packed; PRNG keys as their key data)."""
from __future__ import annotations

import functools
import math

import jax
import ml_dtypes
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.codec.dtypes import SUB_BYTE_BITS, decode_dtype, encode_dtype
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import external

# A float0 array carries no bytes, so its size is not bounded by the file's.
_MAX_FLOAT0_ELEMENTS = 1 << 24
_MAX_ELEMENTS = 1 << 40


def num_elements(shape, path):
  n = 1
  for d in shape:
    if d < 0:
      raise DecodeError(f"negative dimension {d} in shape {list(shape)}", path)
    n *= d
    if n > _MAX_ELEMENTS:
      raise DecodeError(f"shape {list(shape)} is too large", path)
  return n


def _pack(a: np.ndarray, bits: int) -> bytes:
  u = a.reshape(-1).view(np.uint8) & ((1 << bits) - 1)
  per = 8 // bits
  u = np.concatenate([u, np.zeros((-len(u)) % per, np.uint8)]).reshape(-1, per)
  out = np.zeros(len(u), np.uint8)
  for i in range(per):
    out |= u[:, i] << (i * bits)
  return out.tobytes()


def _unpack(data: bytes, n: int, bits: int, dtype) -> np.ndarray:
  per = 8 // bits
  b = np.frombuffer(data, np.uint8)
  parts = [(b >> (i * bits)) & ((1 << bits) - 1) for i in range(per)]
  u = np.stack(parts, axis=1).reshape(-1)[:n]
  signed = np.dtype(dtype).name.startswith("int")
  if signed:  # sign-extend into the byte, so that view() gives the value
    u = np.where(u >= (1 << (bits - 1)), u | (0xFF << bits) & 0xFF, u).astype(np.uint8)
  return u.view(dtype)


# Typed Python scalars keep their Python value at full precision.
_TYPED_SCALAR_BUFFERS = {pb.ARRAY_KIND_TYPED_INT: np.dtype("<i8"),
                         pb.ARRAY_KIND_TYPED_FLOAT: np.dtype("<f8"),
                         pb.ARRAY_KIND_TYPED_COMPLEX: np.dtype("<c16")}


# What one message can hold: protobuf refuses to write or read more than 2 GiB.
MAX_INLINE_BYTES = (1 << 31) - (64 << 20)


def too_big(nbytes: int, path: str, saving: bool = False) -> EncodeError:
  how = ("give jp.save a smaller external_min_bytes, so that more arrays go to its data file"
         if saving else "save the program with jp.save(program, path), which stores "
         "big arrays in a data file beside the .jaxpb")
  return EncodeError(f"{nbytes / 2**30:.1f} GiB of array data do not fit in one protobuf "
                     f"message (2 GiB at most): {how}", path)


def encode_array(x, kind: int, path: str, out_of_line=None) -> pb.Array:
  """The Array message of `x`; its bytes go to `out_of_line` (a
  wire.external.Sink) instead when it has one and they are that big."""
  out = pb.Array(kind=kind)
  buf = _TYPED_SCALAR_BUFFERS.get(kind)
  if buf is not None:
    out.dtype, out.key_impl = encode_dtype(x.dtype, path)
    try:
      out.data = np.array(x, buf).tobytes()
    except OverflowError:
      raise EncodeError(f"typed scalar {x!r} does not fit {buf}", path) from None
    return out
  if compat.is_key_array(x):
    out.dtype, out.key_impl = encode_dtype(x.dtype, path)
    out.shape.extend(x.shape)
    x = compat.key_data(x)
  else:
    x = np.asarray(x)
    out.dtype, out.key_impl = encode_dtype(x.dtype, path)
    out.shape.extend(x.shape)
  if out.dtype == pb.DTYPE_FLOAT0:
    return out
  bits = SUB_BYTE_BITS.get(out.dtype)
  if bits:
    data = np.frombuffer(_pack(np.ascontiguousarray(x), bits), np.uint8)
  else:
    x = np.ascontiguousarray(x)
    if x.dtype.byteorder == ">":
      x = x.byteswap().view(x.dtype.newbyteorder("<"))
    data = x.reshape(-1).view(np.uint8)  # the array's own memory: no copy
  if out_of_line is not None and out_of_line.takes(data.nbytes):
    out.external.CopyFrom(out_of_line.put(data))
  elif data.nbytes > MAX_INLINE_BYTES:
    raise too_big(data.nbytes, path, saving=out_of_line is not None)
  else:
    out.data = data.tobytes()
  return out


def _bytes_of(msg: pb.Array, path: str, source):
  """The array's bytes: `data`, or a view of where `external` says they are."""
  if not msg.HasField("external"):
    return msg.data
  if msg.data:
    raise DecodeError("an array has bytes both in data and in external", path)
  return (source or external.Nowhere()).view(msg.external, f"{path}.external")


def decode_array_np(msg: pb.Array, path: str, source=None):
  """Returns the numpy value of an Array message (key data for key arrays);
  `source` (a wire.external.Source) has the bytes of external arrays."""
  shape = tuple(msg.shape)
  n = num_elements(shape, path)
  buf = _TYPED_SCALAR_BUFFERS.get(msg.kind)
  data = _bytes_of(msg, path, source)
  if buf is not None:
    if shape or len(data) != buf.itemsize:
      raise DecodeError("a typed scalar needs shape () and one value", path)
    return np.frombuffer(data, buf)[0], decode_dtype(msg.dtype, msg.key_impl, path)
  if msg.dtype == pb.DTYPE_KEY:
    impl = compat.key_impl(msg.key_impl, path)
    kshape = tuple(impl.key_shape)
    want = n * math.prod(kshape) * 4
    if len(data) != want:
      raise DecodeError(f"key array data has {len(data)} bytes, expected {want}", path)
    return np.frombuffer(data, "<u4").reshape(shape + kshape)
  dtype = decode_dtype(msg.dtype, msg.key_impl, path)
  if msg.dtype == pb.DTYPE_FLOAT0:
    if len(data):
      raise DecodeError("float0 array must carry no data", path)
    return np.zeros(shape, dtype)
  bits = SUB_BYTE_BITS.get(msg.dtype)
  if bits:
    want = -(-n * bits // 8)
    if len(data) != want:
      raise DecodeError(f"array data has {len(data)} bytes, expected {want}", path)
    return _unpack(data, n, bits, dtype).reshape(shape)
  want = n * dtype.itemsize
  if len(data) != want:
    raise DecodeError(
        f"array data has {len(data)} bytes, expected {want} for "
        f"{dtype.name}{list(shape)}", path)
  return np.frombuffer(data, dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(shape)


def decode_array(msg: pb.Array, path: str, source=None):
  """The value of an Array message, of the Python type its kind names. An
  external array stays a view of its source's memory (a mapped file) where
  its kind allows: a numpy array read-only, a jax.Array placed without a copy
  on CPU."""
  if msg.dtype == pb.DTYPE_FLOAT0 and num_elements(msg.shape, path) > _MAX_FLOAT0_ELEMENTS:
    raise DecodeError(f"float0 array of shape {list(msg.shape)} is too large", path)
  x = decode_array_np(msg, path, source)
  in_place = msg.HasField("external")
  kind = msg.kind
  typed = _TYPED_SCALARS.get(kind)
  if typed is not None:
    value, dtype = x
    cls, py, category = typed
    limits = _typed_limits(dtype, category)
    if limits is None:
      raise DecodeError(f"a {cls.__name__} cannot have dtype {dtype}", path)
    if limits and not limits[0] <= value <= limits[1]:
      raise DecodeError(f"{value} does not fit in {dtype}", path)
    return cls(py(value), dtype)
  if msg.dtype == pb.DTYPE_KEY:
    if kind != pb.ARRAY_KIND_JAX:
      raise DecodeError("key arrays must be jax arrays", path)
    return compat.wrap_key_data(x, msg.key_impl)
  if kind == pb.ARRAY_KIND_NUMPY_UNSPECIFIED:
    return x if in_place else x.copy()
  if kind == pb.ARRAY_KIND_JAX:
    # device_put uses aligned host memory in place on CPU; asarray copies.
    return jax.device_put(x) if in_place else jax.numpy.asarray(x)
  if kind == pb.ARRAY_KIND_NUMPY_SCALAR:
    if x.shape != ():
      raise DecodeError("a numpy scalar must have shape ()", path)
    return x[()]
  if kind == pb.ARRAY_KIND_TYPED_NDARRAY:
    return compat.typed_ndarray(x if in_place else x.copy())
  raise DecodeError(f"unknown array kind {kind}", path)


@functools.lru_cache(maxsize=None)
def _typed_limits(dtype, category):
  """None where a typed scalar of `category` cannot have `dtype`; else the
  (min, max) of an integer dtype (ml_dtypes' iinfo: numpy's refuses int4
  and int2), or () for the others."""
  if not jax.numpy.issubdtype(dtype, category):
    return None
  if category is np.integer:
    info = ml_dtypes.iinfo(dtype)
    return int(info.min), int(info.max)
  return ()


# kind: (class, Python type, the dtypes it may have)
_TYPED_SCALARS = {pb.ARRAY_KIND_TYPED_INT: (compat.TypedInt, int, np.integer),
                  pb.ARRAY_KIND_TYPED_FLOAT: (compat.TypedFloat, float, np.floating),
                  pb.ARRAY_KIND_TYPED_COMPLEX: (compat.TypedComplex, complex, np.complexfloating)}
