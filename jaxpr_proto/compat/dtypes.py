"""Dtypes: PRNG key dtypes (a key's implementation, its data), and the dtypes
a backend cannot compile."""
from __future__ import annotations

import jax
import numpy as np
from jax._src.random import prng

from jaxpr_proto.errors import DecodeError


def is_key_dtype(dtype) -> bool:
  return isinstance(dtype, prng.KeyTy)


# Dtypes that JAX traces but XLA cannot compile on these backends: a program
# computing with one fails to compile, and one with a constant of it (`x * 2`,
# a reduction's zero, a Pallas interpreter's buffer) aborts the process
# (XLA's literal conversion, for float6 in JAX 0.10-0.12: checked on CPU and
# on a TPU v5e; GPU untested, so not listed).
UNCOMPILABLE_DTYPES = {"cpu": frozenset({"float6_e2m3fn", "float6_e3m2fn"}),
                       "tpu": frozenset({"float6_e2m3fn", "float6_e3m2fn"})}


_UNCOMPILABLE_ANYWHERE = frozenset().union(*UNCOMPILABLE_DTYPES.values())


def backend_lacking(dtype) -> str | None:
  """The default backend's name where it cannot compile `dtype`, else None
  (the backend is only looked up for such a dtype)."""
  name = dtype.name  # (a Python property in NumPy: read once)
  if name not in _UNCOMPILABLE_ANYWHERE:
    return None
  backend = jax.default_backend()
  return backend if name in UNCOMPILABLE_DTYPES.get(backend, ()) else None


def key_impl_name(dtype) -> str:
  return dtype._impl.name


def key_impl(name: str, path: str = ""):
  impl = prng.prngs.get(name)
  if impl is None:
    raise DecodeError(f"unknown PRNG implementation {name!r}", path)
  return impl


def key_dtype(name: str, path: str = ""):
  return prng.KeyTy(key_impl(name, path))


def is_key_array(x) -> bool:
  return isinstance(x, prng.PRNGKeyArray)


def key_data(x):
  return np.asarray(jax.random.key_data(x))


def wrap_key_data(data, impl_name: str):
  return jax.random.wrap_key_data(data, impl=impl_name)
