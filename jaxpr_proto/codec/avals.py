"""Abstract values: shaped arrays (dtype, shape with symbolic dims, weak type,
memory space, sharding, manual axes), tokens and refs."""
from __future__ import annotations

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.codec import sharding
from jaxpr_proto.codec.dtypes import decode_dtype, encode_dtype
from jaxpr_proto.compat import memo
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

_MS = {compat.MemorySpace.Device: pb.MEMORY_SPACE_DEVICE_UNSPECIFIED,
       compat.MemorySpace.Host: pb.MEMORY_SPACE_HOST,
       compat.MemorySpace.Any: pb.MEMORY_SPACE_ANY}
_MS_INV = {v: k for k, v in _MS.items()}


def encode_aval(enc, a, path) -> pb.Aval:
  if isinstance(a, compat.ShapedArray):
    return pb.Aval(shaped_array=_encode_shaped_array(enc, a, path))
  if isinstance(a, compat.AbstractToken):
    return pb.Aval(token=pb.AbstractToken())
  if isinstance(a, compat.AbstractRef):
    return pb.Aval(ref=pb.AbstractRef(
        inner=enc.aval(a.inner_aval, path), memory_space=enc.value(a.memory_space, path),
        kind=enc.value(a.kind, path)))
  raise EncodeError(f"unsupported abstract value {a} ({type(a).__qualname__})", path)


# (ShapedArray message's bytes, JAX's configuration) -> its aval, for those
# without symbolic dims (which mean what the module's scope says): avals are
# immutable, and shared from load to load as JAX shares them between eqns.
_SHAPED = memo.memo()


def decode_aval(dec, msg: pb.Aval, path: str):
  kind = msg.WhichOneof("kind")
  if kind == "shaped_array":
    sa = msg.shaped_array
    key = (sa.SerializeToString(deterministic=True), memo.context_key())
    aval = _SHAPED.get(key)
    if aval is None:
      aval = _decode_shaped_array(dec, sa, path)
      if not any(d.HasField("symbolic") for d in sa.shape):
        _SHAPED.put(key, aval)
    return aval
  if kind == "token":
    return compat.abstract_token
  if kind == "ref":
    inner = dec.aval(msg.ref.inner, path)
    try:
      return compat.AbstractRef(inner, dec.value(msg.ref.memory_space, path),
                         dec.value(msg.ref.kind, path))
    except Exception as e:
      raise DecodeError(f"bad ref type: {e}", path) from None
  raise DecodeError("empty aval", path)


def _encode_shaped_array(enc, a, path) -> pb.ShapedArray:
  out = pb.ShapedArray(weak_type=a.weak_type, memory_space=_MS[a.memory_space])
  out.dtype, out.key_impl = encode_dtype(a.dtype, path)
  for d in a.shape:
    if isinstance(d, (int, np.integer)):
      out.shape.add(constant=int(d))
    else:
      out.shape.add(symbolic=encode_symbolic_dim(enc, d, path))
  default = compat.ShapedArray(a.shape, a.dtype, a.weak_type)
  if a.sharding != default.sharding:
    out.sharding.CopyFrom(sharding.encode_named_sharding(a.sharding, path, enc.state.features))
  mat = compat.manual_axis_type(a)
  out.varying.extend(sorted(mat.varying))
  out.unreduced.extend(sorted(mat.unreduced))
  out.reduced.extend(sorted(mat.reduced))
  return out


def _decode_shaped_array(dec, msg: pb.ShapedArray, path: str):
  dtype = decode_dtype(msg.dtype, msg.key_impl, path)
  if not jax.dtypes.issubdtype(dtype, jax.dtypes.extended) and jax.dtypes.canonicalize_dtype(dtype) != dtype:
    # Without x64, JAX turns a float64 input into float32 at the jit boundary,
    # and lowering then meets a float64 variable holding float32.
    raise DecodeError(f"the program uses {dtype}, which needs 64-bit types: enable "
                      "jax_enable_x64 (JAX_ENABLE_X64=1) before loading it", path)
  backend = compat.backend_lacking(dtype)
  if backend is not None:  # (it would fail to compile, or abort the process, there)
    raise DecodeError(f"the program uses {dtype}, which JAX {jax.__version__} cannot compile "
                      f"on this process's backend ({backend})", path)
  shape = tuple(_decode_dim(dec, d, path) for d in msg.shape)
  try:
    ms = _MS_INV[msg.memory_space]
  except KeyError:
    raise DecodeError(f"unknown memory space {msg.memory_space}", path) from None
  kw = {}
  if msg.HasField("sharding"):
    kw["sharding"] = sharding.decode_named_sharding(msg.sharding, path + ".sharding")
  if msg.varying or msg.unreduced or msg.reduced:
    kw["manual_axis_type"] = compat.ManualAxisType(
        varying=frozenset(msg.varying), unreduced=frozenset(msg.unreduced),
        reduced=frozenset(msg.reduced))
  try:
    return compat.shaped_array(shape, dtype, msg.weak_type, memory_space=ms, **kw)
  except Exception as e:
    raise DecodeError(f"bad array type: {e}", path) from None


def _decode_dim(dec, d: pb.Dim, path: str):
  kind = d.WhichOneof("kind")
  if kind == "constant":
    if d.constant < 0:
      raise DecodeError(f"negative dimension {d.constant}", path)
    return d.constant
  if kind == "symbolic":
    return decode_symbolic_dim(dec, d.symbolic, path)
  raise DecodeError("empty dimension", path)


def encode_symbolic_dim(enc, d, path) -> str:
  if not compat.is_symbolic_dim(d):
    raise EncodeError(f"unsupported dimension {d!r}", path)
  scope = d.scope
  st = enc.state
  if st.symbolic_scope is None:
    st.symbolic_scope = scope
  elif scope is not st.symbolic_scope:
    raise EncodeError("symbolic dimensions from different scopes", path)
  return str(d)


def decode_symbolic_dim(dec, s: str, path: str):
  st = dec.state
  if st.symbolic_scope is None:
    try:
      st.symbolic_scope = jax.export.SymbolicScope(list(dec.m.symbolic_scope.constraints))
    except Exception as e:
      raise DecodeError(f"bad symbolic scope: {e}", "symbolic_scope") from None
  try:
    (dim,) = jax.export.symbolic_shape(s, scope=st.symbolic_scope)
  except Exception as e:
    raise DecodeError(f"bad symbolic dimension {s!r}: {e}", path) from None
  if st.dim_env and compat.is_symbolic_dim(dim):
    try:
      dim = compat.evaluate_dim(dim, st.dim_env)
    except Exception as e:  # a dim var the env lacks
      raise DecodeError(f"symbolic dimension {s!r}: {e}", path) from None
    if dim < 0:
      raise DecodeError(f"symbolic dimension {s!r} is {dim} here", path)
  return dim
