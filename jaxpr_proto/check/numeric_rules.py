"""The param rules (`param_rules`) of element types and numbers: PRNG
keys (the operands that must be keys, random_wrap's key data, threefry's
words), conversions, random_gamma's alpha, integer_pow's exponent,
reduce_precision's bits, schur's unimplemented sort."""
from __future__ import annotations

import jax
import numpy as np

from jaxpr_proto import compat


def _reduce_precision(eqn, *, exponent_bits, mantissa_bits, **_):
  """XLA takes 1 or more exponent bits and 0 or more mantissa bits."""
  if not 1 <= exponent_bits < (1 << 31):
    yield "exponent_bits", f"exponent_bits={exponent_bits} is not a positive int32"
  if not 0 <= mantissa_bits < (1 << 31):
    yield "mantissa_bits", f"mantissa_bits={mantissa_bits} is not a non-negative int32"


# integer_pow's exponent bound: JAX lowers x**y to O(log y) multiplies, but
# XLA's CPU compile of them takes time linear in y (2**24: seconds, 2**40:
# hours). Past 2**16 every float overflows or underflows unless |x| is 1.
_MAX_INTEGER_POW = 1 << 16


def _integer_pow(eqn, *, y, **_):
  if type(y) is int and abs(y) > _MAX_INTEGER_POW:
    yield "y", f"integer_pow's y={y} is beyond +-{_MAX_INTEGER_POW} (XLA compiles it in time linear in y)"


def _convert_element_type(eqn, *, new_dtype, **_):
  """PRNG keys convert to nothing and nothing converts to them (JAX's rule
  lets an operand key through, and lowering then fails)."""
  a = eqn.invars[0].aval
  if compat.is_key_dtype(getattr(a, "dtype", None)) or compat.is_key_dtype(new_dtype):
    yield None, f"convert_element_type of {a.str_short()} to {new_dtype}: PRNG keys do not convert"


# The primitives whose first operand must be a PRNG key array (their type
# rules read the key's impl without checking that it has one).
_KEY_OPERAND = ("random_bits", "random_split", "random_fold_in", "random_unwrap", "random_clone")


def _key_operand(eqn, **_):
  a = eqn.invars[0].aval
  if not compat.is_key_dtype(getattr(a, "dtype", None)):
    yield None, f"{eqn.primitive.name} takes a PRNG key array, not {a.str_short()}"


def _threefry2x32(eqn, **_):
  """Four operands (two key words, two count words: the shape rule takes any
  number, and the lowering takes a fifth for its keyword use_rolled_loops),
  the two key words of one shape, as the two count words (the lowering's
  loop carries them rotated; the shape rule, which broadcasts a scalar,
  lets a key pair of () and (2,) through)."""
  if len(eqn.invars) != 4 or len(eqn.outvars) != 2:
    yield None, (f"threefry2x32 takes 4 operands and gives 2 results, not "
                 f"{len(eqn.invars)} and {len(eqn.outvars)}")
    return
  shapes = [tuple(x.aval.shape) for x in eqn.invars]
  for what, (a, b) in (("key", shapes[0:2]), ("count", shapes[2:4])):
    if a != b:
      yield None, f"threefry2x32's two {what} words have different shapes {a} and {b}"


def _schur(eqn, *, sort_eig_vals, **_):
  if sort_eig_vals:  # JAX lowers schur on the CPU only, where LAPACK's gees sort is not wired
    yield "sort_eig_vals", "schur with sort_eig_vals=True is not implemented by JAX"


def _random_gamma(eqn, **_):
  """A PRNG key array, and a floating alpha whose shape starts with the key's
  (JAX's abstract eval passes any operands through; the sampler splits each
  key over the rest of alpha's dims, in alpha's dtype)."""
  yield from _key_operand(eqn)
  key, alpha = eqn.invars[0].aval, eqn.invars[1].aval
  if not jax.numpy.issubdtype(alpha.dtype, jax.numpy.floating):
    yield None, f"random_gamma's alpha is {alpha.str_short()}, not floating"
  elif tuple(alpha.shape[:len(key.shape)]) != tuple(key.shape):
    yield None, f"random_gamma's alpha {alpha.str_short()} does not start with the dims of its key {key.str_short()}"


def _random_wrap(eqn, *, impl, **_):
  """The key data JAX's random_wrap checks at trace time, not in its type rule."""
  a = eqn.invars[0].aval
  shape = tuple(impl.key_shape)
  if tuple(a.shape[len(a.shape) - len(shape):]) != shape or len(a.shape) < len(shape):
    yield None, f"random_wrap of {a.str_short()}: key data of {impl.name} must end with dims {shape}"
  elif a.dtype not in (np.uint32, compat.float0):
    yield None, f"random_wrap of {a.str_short()}: key data must be uint32"
