"""Test corpus of JAX programs for jaxpr-proto round-trip tests.

Every entry of ``PROGRAMS`` is a :class:`Program`: a pure function taking
positional arguments only (static configuration is closed over), plus
deterministic example arguments.  The round-trip tests trace each program
(:func:`trace`), encode the resulting ``ClosedJaxpr``, decode it and compare
(structurally, and by evaluating both).

Conventions
-----------
* ``grad_argnums``: the program is differentiable w.r.t. these positional args
  using ``jax.grad(scalar_loss(p), argnums=..., allow_int=True)`` where
  ``scalar_loss`` sums the real parts of all inexact (float/complex) outputs.
  ``allow_int=True`` is always passed, so integer args listed in
  ``grad_argnums`` produce ``float0`` cotangents.  ``None`` = not
  differentiable (integer-only programs, while loops, random bits, ...).
* ``vmap``: ``jax.vmap(p.fn)`` over a new leading axis of size 2 of *every*
  array leaf of the args (python scalars are passed with ``in_axes=None``) is
  valid.  Use :func:`vmap_fn` / :func:`vmap_args`.
* ``symbolic``: for symbolic-shape programs, a ``;``-separated list with one
  ``jax.export.symbolic_shape`` spec per positional argument (all args of
  such programs are arrays).  ``trace`` builds ``jax.ShapeDtypeStruct`` args
  with a shared symbolic scope.  The concrete ``args`` are still valid inputs
  (any value of the dimension variables is), so such programs can be evaluated
  with concrete shapes after re-tracing, or by ``jax.jit(p.fn)(*p.args)``.
  These programs have ``grad_argnums=None`` and ``vmap=False``.
* jax x64 is OFF: no 64-bit dtypes appear in the corpus (``jax_enable_x64`` is
  never touched).
* Everything is small (dims <= 64) and deterministic (fixed seeds).

The programs are written "in the style of" flax / optax / equinox / numpyro
(pure functions over parameter pytrees, registered dataclass modules, ...)
without depending on those libraries.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable

import numpy as np

import jax
import jax.ad_checkpoint  # noqa: F401
import jax.custom_batching  # noqa: F401
import jax.extend  # noqa: F401  (makes jax.extend.core available)
import jax.extend.random  # noqa: F401
import jax.numpy as jnp
import jax.scipy as jsp
import jax.scipy.linalg  # noqa: F401
import jax.scipy.optimize  # noqa: F401
import jax.scipy.sparse.linalg  # noqa: F401
import jax.scipy.special  # noqa: F401
import jax.scipy.stats  # noqa: F401
from jax import lax
from jax.sharding import PartitionSpec as P


# ---------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class Program:
  name: str                 # unique, identifier-like
  fn: Callable              # takes positional args only (close over static config)
  args: tuple               # concrete example arguments (arrays / pytrees of arrays)
  grad_argnums: tuple[int, ...] | None = (0,)
  vmap: bool = True
  symbolic: str | None = None
  notes: str = ""


PROGRAMS: list[Program] = []
_BY_NAME: dict[str, Program] = {}


def get(name: str) -> Program:
  return _BY_NAME[name]


def symbolic_specs(p: Program) -> list[str]:
  """The per-argument symbolic shape specs of a symbolic program."""
  assert p.symbolic is not None
  return [s.strip() for s in p.symbolic.split(";")]


def symbolic_args(p: Program) -> tuple:
  """``jax.ShapeDtypeStruct`` args (sharing one symbolic scope) for ``p``."""
  specs = symbolic_specs(p)
  assert len(specs) == len(p.args), (p.name, specs)
  return tuple(jax.export.symbolic_args_specs(tuple(p.args), tuple(specs)))


def trace(p: Program) -> jax.extend.core.ClosedJaxpr:
  if p.symbolic is not None:
    return jax.make_jaxpr(p.fn)(*symbolic_args(p))
  return jax.make_jaxpr(p.fn)(*p.args)


# ---- helpers for the derived (grad / vmap) programs used by the tests ------

def _is_inexact(x) -> bool:
  dt = getattr(x, "dtype", None)
  if dt is None:
    return False
  try:
    return bool(jax.dtypes.issubdtype(dt, jnp.inexact))
  except TypeError:
    return False


def scalar_loss(p: Program) -> Callable:
  """fn -> sum over all inexact outputs of sum(real(out)) as float32."""
  def loss(*args):
    out = p.fn(*args)
    leaves = [l for l in jax.tree.leaves(out) if _is_inexact(l)]
    total = jnp.zeros((), jnp.float32)
    for l in leaves:
      total = total + jnp.sum(jnp.real(l).astype(jnp.float32))
    return total
  return loss


def grad_fn(p: Program) -> Callable:
  assert p.grad_argnums is not None, p.name
  return jax.grad(scalar_loss(p), argnums=p.grad_argnums, allow_int=True)


def _is_array(x) -> bool:
  return isinstance(x, (jax.Array, np.ndarray, np.generic))


def vmap_args(p: Program, n: int = 2) -> tuple:
  return tuple(jax.tree.map(lambda x: jnp.stack([x] * n) if _is_array(x) else x, a)
               for a in p.args)


def vmap_fn(p: Program) -> Callable:
  in_axes = tuple(jax.tree.map(lambda x: 0 if _is_array(x) else None, a)
                  for a in p.args)
  return jax.vmap(p.fn, in_axes=in_axes)


# ---------------------------------------------------------------------------
# registration + deterministic data helpers
# ---------------------------------------------------------------------------

def _add(name, fn, args, grad_argnums=(0,), vmap=True, symbolic=None, notes=""):
  assert name.isidentifier(), name
  assert name not in _BY_NAME, f"duplicate program name {name}"
  p = Program(name=name, fn=fn, args=tuple(args), grad_argnums=grad_argnums,
              vmap=vmap, symbolic=symbolic, notes=notes)
  PROGRAMS.append(p)
  _BY_NAME[name] = p
  return p


def _uniform(seed, shape, lo=-1.0, hi=1.0, dtype=jnp.float32):
  r = np.random.default_rng(seed)
  return jnp.asarray(r.uniform(lo, hi, size=shape).astype(np.float32), dtype=dtype)


def _normal(seed, shape, scale=1.0, dtype=jnp.float32):
  r = np.random.default_rng(seed)
  return jnp.asarray((scale * r.standard_normal(size=shape)).astype(np.float32),
                     dtype=dtype)


def _randint(seed, shape, lo, hi, dtype=jnp.int32):
  r = np.random.default_rng(seed)
  return jnp.asarray(r.integers(lo, hi, size=shape), dtype=dtype)


def _spd(seed, n):
  a = np.random.default_rng(seed).standard_normal((n, n)).astype(np.float32)
  return jnp.asarray(a @ a.T / n + np.eye(n, dtype=np.float32))


def _dense_init(seed, n_in, n_out):
  return {"w": _normal(seed, (n_in, n_out), scale=1.0 / math.sqrt(n_in)),
          "b": _normal(seed + 1, (n_out,), scale=0.1)}


def _sumall(tree):
  return sum(jnp.sum(l) for l in jax.tree.leaves(tree))


def _mesh():
  return jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))


# ===========================================================================
# 1. lax elementwise
# ===========================================================================

def lax_unary_transcendental(x):
  y = 1.0 + x  # in (1.1, 1.9)
  return jnp.stack([
      lax.exp(x), lax.exp2(x), lax.log(x), lax.log1p(x), lax.expm1(x),
      lax.tanh(x), lax.logistic(x), lax.sin(x), lax.cos(x), lax.tan(x),
      lax.asin(x), lax.acos(x), lax.atan(x), lax.sinh(x), lax.cosh(x),
      lax.asinh(x), lax.acosh(y), lax.atanh(x), lax.sqrt(x), lax.rsqrt(x),
      lax.cbrt(x), lax.square(x), lax.abs(-x), lax.neg(x),
  ])


_add("lax_unary_transcendental", lax_unary_transcendental,
     (_uniform(0, (3, 4), 0.1, 0.9),))


def lax_unary_special(x):
  return (
      lax.erf(x), lax.erfc(x), lax.erf_inv(x), lax.lgamma(x + 0.5),
      lax.digamma(x + 0.5), lax.bessel_i0e(x), lax.bessel_i1e(x),
      lax.sign(x - 0.5),
      lax.floor(4 * x), lax.ceil(4 * x),
      lax.round(4 * x, lax.RoundingMethod.AWAY_FROM_ZERO),
      lax.round(4 * x, lax.RoundingMethod.TO_NEAREST_EVEN),
      lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10),
      lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7),
      lax.is_finite(x / (x - x)),  # bool output (nan/inf)
  )


_add("lax_unary_special", lax_unary_special, (_uniform(1, (5,), 0.1, 0.9),))


def lax_binary_float(x, y):
  c = lax.clamp(-0.5, x, 0.5)
  cmp = [lax.eq(x, y), lax.ne(x, y), lax.lt(x, y), lax.le(x, y),
         lax.gt(x, y), lax.ge(x, y)]
  sel = lax.select_n(cmp[2], x, y)
  sel3 = lax.select_n(lax.convert_element_type(cmp[2], jnp.int32)
                      + lax.convert_element_type(cmp[4], jnp.int32),
                      x, y, x * y)
  return (
      lax.add(x, y), lax.sub(x, y), lax.mul(x, y), lax.div(x, y + 3.0),
      lax.pow(jnp.abs(x) + 0.5, y), lax.atan2(x, y), lax.rem(x, y + 3.0),
      lax.max(x, y), lax.min(x, y), lax.integer_pow(x, 3),
      lax.integer_pow(x + 3.0, -2), lax.integer_pow(x, 0), c, sel, sel3,
      lax.select(cmp[5], x, y), *cmp,
  )


_add("lax_binary_float", lax_binary_float,
     (_uniform(2, (4, 3)), _uniform(3, (4, 3))), grad_argnums=(0, 1))


def lax_float_nondiff(x, y):
  return (lax.nextafter(x, y), lax.nextafter(x, jnp.full_like(x, jnp.inf)),
          lax.floor(x) + lax.ceil(y), lax.round(x * 3),
          lax.is_finite(lax.div(x, y - y)))


_add("lax_float_nondiff", lax_float_nondiff,
     (_uniform(4, (6,)), _uniform(5, (6,))), grad_argnums=None,
     notes="nextafter has no JVP rule")


def lax_special_functions(a, x):
  b = a + 1.5
  return (
      lax.igamma(a, x), lax.igammac(a, x),
      lax.random_gamma_grad(a, lax.stop_gradient(x)),  # its JVP uses a while_loop
      lax.igamma_grad_a(a, lax.stop_gradient(x)),  # no JVP rules for igamma_grad_a
      lax.polygamma(jnp.ones_like(x), x), lax.polygamma(2.0 * jnp.ones_like(x), x),
      lax.zeta(a + 1.5, lax.stop_gradient(x)), lax.betainc(a, b, x / 4.0),
      lax.lgamma(a), lax.digamma(a),
  )


_add("lax_special_functions", lax_special_functions,
     (_uniform(6, (5,), 0.5, 3.0), _uniform(7, (5,), 0.2, 3.0)),
     grad_argnums=(1,),
     notes="igamma/igammac/igamma_grad_a/random_gamma_grad/polygamma/zeta/"
           "regularized_incomplete_beta; differentiable w.r.t. x")


def lax_int_bitwise(i, u8, u32):
  s = jnp.int32(3)
  return (
      lax.population_count(i), lax.clz(i), lax.shift_left(i, s),
      lax.shift_right_arithmetic(i, s), lax.shift_right_logical(i, s),
      lax.bitwise_and(i, 0x0F0F), lax.bitwise_or(i, 7), lax.bitwise_xor(i, -1),
      lax.bitwise_not(i), lax.rem(i, 7), lax.div(i, 3), lax.sign(i), lax.abs(i),
      lax.max(i, 0), lax.min(i, 0), lax.integer_pow(i, 2), lax.neg(i),
      lax.population_count(u8), lax.clz(u8), lax.shift_left(u8, jnp.uint8(1)),
      lax.shift_right_logical(u8, jnp.uint8(2)), lax.bitwise_not(u8),
      u8 + u8, u8 * jnp.uint8(3), u8 // jnp.uint8(5), u8 % jnp.uint8(5),
      lax.population_count(u32), lax.clz(u32), lax.bitwise_xor(u32, u32 >> 3),
      (u32 * jnp.uint32(2654435761)) >> jnp.uint32(16),
      lax.convert_element_type(i, jnp.int16) * jnp.int16(3),
      lax.convert_element_type(i, jnp.int8) + jnp.int8(1),
      lax.convert_element_type(u8, jnp.uint16) << jnp.uint16(4),
      lax.mulhi(i, jnp.int32(123456789)), lax.mulhi(u32, u32),
  )


_add("lax_int_bitwise", lax_int_bitwise,
     (_randint(8, (6,), -1000, 1000), _randint(9, (6,), 0, 255, jnp.uint8),
      _randint(10, (6,), 0, 2**31 - 1, jnp.uint32)),
     grad_argnums=None)


def lax_bool_logic(b1, b2, x):
  idx = lax.convert_element_type(b1, jnp.int32) + lax.convert_element_type(b2, jnp.int32)
  return (
      lax.bitwise_and(b1, b2), lax.bitwise_or(b1, b2), lax.bitwise_xor(b1, b2),
      lax.bitwise_not(b1), lax.select_n(b1, x, -x),
      lax.select_n(idx, x, 2 * x, 3 * x),
      lax.reduce_and(b1, (0,)), lax.reduce_or(b2, (0,)), lax.reduce_xor(b1, (0,)),
      jnp.all(b1), jnp.any(b2), jnp.logical_xor(b1, b2), b1 == b2,
      jnp.where(b1 & ~b2, x, 0.0),
  )


_add("lax_bool_logic", lax_bool_logic,
     (jnp.array([True, False, True, True, False, False]),
      jnp.array([False, False, True, False, True, True]),
      _uniform(11, (6,))),
     grad_argnums=(2,))


def lax_complex_from_real(x, y):
  c = lax.complex(x, y)
  d = c * c + lax.conj(c) / (c + 2.0)
  return (
      lax.real(d), lax.imag(d), lax.abs(c), lax.exp(c), lax.log(c + 3.0),
      lax.sqrt(c), jnp.angle(c), c ** 2, lax.integer_pow(c, 3),
      lax.sign(c), lax.tanh(c), jnp.sin(c), c @ lax.conj(c).T,
  )


_add("lax_complex_from_real", lax_complex_from_real,
     (_uniform(12, (3, 3)), _uniform(13, (3, 3))), grad_argnums=(0, 1))


def complex_args(c, x):
  z = c * x + lax.conj(c)
  return (jnp.real(z), jnp.imag(z), jnp.abs(z) ** 2, jnp.exp(1j * jnp.angle(z)),
          jnp.sum(z * jnp.conj(z)), jnp.fft.fft(z), z == c)


_add("complex_args", complex_args,
     (jnp.asarray(_uniform(14, (4,)) + 1j * _uniform(15, (4,)), jnp.complex64),
      _uniform(16, (4,))),
     grad_argnums=(0, 1), notes="complex64 argument; real loss w.r.t. complex input")


# ===========================================================================
# 2. dtypes
# ===========================================================================

_STD_DTYPES = [jnp.bool_, jnp.int8, jnp.int16, jnp.int32, jnp.uint8, jnp.uint16,
               jnp.uint32, jnp.float16, jnp.bfloat16, jnp.float32, jnp.complex64]


def convert_element_type_all(x):
  outs = []
  for dt in _STD_DTYPES:
    y = lax.convert_element_type(4 * x, dt)
    outs.append(lax.convert_element_type(jnp.real(y) if dt == jnp.complex64 else y,
                                         jnp.float32))
  return jnp.stack(outs), x.astype(jnp.bfloat16) * 2, x.astype(jnp.float16) + 1


_add("convert_element_type_all", convert_element_type_all, (_uniform(17, (5,), 0, 8),))

_FLOAT8 = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
           "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
           "float4_e2m1fn"]
_FLOAT8 = [getattr(jnp, n) for n in _FLOAT8 if hasattr(jnp, n)]


def float8_roundtrip(x):
  return jnp.stack([lax.convert_element_type(lax.convert_element_type(x, dt), jnp.float32)
                    for dt in _FLOAT8]), x.astype(jnp.float8_e4m3fn)


_add("float8_roundtrip", float8_roundtrip, (_uniform(18, (6,), 0.25, 2.0),),
     notes="every ml_dtypes float8_* / float4_e2m1fn that jnp exposes")


def float8_args(a, b, c, d):
  af = a.astype(jnp.float32)
  bf = b.astype(jnp.float32)
  return (af * bf + c.astype(jnp.float32) - d.astype(jnp.float32),
          lax.dot_general(a, b, (((0,), (0,)), ((), ())),
                          preferred_element_type=jnp.float32),
          (af + 1).astype(jnp.float8_e5m2), a, -c, d * d)


_add("float8_args", float8_args,
     (_uniform(19, (4,), 0.5, 2.0, jnp.float8_e4m3fn),
      _uniform(20, (4,), 0.5, 2.0, jnp.float8_e5m2),
      _uniform(21, (4,), dtype=jnp.bfloat16), _uniform(22, (4,), dtype=jnp.float16)),
     grad_argnums=(2, 3),
     notes="float8 arrays as arguments (and literal/consts), dot with float8 operands")


_LOWBIT = [getattr(jnp, n) for n in ("int4", "uint4", "int2", "uint2")]


def lowbit_int_roundtrip(i):
  outs = []
  for dt in _LOWBIT:
    outs.append(lax.convert_element_type(lax.convert_element_type(i, dt), jnp.int32))
  f4 = lax.convert_element_type(lax.convert_element_type(i, jnp.int4), jnp.float32)
  return jnp.stack(outs), f4, lax.convert_element_type(i, jnp.int4)


_add("lowbit_int_roundtrip", lowbit_int_roundtrip, (_randint(23, (6,), 0, 2),),
     grad_argnums=None, notes="int4/uint4/int2/uint2 via convert_element_type")


def lowbit_args(a, b):
  return (a.astype(jnp.int32) * 2 + b.astype(jnp.int32),
          a.astype(jnp.float32) / 3, (b.astype(jnp.int32) + 1).astype(jnp.uint4))


_add("lowbit_args", lowbit_args,
     (jnp.asarray(np.array([-3, -1, 0, 1, 2, 7], dtype=np.int32), jnp.int4),
      jnp.asarray(np.array([0, 1, 2, 3, 4, 5], dtype=np.int32), jnp.uint4)),
     grad_argnums=None, notes="int4 / uint4 arrays as arguments")


def bitcast_convert(x, u):
  i = lax.bitcast_convert_type(x, jnp.int32)
  b = lax.bitcast_convert_type(x, jnp.uint8)          # (..., 4)
  back = lax.bitcast_convert_type(b, jnp.float32)     # drops trailing dim
  f = lax.bitcast_convert_type(u, jnp.float32)
  h = lax.bitcast_convert_type(x.astype(jnp.float16), jnp.int16)
  bf = lax.bitcast_convert_type(x.astype(jnp.bfloat16), jnp.uint16)
  u16 = lax.bitcast_convert_type(jnp.stack([h, h], -1).astype(jnp.int16), jnp.int32)
  return i, b, back, f, h, bf, u16


_add("bitcast_convert", bitcast_convert,
     (_uniform(24, (5,)), _randint(25, (5,), 0x3F000000, 0x3F800000, jnp.uint32)),
     grad_argnums=None)


def half_precision_math(x, y):
  z = x * y.astype(jnp.float16) + jnp.float16(1.5)
  w = y * jnp.bfloat16(2) - jnp.tanh(y)
  return (z, w, jnp.exp(x), jnp.sum(w), jnp.dot(x, x),
          lax.dot_general(y, y, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32),
          # a python bool output -> a literal outvar in the jaxpr
          jnp.promote_types(jnp.float16, jnp.bfloat16) == jnp.float32)


_add("half_precision_math", half_precision_math,
     (_uniform(26, (6,), dtype=jnp.float16), _uniform(27, (6,), dtype=jnp.bfloat16)),
     grad_argnums=(0, 1))


def weak_type_scalars(x, s, n):
  # s: python float (weak f32), n: python int (weak i32)
  y = x * s + n
  z = y + 1 - 2.5 * y + jnp.float32(3.0)
  k = jnp.arange(4) * n + 1
  return z, y * k, s * 2, n + 1, jnp.asarray(s) ** 2


_add("weak_type_scalars", weak_type_scalars, (_uniform(28, (4,)), 2.0, 3),
     grad_argnums=(0, 1, 2),
     notes="python scalar args give weak-typed invars; grad w.r.t. the int arg "
           "(allow_int) gives float0")


def float0_traced_grad(x, n):
  def f(x, n):
    return jnp.sum(jnp.sin(x) * n.astype(jnp.float32)) + jnp.take(x, n % 4).sum()
  gx, gn = jax.grad(f, argnums=(0, 1), allow_int=True)(x, n)
  return gx, gn


_add("float0_traced_grad", float0_traced_grad,
     (_uniform(29, (4,)), _randint(30, (4,), 0, 5)), grad_argnums=(0, 1),
     notes="jaxpr output of dtype float0 (grad w.r.t. int input, allow_int=True)")


# ===========================================================================
# 3. reductions / scans
# ===========================================================================

def lax_reductions(x):
  return (
      lax.reduce_sum(x, (0,)), lax.reduce_max(x, (1,)), lax.reduce_min(x, (0, 1)),
      lax.reduce_prod(x, (1,)), lax.argmax(x, 1, jnp.int32), lax.argmin(x, 0, jnp.int32),
      jnp.mean(x, axis=0), jnp.var(x), jnp.std(x, axis=1, keepdims=True),
      jnp.max(x, axis=0, initial=0.5, where=x > 0), jnp.nansum(x),
      jnp.linalg.norm(x), jnp.prod(x[0]), jnp.argmax(x), jnp.ptp(x, axis=1),
  )


_add("lax_reductions", lax_reductions, (_uniform(31, (4, 5), 0.1, 1.0),))


def lax_reduce_custom(x, i, b):
  # non-standard monoid -> generic reduce primitive with a jaxpr
  lse = lax.reduce(x, -jnp.inf, lambda a, c: jnp.logaddexp(a, c), (1,))
  # variadic reduce: (value, index) argmax
  iota = lax.broadcasted_iota(jnp.int32, x.shape, 1)

  def amax(ab, cd):
    (a, ai), (c, ci) = ab, cd
    pick = (a > c) | ((a == c) & (ai < ci))
    return lax.select(pick, a, c), lax.select(pick, ai, ci)

  vmax, imax = lax.reduce((x, iota), (-jnp.inf, jnp.int32(2**31 - 1)), amax, (1,))
  int_reduce = lax.reduce(i, 0, lambda a, c: a ^ c, (0,))
  return (lse, vmax, imax, int_reduce,
          lax.reduce_and(b, (0,)), lax.reduce_or(b, (0,)), lax.reduce_xor(b, (0,)),
          lax.reduce_xor(i, (0,)), lax.reduce_and(i, (0,)), lax.reduce_or(i, (0,)),
          lax.reduce_max(i, (0,)), lax.reduce_min(i, (0,)), lax.reduce_prod(i, (0,)))


_add("lax_reduce_custom", lax_reduce_custom,
     (_uniform(32, (3, 6)), _randint(33, (5,), 0, 100),
      jnp.array([True, True, False, True, False])),
     grad_argnums=None, notes="lax.reduce with custom lambdas (reduce_p w/ jaxpr)")


def cumulative_ops(x):
  return (
      lax.cumsum(x, 0), lax.cumsum(x, 1, reverse=True), lax.cumprod(x, 1),
      lax.cummax(x, 0), lax.cummin(x, 1, reverse=True), lax.cumlogsumexp(x, 1),
      jnp.cumsum(x), jnp.cumprod(x, axis=0), jnp.diff(x, axis=1),
  )


_add("cumulative_ops", cumulative_ops, (_uniform(34, (3, 5), 0.5, 1.5),))


def associative_scans(x, a):
  s = lax.associative_scan(jnp.add, x)
  r = lax.associative_scan(jnp.maximum, x, reverse=True, axis=0)

  def affine(e1, e2):  # linear recurrence h_t = a_t h_{t-1} + x_t
    a1, b1 = e1
    a2, b2 = e2
    return a2 * a1, a2 * b1 + b2

  _, h = lax.associative_scan(affine, (a, x))
  return s, r, h


_add("associative_scans", associative_scans,
     (_uniform(35, (8, 3)), _uniform(36, (8, 3), 0.5, 1.0)), grad_argnums=(0, 1))


# ===========================================================================
# 4. dot_general / conv / windows
# ===========================================================================

def dot_general_variants(a, b, c, i8):
  batch = lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
  multi = lax.dot_general(a, a, (((1, 2), (1, 2)), ((), ())))
  pref = lax.dot_general(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16),
                         (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)
  hi = lax.dot(c, c.T, precision=lax.Precision.HIGHEST)
  hi2 = jnp.matmul(c, c.T, precision=(lax.Precision.DEFAULT, lax.Precision.HIGH))
  ints = lax.dot_general(i8, i8, (((1,), (1,)), ((), ())), preferred_element_type=jnp.int32)
  return (
      batch, multi, pref, hi, hi2, ints,
      jnp.einsum("bij,bjk->bik", a, b), jnp.einsum("ii->", c), jnp.einsum("ij,ij->i", c, c),
      jnp.einsum("bij,k->bijk", a, c[0]), jnp.tensordot(a, b, axes=([1, 2], [2, 1])),
      jnp.outer(c[0], c[1]), jnp.vdot(c, c), jnp.inner(c, c), c @ c[0], jnp.kron(c[:2, :2], c[:2, :2]),
  )


_add("dot_general_variants", dot_general_variants,
     (_uniform(37, (2, 3, 4)), _uniform(38, (2, 4, 3)), _uniform(39, (4, 4)),
      _randint(40, (3, 5), -8, 8, jnp.int8)),
     grad_argnums=(0, 1, 2))


def conv_variants(x, w, wg, w1d):
  dn = ("NHWC", "HWIO", "NHWC")
  y1 = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)
  y2 = lax.conv_general_dilated(x, w, (2, 2), ((1, 0), (0, 1)), dimension_numbers=dn)
  y3 = lax.conv_general_dilated(x, w, (1, 1), "VALID", rhs_dilation=(2, 2),
                                dimension_numbers=dn)
  y4 = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), lhs_dilation=(2, 2),
                                dimension_numbers=dn)  # transposed conv
  # grouped conv: 4 in-channels, 2 groups
  y5 = lax.conv_general_dilated(x, wg, (1, 1), "SAME", dimension_numbers=dn,
                                feature_group_count=2,
                                precision=lax.Precision.HIGHEST)
  # depthwise conv
  xd = jnp.transpose(x, (0, 3, 1, 2))  # NCHW
  y6 = lax.conv_general_dilated(xd, jnp.ones((4, 1, 3, 3)), (1, 1), "SAME",
                                feature_group_count=4)
  # 1d NCH / OIH
  x1 = x[:, :, 0, :].transpose(0, 2, 1)  # N C W
  y7 = lax.conv_general_dilated(x1, w1d, (1,), "SAME")
  y8 = lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=dn)
  y9 = jnp.convolve(x[0, 0, :, 0], w1d[0, 0], mode="full")
  return y1, y2, y3, y4, y5, y6, y7, y8, y9


_add("conv_variants", conv_variants,
     (_uniform(41, (2, 6, 6, 4)), _uniform(42, (3, 3, 4, 5)), _uniform(43, (3, 3, 2, 6)),
      _uniform(44, (3, 4, 3))),
     grad_argnums=(0, 1, 2, 3),
     notes="grad w.r.t. the grouped-conv kernel produces batch_group_count")


def _maxpool(x):
  return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _avgpool(x):
  s = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
  return s / 9.0


def reduce_window_variants(x):
  mx = _maxpool(x)
  av = _avgpool(x)
  mn = lax.reduce_window(x, jnp.inf, lax.min, (1, 2, 2, 1), (1, 1, 1, 1),
                         ((0, 0), (1, 1), (1, 1), (0, 0)))
  dil = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID",
                          base_dilation=(1, 2, 2, 1), window_dilation=(1, 2, 1, 1))
  dmax = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 2, 1), "SAME",
                           base_dilation=(1, 1, 2, 1))
  cs = jnp.cumsum(x, axis=1)  # may lower via reduce_window on some backends
  return mx, av, mn, dil, dmax, cs


_add("reduce_window_variants", reduce_window_variants, (_uniform(45, (2, 6, 6, 3)),))


def reduce_window_generic(x, i):
  g = lax.reduce_window(x, -jnp.inf, lambda a, b: jnp.logaddexp(a, b),
                        (2, 2), (1, 2), "VALID")
  gi = lax.reduce_window(i, 0, lambda a, b: a | b, (3,), (1,), "SAME")
  # variadic generic reduce_window
  v = lax.reduce_window((x, x * 2), (0.0, 0.0),
                        lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1])),
                        (2, 2), (1, 1), "VALID")
  return g, gi, v


_add("reduce_window_generic", reduce_window_generic,
     (_uniform(46, (4, 6)), _randint(47, (7,), 0, 64)), grad_argnums=None,
     notes="generic reduce_window primitive with a jaxpr (no JVP)")


def maxpool_grad(x):
  return jax.grad(lambda x: jnp.sum(_maxpool(x) ** 2) + jnp.sum(_avgpool(x)))(x)


_add("maxpool_grad", maxpool_grad, (_uniform(48, (1, 4, 4, 2)),),
     notes="traced grad of max pooling -> select_and_scatter_add")


def maxpool_jvp(x, t):
  return jax.jvp(_maxpool, (x,), (t,))


_add("maxpool_jvp", maxpool_jvp, (_uniform(49, (1, 4, 4, 2)), _uniform(50, (1, 4, 4, 2))),
     grad_argnums=(1,), notes="traced jvp of max pooling -> select_and_gather_add")


def internal_select_and_scatter(x, src):
  # No public API stages select_and_scatter (select_and_scatter_add is lowered
  # through it); use the private helper so the primitive is in the corpus.
  from jax._src.lax import windowed_reductions as _wr
  return _wr._select_and_scatter(x, lax.ge, (2, 2), (2, 2), ((0, 0), (0, 0)), src,
                                 jnp.float32(0.0), lax.add)


_add("internal_select_and_scatter", internal_select_and_scatter,
     (_uniform(607, (4, 6)), _uniform(608, (2, 3))), grad_argnums=None, vmap=False,
     notes="select_and_scatter via private jax._src API (no JVP/batching rules)")


# ===========================================================================
# 5. structural / indexing
# ===========================================================================

def structural_ops(x):
  p1 = lax.pad(x, 0.0, ((1, 2, 0), (-1, 1, 1)))
  c = lax.concatenate([x, x * 2, x[:1]], 0)
  s = lax.slice(x, (0, 1), (4, 6), (2, 2))
  t = lax.transpose(x.reshape(2, 2, 6), (2, 0, 1))
  r = lax.reshape(x, (6, 4))
  r2 = lax.reshape(x, (2, 12), dimensions=(1, 0))
  sq = lax.squeeze(x[:, :1], (1,))
  e = lax.expand_dims(x, (0, 2))
  b = lax.broadcast_in_dim(x[0], (3, 6, 2), (1,))
  b2 = lax.broadcast(x[0, 0], (2, 3))
  rv = lax.rev(x, (0, 1))
  io = lax.iota(jnp.int32, 5)
  bio = lax.broadcasted_iota(jnp.float32, (2, 3), 1)
  sp = lax.split(x, (1, 2, 3), axis=1)
  return (p1, c, s, t, r, r2, sq, e, b, b2, rv, io, bio, *sp,
          jnp.tile(x[0], 2), jnp.repeat(x[:, 0], 2), jnp.roll(x, 2, 1), jnp.flip(x),
          jnp.pad(x, ((0, 1), (2, 0)), mode="reflect"), jnp.tril(x), jnp.triu(x, 1),
          jnp.diag(x[:, :4]), jnp.trace(x[:, :4]), jnp.meshgrid(x[0], x[1])[0],
          jnp.array_split(x, 3, axis=1)[2], jnp.rot90(x), jnp.moveaxis(e, 0, -1))


_add("structural_ops", structural_ops, (_uniform(51, (4, 6)),))


def dynamic_slicing(x, i, u):
  ds = lax.dynamic_slice(x, (i, 1), (2, 3))
  dus = lax.dynamic_update_slice(x, u, (1, i))
  di = lax.dynamic_index_in_dim(x, i, 1, keepdims=False)
  dsi = lax.dynamic_slice_in_dim(x, i, 2, axis=0)
  return ds, dus, di, dsi, x[i], x[:, i + 1], lax.dynamic_update_index_in_dim(x, u[0], i, 0)


_add("dynamic_slicing", dynamic_slicing,
     (_uniform(52, (5, 6)), jnp.int32(2), _uniform(53, (2, 3))), grad_argnums=(0, 2))


def gather_scatter_ops(x, idx, upd):
  return (
      x[idx], x[:, idx], x[idx, 1:3], x[jnp.array([0, 2]), jnp.array([1, 3])],
      x.at[idx].add(upd), x.at[idx].set(upd),
      x.at[jnp.array([4, 0, 2])].mul(upd, unique_indices=True),
      x.at[idx, 0].get(mode="fill", fill_value=-1.0),
      x.at[idx + 10].get(mode="clip"),
      x.at[idx].add(upd, mode="drop"),
      jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1),
      jnp.take(x, idx, axis=1, mode="wrap"),
      jnp.where(x > 0, x, 0.0), x[x.shape[0] - 1, ::-2],
  )


_add("gather_scatter_ops", gather_scatter_ops,
     (_uniform(54, (5, 4)), jnp.array([3, 0, 3], jnp.int32), _uniform(55, (3, 4))),
     grad_argnums=(0, 2))


def scatter_min_max(x, idx, upd):
  return (x.at[idx].min(upd), x.at[idx].max(upd), x.at[jnp.array([1, 3, 5])].divide(upd + 2.0, unique_indices=True),
          x.at[jnp.array([0, 2, 5])].power(2.0, unique_indices=True))


_add("scatter_min_max", scatter_min_max,
     (_uniform(56, (6, 3)), jnp.array([1, 4, 1], jnp.int32), _uniform(57, (3, 3))),
     grad_argnums=(0, 2), notes="scatter-min/scatter-max; divide/power via scatter-mul")


def lax_gather_scatter_direct(x, idx, upd):
  dnums = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                     start_index_map=(0,))
  g = lax.gather(x, idx[:, None], dnums, slice_sizes=(1, 4),
                 mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)
  g2 = lax.gather(x, idx[:, None], dnums, slice_sizes=(1, 4),
                  mode=lax.GatherScatterMode.CLIP, indices_are_sorted=True,
                  unique_indices=True)
  g3 = lax.gather(x, idx[:, None], dnums, slice_sizes=(1, 4),
                  mode=lax.GatherScatterMode.FILL_OR_DROP, fill_value=0.5)
  sdn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=(0,))
  s = lax.scatter_add(x, idx[:, None], upd, sdn, mode=lax.GatherScatterMode.CLIP)
  s2 = lax.scatter(x, idx[:, None], upd, sdn, unique_indices=True,
                   indices_are_sorted=True)
  s3 = lax.scatter_mul(x, idx[:, None], upd, sdn, unique_indices=True)
  s4 = lax.scatter_sub(x, idx[:, None], upd, sdn)
  return g, g2, g3, s, s2, s3, s4


_add("lax_gather_scatter_direct", lax_gather_scatter_direct,
     (_uniform(58, (6, 4)), jnp.array([0, 2, 5], jnp.int32), _uniform(59, (3, 4))),
     grad_argnums=(0, 2))


def gather_fill_modes(mask, counts, idx):
  # mode="fill" sets a fill value of the operand's dtype: True for bools
  return (mask.at[idx].get(mode="fill"), counts.at[idx].get(mode="fill", fill_value=-1),
          counts.at[idx].get(mode="clip"))


_add("gather_fill_modes", gather_fill_modes,
     (jnp.array([True, False, True, True]), jnp.array([3, 1, 4, 1], jnp.int32),
      jnp.array([0, 3, 7, -9], jnp.int32)), grad_argnums=None,
     notes="gathers out of bounds: FILL_OR_DROP with a bool and an int fill value, CLIP")


def sorting_ops(x, y, k):
  s1, s2, s3 = lax.sort((k, x, y), dimension=0, num_keys=2, is_stable=True)
  v, i = lax.top_k(x, 3)
  return (
      s1, s2, s3, lax.sort(x), lax.sort(y, dimension=0, is_stable=False), v, i,
      jnp.sort(x)[::-1], jnp.argsort(x, stable=True), jnp.argsort(-x, descending=True),
      jnp.searchsorted(jnp.sort(x), y), jnp.searchsorted(jnp.sort(x), y, side="right"),
      jnp.median(x), jnp.quantile(x, 0.25), lax.sort_key_val(x, y),
      jnp.lexsort((x, k)), jnp.argpartition(x, 2), jnp.partition(x, 2),
  )


_add("sorting_ops", sorting_ops,
     (_uniform(60, (8,)), _uniform(61, (8,)), _randint(62, (8,), 0, 3)),
     grad_argnums=(0, 1), notes="multi-operand sort with num_keys=2; top_k")


def approx_topk(x):
  mv, mi = lax.approx_max_k(x, 3, recall_target=0.9)
  nv, ni = lax.approx_min_k(x, 2, reduction_dimension=0, aggregate_to_topk=False)
  return mv, mi, nv, ni


_add("approx_topk", approx_topk, (_uniform(63, (4, 16)),))


def complex_sort_search(c, q):
  s = jnp.sort(c)
  k1, v1 = lax.sort((c, jnp.real(c)), num_keys=1)
  return (s, k1, v1, jnp.argsort(c),
          jnp.searchsorted(s, q),                           # scan: lt_to/le_to/eq_to
          jnp.searchsorted(s, q, side="right", method="compare_all"),
          jnp.searchsorted(s, q, method="sort"),
          jnp.searchsorted(jnp.sort(jnp.real(c)), jnp.real(q), method="scan_unrolled"))


_add("complex_sort_search", complex_sort_search,
     (jnp.asarray(_uniform(600, (6,)) + 1j * _uniform(601, (6,)), jnp.complex64),
      jnp.asarray(_uniform(602, (4,)) + 1j * _uniform(603, (4,)), jnp.complex64)),
     grad_argnums=(0,),
     notes="complex keys split into (real, imag): the total-order comparators "
           "lt_to/le_to/eq_to appear in the jaxpr (searchsorted)")


def ragged_dot_prog(lhs, rhs, group_sizes):
  return (lax.ragged_dot(lhs, rhs, group_sizes),
          lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                         precision=lax.Precision.HIGHEST))


_add("ragged_dot_prog", ragged_dot_prog,
     (_uniform(604, (6, 4)), _uniform(605, (3, 4, 5)), jnp.array([2, 3, 1], jnp.int32)),
     grad_argnums=(0, 1), vmap=False,
     notes="ragged_dot_general (MoE-style grouped matmul); vmap NYI in JAX")


def unique_histogram(x, ints):
  u = jnp.unique(ints, size=6, fill_value=-1)
  uv, uidx, uinv, ucnt = jnp.unique(ints, size=6, fill_value=0, return_index=True,
                                    return_inverse=True, return_counts=True)
  h, edges = jnp.histogram(x, bins=5, range=(0.0, 1.0))
  hw, _ = jnp.histogram(x, bins=jnp.linspace(0, 1, 4), weights=x)
  bc = jnp.bincount(ints, length=8)
  dg = jnp.digitize(x, jnp.array([0.25, 0.5, 0.75]))
  it = jnp.interp(x, jnp.linspace(0, 1, 5), jnp.array([0.0, 1.0, 0.5, 2.0, 1.0]))
  return u, uv, uidx, uinv, ucnt, h, edges, hw, bc, dg, it, jnp.isin(ints, jnp.array([1, 3]))


_add("unique_histogram", unique_histogram,
     (_uniform(64, (10,), 0.0, 1.0), _randint(65, (10,), 0, 6)), grad_argnums=(0,))


def fft_ops(x, c):
  return (
      jnp.fft.fft(x), jnp.fft.ifft(x), jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x)),
      jnp.fft.fft2(c), jnp.fft.ifftn(c), jnp.fft.rfftn(x.reshape(2, 4)),
      jnp.fft.hfft(x[:5]), jnp.fft.fftshift(x), jnp.fft.fftfreq(8),
      lax.fft(c, lax.FftType.FFT, (2, 4)),
      lax.fft(jnp.fft.rfft(x), lax.FftType.IRFFT, (8,)),
  )


_add("fft_ops", fft_ops,
     (_uniform(66, (8,)),
      jnp.asarray(_uniform(67, (2, 4)) + 1j * _uniform(68, (2, 4)), jnp.complex64)),
     grad_argnums=(0, 1))


# ===========================================================================
# 6. linear algebra
# ===========================================================================

def linalg_factorizations(a):
  L = jnp.linalg.cholesky(a)
  q, r = jnp.linalg.qr(a)
  w, v = jnp.linalg.eigh(a)
  u, s, vt = jnp.linalg.svd(a, full_matrices=False)
  sv = jnp.linalg.svd(a, compute_uv=False)
  p, l, up = jsp.linalg.lu(a)
  lu, piv, perm = lax.linalg.lu(a)
  return L, q, r, w, jnp.abs(v), jnp.abs(u), s, sv, p, l, up, lu, piv, perm


_add("linalg_factorizations", linalg_factorizations, (_spd(69, 4),),
     notes="cholesky, qr, eigh, svd, lu primitives")


def linalg_solvers(a, b):
  x1 = jnp.linalg.solve(a, b)
  inv = jnp.linalg.inv(a)
  det = jnp.linalg.det(a)
  sign, logdet = jnp.linalg.slogdet(a)
  L = jnp.linalg.cholesky(a)
  ts = lax.linalg.triangular_solve(L, b.T, left_side=False, lower=True, transpose_a=True)
  ts2 = lax.linalg.triangular_solve(L, b, left_side=True, lower=True, unit_diagonal=True,
                                    conjugate_a=False)
  return (x1, inv, det, sign, logdet, ts, ts2, jnp.linalg.pinv(a),
          jnp.linalg.matrix_power(a, 3), jnp.linalg.norm(a, "fro"), jnp.linalg.norm(a, 2),
          jnp.linalg.lstsq(a, b)[0], jnp.linalg.matrix_rank(a), jnp.linalg.cond(a))


_add("linalg_solvers", linalg_solvers, (_spd(70, 4), _uniform(71, (4, 2))),
     grad_argnums=(0, 1))


def scipy_linalg(a, b):
  e = jsp.linalg.expm(0.3 * a)
  L = jnp.linalg.cholesky(a)
  st = jsp.linalg.solve_triangular(L, b, lower=True)
  st2 = jsp.linalg.solve_triangular(L.T, b, lower=False, trans=1)
  cf = jsp.linalg.cho_factor(a)
  cs = jsp.linalg.cho_solve(cf, b)
  luf = jsp.linalg.lu_factor(a)
  ls = jsp.linalg.lu_solve(luf, b)
  return (e, st, st2, cs, ls, jsp.linalg.solve(a, b, assume_a="pos"),
          jsp.linalg.inv(a), jsp.linalg.det(a), jsp.linalg.sqrtm(a).real,
          jsp.linalg.block_diag(a[:2, :2], b), jsp.linalg.toeplitz(b[:, 0]))


_add("scipy_linalg", scipy_linalg, (_spd(72, 4), _uniform(73, (4, 2))),
     grad_argnums=(1,), notes="expm, solve_triangular, cho_factor/solve, lu_factor/solve, "
                              "sqrtm (uses schur)")


def linalg_cpu_only(a, d, dl, du, b):
  w, vr = jnp.linalg.eig(a)
  wv = jnp.linalg.eigvals(a)
  t, z = jsp.linalg.schur(a)
  h, qh = jsp.linalg.hessenberg(a, calc_q=True)
  hh, taus = lax.linalg.hessenberg(a)
  q = lax.linalg.householder_product(hh, taus)
  arr, dd, ee, tt = lax.linalg.tridiagonal(a + a.T, lower=True)
  x = lax.linalg.tridiagonal_solve(dl, d, du, b)
  return w, jnp.abs(vr), wv, t, z, h, qh, q, arr, dd, ee, tt, x


_add("linalg_cpu_only", linalg_cpu_only,
     (_uniform(74, (4, 4)), _uniform(75, (5,), 2.0, 3.0),
      jnp.concatenate([jnp.zeros(1), _uniform(76, (4,))]),
      jnp.concatenate([_uniform(77, (4,)), jnp.zeros(1)]), _uniform(78, (5, 2))),
     grad_argnums=None,
     notes="eig/schur/hessenberg/householder_product/tridiagonal are CPU-only "
           "(LAPACK); no grads for eig eigenvectors/schur")


def linalg_extra(a, w, c):
  r = jnp.linalg.cholesky(a).T                      # upper factor
  ru = lax.linalg.cholesky_update(r, w)             # rank-1 update
  sp = lax.linalg.symmetric_product(c, a, alpha=0.5, beta=2.0)   # 0.5 c c^T + 2 a
  # apply Q^T of the Householder reflectors stored below the diagonal of `a`
  oq = lax.linalg.ormqr(a, jnp.array([1.1, 1.2, 0.0]), c, left=True, transpose=True)
  qp, rp, piv = jsp.linalg.qr(a, pivoting=True)
  return ru, sp, oq, jnp.abs(qp), jnp.abs(rp), piv


_add("linalg_extra", linalg_extra,
     (_spd(84, 3), _uniform(85, (3,)), _uniform(86, (3, 2))), grad_argnums=None,
     vmap=False, notes="cholesky_update / symmetric_product / ormqr (no JVP; "
                       "cholesky_update has no batching rule); pivoted qr")


def tridiagonal_solve_grad(d, b):
  dl = jnp.concatenate([jnp.zeros(1), 0.3 * jnp.ones(4)])
  du = jnp.concatenate([0.2 * jnp.ones(4), jnp.zeros(1)])
  return lax.linalg.tridiagonal_solve(dl, d, du, b)


_add("tridiagonal_solve_grad", tridiagonal_solve_grad,
     (_uniform(79, (5,), 2.0, 3.0), _uniform(80, (5, 2))), grad_argnums=(0, 1))


def linalg_batched(a, b):
  L = jnp.linalg.cholesky(a)
  x = jsp.linalg.cho_solve((L, True), b)
  w = jnp.linalg.eigvalsh(a)
  return x, w, jnp.linalg.det(a), jnp.linalg.inv(a) @ b, jnp.linalg.qr(a, mode="r")


_add("linalg_batched", linalg_batched,
     (jnp.stack([_spd(81, 3), _spd(82, 3)]), _uniform(83, (2, 3, 2))), grad_argnums=(0, 1))


# ===========================================================================
# 7. jax.random with typed keys
# ===========================================================================

def random_sampling(x):
  key = jax.random.key(42)
  k1, k2, k3, k4, k5, k6, k7, k8 = jax.random.split(key, 8)
  k1 = jax.random.fold_in(k1, 7)
  return (
      x + jax.random.normal(k1, x.shape),
      x * jax.random.uniform(k2, x.shape, minval=-1.0, maxval=2.0),
      jax.random.bernoulli(k3, 0.3, x.shape),
      jax.random.categorical(k4, jnp.log(jnp.abs(x) + 0.1), axis=-1),
      jax.random.permutation(k5, 6), jax.random.permutation(k5, x, axis=1),
      jax.random.randint(k6, (3,), 0, 10),
      jax.random.truncated_normal(k7, -1.0, 1.0, (2,)),
      jax.random.choice(k8, 6, (3,), replace=False),
      jax.random.gumbel(k8, (2,)), jax.random.exponential(k7, (2,)),
      jax.random.bits(k6, (2,), jnp.uint32), jax.random.bits(k6, (2,), jnp.uint8),
  )


_add("random_sampling", random_sampling, (_uniform(84, (2, 6)),),
     notes="typed keys created inside (random_seed/random_split/random_fold_in/"
           "random_bits/random_wrap/random_unwrap)")


def random_key_arg(key, x):
  k1, k2 = jax.random.split(key)
  data = jax.random.key_data(k1)
  rewrapped = jax.random.wrap_key_data(data)
  eps = jax.random.normal(rewrapped, x.shape)
  keys = jax.random.split(k2, (2, 3))
  u = jax.vmap(jax.vmap(lambda k: jax.random.uniform(k)))(keys)
  return x + eps, data, u, jax.random.fold_in(key, 3), keys


_add("random_key_arg", random_key_arg, (jax.random.key(0), _uniform(85, (4,))),
     grad_argnums=(1,), notes="typed PRNG key as an argument and as outputs")


def random_gamma_family(key, a):
  k1, k2 = jax.random.split(key)
  # (beta / dirichlet / loggamma are wrappers around the same random_gamma
  # primitive and very slow to compile on CPU, so only gamma is used)
  return jax.random.gamma(k1, a), jax.random.normal(k2, (3,), jnp.bfloat16)


_add("random_gamma_family", random_gamma_family,
     (jax.random.key(1), _uniform(86, (4,), 0.5, 3.0)), grad_argnums=(1,),
     notes="random_gamma primitive; its grad uses random_gamma_grad")


def random_impls_and_raw(x, raw):
  legacy = jax.random.PRNGKey(3)  # raw uint32[2] key
  a = jax.random.normal(legacy, (4,))
  rbg = jax.random.key(5, impl="rbg")
  b = jax.random.uniform(rbg, (4,))
  k = jax.random.wrap_key_data(raw, impl="threefry2x32")
  c = jax.random.normal(k, (4,))
  t = jax.extend.random.threefry_2x32(raw, jnp.arange(4, dtype=jnp.uint32))
  new_state, bits = lax.rng_bit_generator(jnp.arange(4, dtype=jnp.uint32), (2, 3),
                                          dtype=jnp.uint32)
  nst2, bits2 = lax.rng_bit_generator(jnp.arange(4, dtype=jnp.uint32), (3,),
                                      algorithm=lax.RandomAlgorithm.RNG_THREE_FRY,
                                      dtype=jnp.uint8)
  return x * a + b + c, t, new_state, bits, nst2, bits2, jax.random.key_data(rbg)


_add("random_impls_and_raw", random_impls_and_raw,
     (_uniform(87, (4,)), jnp.array([0, 17], jnp.uint32)), grad_argnums=(0,),
     notes="legacy uint32 keys, rbg impl, threefry2x32 primitive, rng_bit_generator")


def random_clone_and_rng_uniform(key, x):
  k = jax.random.clone(key)
  u = lax.rng_uniform(0.0, 1.0, x.shape)       # stateful XLA RNG: values differ per call
  n = lax.rng_uniform(jnp.int32(0), jnp.int32(1), (2,))  # always 0
  # floor(u) == 0 for u in [0, 1): the outputs stay deterministic
  return x + lax.floor(u) + jax.random.normal(k, x.shape), n


_add("random_clone_and_rng_uniform", random_clone_and_rng_uniform,
     (jax.random.key(11), _uniform(606, (3,))), grad_argnums=(1,),
     notes="random_clone; lax.rng_uniform (nondeterministic, so its values are "
           "masked out of the outputs)")


# ===========================================================================
# 8. jax.scipy special / stats / optimize
# ===========================================================================

def scipy_special(x):
  sp = jsp.special
  a = jnp.array([0.5, 1.0, 2.0, 3.0, 4.0])
  return (
      sp.logsumexp(x), sp.logsumexp(x, b=jnp.abs(x) + 0.1, return_sign=True)[0],
      sp.gammaln(x + 0.5), sp.betaln(x + 0.5, a), sp.erf(x), sp.erfc(x), sp.erfinv(x),
      sp.xlogy(x, x + 0.1), sp.xlog1py(x, x), sp.entr(x), sp.i0e(x), sp.i1e(x),
      sp.i0(x), sp.i1(x), sp.ndtr(x), sp.ndtri(x), sp.log_ndtr(x), sp.logit(x),
      sp.expit(x), sp.digamma(x + 0.5), sp.polygamma(1, x + 0.5), sp.zeta(x + 2.0, a),
      sp.gammainc(a, x), sp.betainc(a, a + 1.0, x),
      sp.multigammaln(x + 2.0, 2), sp.kl_div(x, 0.5), sp.rel_entr(x, 0.5),
      sp.softmax(x), sp.log_softmax(x), sp.erfcx(x),
      sp.factorial(a), sp.gamma(x + 0.5),
  )


_add("scipy_special", scipy_special, (_uniform(88, (5,), 0.1, 0.9),))


def numpyro_logdensity(params, y, x):
  st = jsp.stats
  alpha, beta = params["alpha"], params["beta"]
  sigma = jnp.exp(params["log_sigma"])
  tau = jax.nn.softplus(params["tau_raw"])
  lp = st.norm.logpdf(alpha, 0.0, 10.0)
  lp += jnp.sum(st.norm.logpdf(beta, 0.0, tau))
  lp += st.gamma.logpdf(sigma, 2.0, scale=1.0) + params["log_sigma"]
  # half-Cauchy prior on tau (+ log|d softplus|)
  lp += jnp.log(2.0) + st.cauchy.logpdf(tau, 0.0, 1.0) + jnp.log(jax.nn.sigmoid(params["tau_raw"]))
  mu = alpha + x @ beta
  lp += jnp.sum(st.norm.logpdf(y, mu, sigma))
  lp += jnp.sum(st.t.logpdf(y, df=4.0, loc=mu, scale=sigma))
  lp += st.beta.logpdf(jax.nn.sigmoid(alpha), 2.0, 2.0)
  lp += jnp.sum(st.poisson.logpmf(jnp.arange(3), jnp.exp(alpha)))
  lp += jnp.sum(st.bernoulli.logpmf(y > 0, jax.nn.sigmoid(mu)))
  lp += st.multivariate_normal.logpdf(beta, jnp.zeros(3), jnp.eye(3) * 2.0)
  lp += st.dirichlet.logpdf(jax.nn.softmax(beta), jnp.ones(3) * 2.0)
  lp += jnp.sum(st.laplace.logpdf(y, mu, 1.0)) + jnp.sum(st.cauchy.logcdf(y))
  return lp


_add("numpyro_logdensity", numpyro_logdensity,
     ({"alpha": jnp.float32(0.3), "beta": _normal(89, (3,)),
       "log_sigma": jnp.float32(-0.2), "tau_raw": jnp.float32(0.5)},
      _normal(90, (8,)), _normal(91, (8, 3))),
     notes="numpyro-style unnormalized log density with jax.scipy.stats")


def scipy_optimize_bfgs(x0, c):
  def quad(x):
    a = jnp.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.1], [0.0, 0.1, 1.0]])
    return 0.5 * x @ a @ x - c @ x + 0.1 * jnp.sum(x ** 4)

  res = jsp.optimize.minimize(quad, x0, method="BFGS", options={"maxiter": 20})
  return res.x, res.fun, res.nit, res.success


_add("scipy_optimize_bfgs", scipy_optimize_bfgs,
     (_uniform(92, (3,)), jnp.array([1.0, -1.0, 0.5])), grad_argnums=None,
     notes="BFGS -> while_loop with line-search; not reverse-differentiable")


# ===========================================================================
# 9. control flow
# ===========================================================================

def cond_switch(x, i):
  a = lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x)
  b = lax.switch(i, [lambda v, s: v + s, lambda v, s: v * s, lambda v, s: v - s], x, 2.0)
  # pytree operands and outputs, operand unused in one branch
  c, d = lax.cond(i > 0, lambda t: (t["p"] * 2, t["q"]), lambda t: (t["q"], jnp.ones(4)),
                  {"p": x, "q": x ** 2})
  e = lax.switch(jnp.clip(i, 0, 1), [lambda: jnp.float32(1.0), lambda: jnp.float32(2.0)])
  f = lax.cond(True, lambda: x, lambda: -x)  # constant predicate
  g = lax.select_n(i, x, x + 1, x + 2)
  return a, b, c, d, e, f, g


_add("cond_switch", cond_switch, (_uniform(93, (4,)), jnp.int32(1)))


def while_loop_newton(x):
  def cond(c):
    it, y, err = c
    return (it < 20) & (err > 1e-6)

  def body(c):
    it, y, _ = c
    y_new = 0.5 * (y + x / y)
    return it + 1, y_new, jnp.max(jnp.abs(y_new - y))

  it, y, err = lax.while_loop(cond, body, (0, jnp.ones_like(x), jnp.float32(1.0)))
  return it, y, err


_add("while_loop_newton", while_loop_newton, (_uniform(94, (4,), 0.5, 4.0),),
     grad_argnums=None, notes="while_loop with tuple carry and batched predicate under vmap")


def fori_loop_static(x, w):
  def body(i, c):
    h, acc = c
    h = jnp.tanh(h @ w + i.astype(jnp.float32) * 0.1)
    return h, acc + jnp.sum(h)

  h, acc = lax.fori_loop(0, 5, body, (x, 0.0))
  h2 = lax.fori_loop(0, 3, lambda i, v: v * 0.9 + x, x, unroll=True)
  return h, acc, h2


_add("fori_loop_static", fori_loop_static, (_uniform(95, (3,)), _uniform(96, (3, 3))),
     grad_argnums=(0, 1), notes="static trip count -> scan")


def fori_loop_dynamic(x, n):
  y = lax.fori_loop(0, n, lambda i, v: v * 0.5 + jnp.sin(v) + i, x)
  z = lax.fori_loop(n, 2 * n, lambda i, v: v + i, jnp.int32(0))
  return y, z


_add("fori_loop_dynamic", fori_loop_dynamic, (_uniform(97, (3,)), jnp.int32(4)),
     grad_argnums=None, notes="dynamic trip count -> while")


def scan_variants(xs, c0, w):
  def step(carry, x):
    h, cnt = carry
    h = jnp.tanh(h @ w + x)
    return (h, cnt + 1), (h, jnp.sum(h))

  (h, cnt), (hs, sums) = lax.scan(step, (c0, 0), xs)
  (hr, _), hsr = lax.scan(step, (c0, 0), xs, reverse=True, unroll=2)
  # no xs, only length; ys None
  c, _ = lax.scan(lambda c, _: (c * 0.5 + 1.0, None), c0, None, length=3)
  # pytree xs, multiple carries, full unroll
  def step2(carry, inp):
    a, b = carry
    return (a + inp["u"], b * inp["v"]), a - b
  (a, b), d = lax.scan(step2, (c0, c0), {"u": xs, "v": jnp.ones_like(xs)}, unroll=True)
  return h, cnt, hs, sums, hr, hsr, c, a, b, d


_add("scan_variants", scan_variants,
     (_uniform(98, (5, 3)), _uniform(99, (3,)), _uniform(100, (3, 3))),
     grad_argnums=(0, 1, 2))


def lax_map_ops(xs):
  a = lax.map(lambda x: jnp.sum(jnp.sin(x) ** 2), xs)
  b = lax.map(lambda x: x @ x, xs, batch_size=2)
  return a, b


_add("lax_map_ops", lax_map_ops, (_uniform(101, (6, 4)),))


def nested_control_flow(xs, w):
  def step(h, x):
    def inner(i, hh):
      return lax.cond(i % 2 == 0, lambda v: jnp.tanh(v @ w), lambda v: v + x, hh)
    h = lax.fori_loop(0, 3, inner, h)
    h = lax.switch(jnp.int32(jnp.sum(x) > 0), [jnp.sin, jnp.cos], h)
    return h, jnp.sum(h)

  h, ys = lax.scan(step, jnp.zeros(3), xs)
  return h, ys


_add("nested_control_flow", nested_control_flow,
     (_uniform(102, (4, 3)), _uniform(103, (3, 3))), grad_argnums=(0, 1),
     notes="scan { fori(static)->scan { cond } ; switch }")


def nested_while_cond(x, n):
  def outer_body(c):
    i, v = c

    def inner_cond(cc):
      return cc[0] < i

    def inner_body(cc):
      j, u = cc
      u = lax.cond(j % 2 == 0, lambda t: t * 0.9, lambda t: t + 0.1, u)
      return j + 1, u

    _, v = lax.while_loop(inner_cond, inner_body, (0, v))
    return i + 1, v

  thresh = jnp.sum(x)  # cond_jaxpr closes over a traced value (cond consts)
  _, v = lax.while_loop(lambda c: (c[0] < n) & (jnp.sum(c[1]) < thresh + 100.0),
                        outer_body, (0, x))
  return v


_add("nested_while_cond", nested_while_cond, (_uniform(104, (3,)), jnp.int32(4)),
     grad_argnums=None, notes="while in while with cond inside; cond_fun with consts")


# ===========================================================================
# 10. jit / remat / named scopes
# ===========================================================================

@functools.partial(jax.jit, static_argnums=(1,))
def _inner_static(x, n):
  return x ** n + 1.0


@functools.partial(jax.jit, donate_argnums=(0,))
def _inner_donate(x, y):
  return x * y


@jax.jit
def _inner_outer(x):
  return _inner_donate(jnp.sin(x), x) + jax.jit(lambda z: z * 2, inline=True)(x)


def nested_jit(x, y):
  a = _inner_static(x, 3)
  b = _inner_donate(x + 1, y)
  c = _inner_outer(y)
  d = jax.jit(lambda u, v: (u @ v, u.sum()))(x.reshape(2, 2), y.reshape(2, 2))
  e = jax.jit(lambda u: u, keep_unused=True)(x)
  return a, b, c, d, e


_add("nested_jit", nested_jit, (_uniform(105, (4,)), _uniform(106, (4,))),
     grad_argnums=(0, 1), notes="jit eqns with donated_invars / static config / inline")


def _remat_mlp(ws, x):
  h = x
  for i, w in enumerate(ws):
    h = ad_checkpoint_name(jnp.tanh(h @ w), f"layer{i}")
  return jnp.sum(h ** 2)


ad_checkpoint_name = jax.ad_checkpoint.checkpoint_name  # noqa


def checkpoint_policies(ws, x):
  cp = jax.checkpoint_policies
  a = jax.checkpoint(_remat_mlp, policy=cp.dots_saveable)(ws, x)
  b = jax.checkpoint(_remat_mlp, policy=cp.nothing_saveable)(ws, x)
  c = jax.checkpoint(_remat_mlp, policy=cp.save_only_these_names("layer0"))(ws, x)
  d = jax.remat(_remat_mlp, prevent_cse=False)(ws, x)
  e = jax.checkpoint(lambda w, v, k: _remat_mlp(w, v * k), static_argnums=(2,),
                     policy=cp.dots_with_no_batch_dims_saveable)(ws, x, 2)
  f = jax.checkpoint(_remat_mlp, policy=cp.everything_saveable)(ws, x)
  return a, b, c, d, e, f


_ws = [_uniform(107, (4, 4)), _uniform(108, (4, 4))]
_add("checkpoint_policies", checkpoint_policies, (_ws, _uniform(109, (3, 4))),
     grad_argnums=(0, 1), notes="remat2 with different policies; name primitive")


def checkpoint_grad_traced(ws, x):
  cp = jax.checkpoint_policies
  f1 = jax.checkpoint(_remat_mlp, policy=cp.save_only_these_names("layer1"))
  f2 = jax.checkpoint(_remat_mlp, policy=cp.dots_saveable)
  return jax.grad(f1)(ws, x), jax.grad(f2, argnums=1)(ws, x)


_add("checkpoint_grad_traced", checkpoint_grad_traced, (_ws, _uniform(110, (3, 4))),
     grad_argnums=(0,), notes="jax.grad of remat'ed function traced into the program")


def _rnn_loss(w, xs):
  def step(h, x):
    return jnp.tanh(h @ w + x), jnp.sum(h)
  h, ys = lax.scan(step, jnp.zeros(w.shape[0]), xs)
  return jnp.sum(h) + jnp.sum(ys)


def checkpoint_scan_grad(w, xs):
  g1 = jax.grad(jax.checkpoint(_rnn_loss))(w, xs)
  g2 = jax.grad(jax.checkpoint(_rnn_loss, policy=jax.checkpoint_policies.dots_saveable),
                argnums=1)(w, xs)
  return g1, g2


_add("checkpoint_scan_grad", checkpoint_scan_grad,
     (_uniform(660, (3, 3), -0.5, 0.5), _uniform(661, (4, 3))), grad_argnums=(0, 1),
     notes="grad of a remat'ed scan: scan partial-eval hoists loop-invariant "
           "residuals into a closed_call eqn")


def named_scopes(x, w):
  with jax.named_scope("encoder"):
    with jax.named_scope("dense0"):
      h = jnp.tanh(x @ w)
    h = ad_checkpoint_name(h, "enc_out")
  with jax.named_scope("decoder"):
    y = jax.named_call(lambda v: v @ w.T, name="proj")(h)
  return y, lax.stop_gradient(h) * h


_add("named_scopes", named_scopes, (_uniform(111, (2, 4)), _uniform(112, (4, 4))),
     grad_argnums=(0, 1), notes="named_scope name stacks in source_info; named_call; "
                                "stop_gradient")


# ===========================================================================
# 11. custom derivatives
# ===========================================================================

def library_custom_derivs(x):
  nn = jax.nn
  return (
      nn.relu(x), nn.gelu(x, approximate=True), nn.gelu(x, approximate=False),
      nn.softplus(x), jnp.logaddexp(x, 0.5 * x), jnp.logaddexp2(x, x), nn.silu(x),
      nn.logsumexp(x, axis=-1), nn.softmax(x), nn.log_softmax(x, axis=0), nn.sigmoid(x),
      nn.elu(x), nn.celu(x), nn.selu(x), nn.leaky_relu(x), nn.hard_tanh(x), nn.relu6(x),
      nn.standardize(x, axis=-1), nn.one_hot(jnp.argmax(x, -1), 4), nn.glu(x),
      nn.mish(x), nn.squareplus(x), nn.log_sigmoid(x), nn.sparse_plus(x),
      jsp.special.logsumexp(x, axis=0), jnp.sinc(x), jnp.linalg.norm(x, axis=-1),
  )


_add("library_custom_derivs", library_custom_derivs, (_uniform(113, (3, 4)),),
     notes="jax.nn activations implemented with custom_jvp (relu, softplus, logsumexp...)")


@jax.custom_jvp
def safe_log(x):
  return jnp.log(x)


@safe_log.defjvp
def _safe_log_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return safe_log(x), t / jnp.maximum(x, 1e-3)  # differs from autodiff's t / x


@jax.custom_jvp
def sym_zero_fn(x, y):
  return x * jnp.sin(y)


def _sym_zero_jvp(primals, tangents):
  x, y = primals
  tx, ty = tangents
  out = sym_zero_fn(x, y)
  t = jnp.zeros_like(out)
  if not isinstance(tx, jax.custom_derivatives.SymbolicZero):
    t = t + tx * jnp.sin(y)
  if not isinstance(ty, jax.custom_derivatives.SymbolicZero):
    t = t + x * jnp.cos(y) * ty
  return out, t


sym_zero_fn.defjvp(_sym_zero_jvp, symbolic_zeros=True)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def scaled_tanh(x, scale):
  return scale * jnp.tanh(x)


@scaled_tanh.defjvp
def _scaled_tanh_jvp(scale, primals, tangents):
  (x,), (t,) = primals, tangents
  y = scaled_tanh(x, scale)
  return y, scale * (1 - jnp.tanh(x) ** 2) * t


def user_custom_jvp(x, y):
  f = jax.custom_jvp(lambda v: v ** 3)
  f.defjvps(lambda t, ans, v: 3 * v ** 2 * t)
  return (safe_log(x), sym_zero_fn(x, y), sym_zero_fn(x, 2.0), scaled_tanh(x, 3.0),
          f(y), jax.jvp(safe_log, (x,), (y,)))


_add("user_custom_jvp", user_custom_jvp,
     (_uniform(114, (4,), 0.0005, 2.0), _uniform(115, (4,))), grad_argnums=(0, 1),
     notes="safe_log rule differs from autodiff; symbolic_zeros=True; nondiff_argnums; defjvps")


@jax.custom_vjp
def clip_gradient(x):
  return x


def _clip_fwd(x):
  return x, None


def _clip_bwd(_, g):
  return (jnp.clip(g, -0.5, 0.5),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def scaled_grad(scale, x):
  return x


def _sg_fwd(scale, x):
  return x, None


def _sg_bwd(scale, _, g):
  return (g * scale,)


scaled_grad.defvjp(_sg_fwd, _sg_bwd)


@jax.custom_vjp
def fwd_residual(x, w):
  return jnp.sin(x) * w


def _fr_fwd(x, w):
  return fwd_residual(x, w), (x, w)   # residuals forward inputs unchanged


def _fr_bwd(res, g):
  x, w = res
  return jnp.cos(x) * w * g, jnp.sin(x) * g


fwd_residual.defvjp(_fr_fwd, _fr_bwd)


@jax.custom_gradient
def cg_square(x):
  return x ** 2, lambda g: (g * 2 * x + 1.0,)


def user_custom_vjp(x, w):
  return (clip_gradient(x * 3.0), scaled_grad(0.1, x * w), fwd_residual(x, w),
          cg_square(x), jax.vjp(fwd_residual, x, w)[1](jnp.ones_like(x)))


_add("user_custom_vjp", user_custom_vjp, (_uniform(116, (4,)), _uniform(117, (4,))),
     grad_argnums=(0, 1),
     notes="gradient clipping, nondiff_argnums, residuals forwarding inputs, "
           "custom_gradient")


def custom_vjp_grad_traced(x, w):
  def loss(x, w):
    return jnp.sum(clip_gradient(x * 3.0) * fwd_residual(x, w) + scaled_grad(2.0, w) ** 2)
  return jax.grad(loss, argnums=(0, 1))(x, w), jax.value_and_grad(
      lambda v: jnp.sum(safe_log(v) + sym_zero_fn(v, w)))(jnp.abs(x) + 0.5)


_add("custom_vjp_grad_traced", custom_vjp_grad_traced,
     (_uniform(118, (4,)), _uniform(119, (4,))), grad_argnums=(0, 1),
     notes="traced grads through custom_vjp/custom_jvp (bwd jaxprs inlined)")


def custom_linear_solve_ops(a, b):
  def matvec(v):
    return a @ v

  def solve(mv, rhs):
    return jnp.linalg.solve(a, rhs)

  def tsolve(vecmat, rhs):
    return jnp.linalg.solve(a.T, rhs)

  x1 = lax.custom_linear_solve(matvec, b, solve, transpose_solve=tsolve)
  x2 = lax.custom_linear_solve(matvec, b, solve, symmetric=True)
  x3, _ = jsp.sparse.linalg.cg(matvec, b, maxiter=10)
  x4, _ = jsp.sparse.linalg.bicgstab(matvec, b, maxiter=10)
  x5, _ = jsp.sparse.linalg.gmres(matvec, b, maxiter=3, restart=4)
  return x1, x2, x3, x4, x5


_add("custom_linear_solve_ops", custom_linear_solve_ops,
     (_spd(120, 4), _uniform(121, (4,))), grad_argnums=(0, 1),
     notes="custom_linear_solve (explicit and via jax.scipy.sparse.linalg cg/bicgstab/gmres)")


def linear_call_prog(t, x):
  # linear_call(fun, fun_transpose, residual_args, linear_args)
  y = jax.custom_derivatives.linear_call(
      lambda r, v: r * v + jnp.roll(v, 1), lambda r, ct: r * ct + jnp.roll(ct, -1), x, t)
  return y


_add("linear_call_prog", linear_call_prog, (_uniform(700, (3,)), _uniform(701, (3,), 1.0, 2.0)),
     grad_argnums=(0,), vmap=False,
     notes="custom_derivatives.linear_call (callee + transpose jaxprs); differentiable "
           "only w.r.t. the linear args, no batching rule")


def custom_root_sqrt(x):
  def f(y):
    return y * y - x

  def newton_solve(g, y0):
    return lax.fori_loop(0, 10, lambda i, y: y - g(y) / (2 * y), y0)

  def tangent_solve(g, y):
    return y / g(1.0)

  return lax.custom_root(f, jnp.ones_like(x), newton_solve, tangent_solve)


_add("custom_root_sqrt", custom_root_sqrt, (_uniform(122, (), 1.0, 4.0),),
     notes="lax.custom_root (implicit differentiation)")


@jax.custom_batching.custom_vmap
def cv_fn(x):
  return jnp.sin(x)


@cv_fn.def_vmap
def _cv_rule(axis_size, in_batched, x):
  return jnp.cos(x), in_batched[0]


def custom_vmap_prog(x):
  return cv_fn(x) + 1.0


_add("custom_vmap_prog", custom_vmap_prog, (_uniform(123, (4,)),), grad_argnums=None,
     notes="custom_vmap_call primitive (its rule saved as jaxprs per batching pattern); "
     "no autodiff rule defined")


def custom_vmap_jvp_prog(x, t):
  return jax.jvp(custom_vmap_prog, (x,), (t,))


_add("custom_vmap_jvp_prog", custom_vmap_jvp_prog, (_uniform(127, (4,)), _uniform(128, (4,))),
     grad_argnums=None, notes="the custom_vmap_call of a jvp: its rule is a plain function")


# ===========================================================================
# 12. symbolic shapes
# ===========================================================================

def sym_mlp(x, w, b):
  h = jax.nn.relu(x @ w + b)
  return h, jnp.sum(h, axis=0), h.reshape(-1), jnp.mean(h), x.shape[0] * jnp.ones(2)


_add("sym_mlp", sym_mlp,
     (_uniform(124, (3, 4)), _uniform(125, (4, 8)), _uniform(126, (8,))),
     grad_argnums=None, vmap=False, symbolic="b, 4; 4, 8; 8",
     notes="symbolic batch dim 'b'; compare via str() and by evaluating with concrete shapes")


def sym_shape_poly(x, y):
  b, n = x.shape
  z = jnp.concatenate([x, y], axis=0)                     # (b + c, n)
  io = lax.iota(jnp.int32, b)
  r = x.reshape(b * n)
  p = jnp.pad(x, ((1, 1), (0, 0)))                        # (b + 2, n)
  s = lax.scan(lambda c, row: (c + row, c), jnp.zeros(n), x)[1]
  t = jnp.broadcast_to(x[:, :1], (b, 2 * n))
  return z, io, r, p, s, t, jnp.sum(x[::2]), jnp.zeros((b, 2))


_add("sym_shape_poly", sym_shape_poly,
     (_uniform(127, (4, 3)), _uniform(128, (2, 3))), grad_argnums=None, vmap=False,
     symbolic="b, n; c, n",
     notes="dim expressions (b + c, b*n, b + 2, 2*n) in shapes and params; scan length b")


def sym_attention(x, wq):
  q = x @ wq
  s = jnp.einsum("btd,bsd->bts", q, x) / jnp.sqrt(jnp.float32(x.shape[-1]))
  t = x.shape[1]
  mask = jnp.tril(jnp.ones((t, t), bool))
  s = jnp.where(mask, s, -1e9)
  return jax.nn.softmax(s, axis=-1) @ x


_add("sym_attention", sym_attention, (_uniform(129, (2, 5, 4)), _uniform(130, (4, 4))),
     grad_argnums=None, vmap=False, symbolic="b, t, 4; 4, 4",
     notes="symbolic batch and sequence length")


# ===========================================================================
# 13. shard_map / sharding
# ===========================================================================

def shard_map_collectives(x):
  mesh = _mesh()

  def body(v):
    s = lax.psum(v, "x")
    idx = lax.axis_index("x")
    g = lax.all_gather(v, "x")
    gt = lax.all_gather(v, "x", tiled=True)
    return s * 2 + idx.astype(v.dtype), g, gt

  f = jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=(P(), P(), P()),
                    check_vma=False)
  g = jax.shard_map(lambda v: lax.psum(jnp.sin(v), "x"), mesh=mesh, in_specs=P("x"),
                    out_specs=P())
  return f(x), g(x)


_add("shard_map_collectives", shard_map_collectives, (_uniform(131, (4, 2)),),
     notes="shard_map on a 1-device mesh; psum (check_vma=False) and psum_invariant")


def shard_map_more_collectives(x):
  mesh = _mesh()

  def body(v):
    mx = lax.pmax(v, "x")
    mn = lax.pmin(v, "x")
    pp = lax.ppermute(v, "x", perm=[(0, 0)])
    a2a = lax.all_to_all(v[None], "x", 0, 0)[0]
    rs = lax.psum_scatter(v, "x", tiled=True)
    pm = lax.pmean(v, "x")
    return mx + mn + pp + a2a + rs + pm

  f = jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False)
  return f(x)


_add("shard_map_more_collectives", shard_map_more_collectives, (_uniform(132, (4, 2)),),
     grad_argnums=None, notes="pmax/pmin/ppermute/all_to_all/psum_scatter; pmax has no "
                              "transpose")


def sharding_and_misc(x):
  mesh = _mesh()
  s = jax.sharding.NamedSharding(mesh, P("x"))
  y = lax.with_sharding_constraint(x * 2, s)
  z = jax.device_put(y, jax.devices()[0])
  w = lax.optimization_barrier((z, x))
  c = jnp.array(z, copy=True)
  p = lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)
  return y, z, w[0] + w[1], c, lax.stop_gradient(x) * x, p


_add("sharding_and_misc", sharding_and_misc, (_uniform(133, (4, 2)),),
     notes="sharding_constraint, device_put, optimization_barrier, copy, "
           "platform_dependent (platform_index + cond)")


# ===========================================================================
# 14. transformations traced into the program
# ===========================================================================

def _mlp_apply(params, x):
  h = x
  for layer in params[:-1]:
    h = jax.nn.gelu(h @ layer["w"] + layer["b"])
  return h @ params[-1]["w"] + params[-1]["b"]


def _mlp_loss(params, x, y):
  logits = _mlp_apply(params, x)
  return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, logits.shape[-1]),
                           -1))


_MLP_PARAMS = [_dense_init(200, 4, 8), _dense_init(202, 8, 8), _dense_init(204, 8, 3)]
_MLP_X = _normal(206, (5, 4))
_MLP_Y = _randint(207, (5,), 0, 3)

_add("traced_grad", jax.grad(_mlp_loss), (_MLP_PARAMS, _MLP_X, _MLP_Y),
     notes="fn = jax.grad(mlp_loss); second-order grad in the grad test")


def traced_vmap(params, xs, ys):
  per_ex = jax.vmap(lambda x, y: _mlp_loss(params, x[None], y[None]), in_axes=(0, 0))(xs, ys)
  per_ex_grads = jax.vmap(jax.grad(_mlp_loss), in_axes=(None, 0, 0))(
      params, xs[:, None], ys[:, None])
  return per_ex, per_ex_grads, jax.vmap(jnp.outer, in_axes=(0, None), out_axes=1)(xs, xs[0])


_add("traced_vmap", traced_vmap, (_MLP_PARAMS, _MLP_X, _MLP_Y),
     notes="per-example losses and grads via vmap (in_axes None, out_axes=1)")


def traced_jvp(params, x, t):
  out, tan = jax.jvp(lambda v: _mlp_apply(params, v), (x,), (t,))
  return out, tan, jax.jacfwd(lambda v: jnp.tanh(v) * v)(x[0])


_add("traced_jvp", traced_jvp, (_MLP_PARAMS, _MLP_X, _normal(208, (5, 4))),
     grad_argnums=(0, 2))


def traced_hessian(x, a):
  f = lambda v: jnp.sum(jnp.tanh(a @ v) ** 2) + jnp.sum(v ** 4)
  return jax.hessian(f)(x), jax.jacrev(jax.grad(f))(x)


_add("traced_hessian", traced_hessian, (_uniform(209, (3,)), _uniform(210, (3, 3))),
     grad_argnums=(0, 1))


def traced_value_and_grad(params, x, y):
  def loss_aux(p):
    l = _mlp_loss(p, x, y)
    return l, {"l2": _sumall(jax.tree.map(lambda w: jnp.sum(w ** 2), p))}
  (l, aux), g = jax.value_and_grad(loss_aux, has_aux=True)(params)
  return l, aux, g


_add("traced_value_and_grad", traced_value_and_grad, (_MLP_PARAMS, _MLP_X, _MLP_Y))


def traced_linearize(x, t):
  # (no custom_vjp inside: linearize would leave an un-lowerable custom_lin eqn)
  f = lambda v: jnp.sin(v) * jnp.exp(-v ** 2) + safe_log(v * v + 1.0) * jnp.tanh(v)
  y, f_jvp = jax.linearize(f, x)
  y2, f_vjp = jax.vjp(f, x)
  return y, f_jvp(t), f_jvp(2 * t), y2, f_vjp(t)[0], jax.linear_transpose(f_jvp, x)(t)[0]


_add("traced_linearize", traced_linearize, (_uniform(211, (4,)), _uniform(212, (4,))),
     grad_argnums=(0, 1), notes="linearize + vjp + linear_transpose (custom_jvp inside)")


def traced_jacobians(x):
  f = lambda v: jnp.stack([jnp.sum(v ** 2), jnp.prod(v), jnp.max(v)])
  return jax.jacrev(f)(x), jax.jacfwd(f)(x), jax.jacfwd(jax.jacrev(lambda v: jnp.sum(v ** 3)))(x)


_add("traced_jacobians", traced_jacobians, (_uniform(213, (4,)),))


def traced_grad_of_scan(xs, w):
  def loss(w):
    h, _ = lax.scan(lambda h, x: (jnp.tanh(h @ w + x), None), jnp.zeros(3), xs)
    return jnp.sum(h ** 2)
  return jax.grad(loss)(w), jax.linearize(loss, w)[1](w)


_add("traced_grad_of_scan", traced_grad_of_scan,
     (_uniform(214, (6, 3)), _uniform(215, (3, 3))), grad_argnums=(0, 1),
     notes="partial-eval of scan (residual stacking, empty buffers) traced in")


# ===========================================================================
# 15. "real model" style programs
# ===========================================================================

def mlp_train_step(params, x, y, lr):
  loss, grads = jax.value_and_grad(_mlp_loss)(params, x, y)
  new_params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
  return new_params, loss


_add("mlp_train_step", mlp_train_step, (_MLP_PARAMS, _MLP_X, _MLP_Y, 0.1),
     notes="flax-style MLP: loss + grad + SGD update (lr is a weak-typed python float)")


def _layernorm(p, x, eps=1e-5):
  mu = jnp.mean(x, -1, keepdims=True)
  var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
  return (x - mu) * lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def _rmsnorm(scale, x):
  return x * lax.rsqrt(jnp.mean(x ** 2, -1, keepdims=True) + 1e-6) * scale


def _mha(p, x, n_heads, causal=True):
  b, t, d = x.shape
  hd = d // n_heads
  q = (x @ p["wq"]).reshape(b, t, n_heads, hd)
  k = (x @ p["wk"]).reshape(b, t, n_heads, hd)
  v = (x @ p["wv"]).reshape(b, t, n_heads, hd)
  s = jnp.einsum("bthd,bshd->bhts", q, k) / math.sqrt(hd)
  if causal:
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))
    s = jnp.where(mask[None, None], s, jnp.finfo(s.dtype).min)
  a = jax.nn.softmax(s, axis=-1)
  o = jnp.einsum("bhts,bshd->bthd", a, v).reshape(b, t, d)
  return o @ p["wo"]


def _transformer_block(p, x):
  h = x + _mha(p["attn"], _layernorm(p["ln1"], x), n_heads=2)
  m = _layernorm(p["ln2"], h)
  m = jax.nn.gelu(m @ p["mlp"]["w1"] + p["mlp"]["b1"]) @ p["mlp"]["w2"] + p["mlp"]["b2"]
  return h + m


def _tb_params(seed, d=16, f=32):
  s = 1 / math.sqrt(d)
  return {
      "ln1": {"scale": jnp.ones(d), "bias": jnp.zeros(d)},
      "ln2": {"scale": jnp.ones(d), "bias": jnp.zeros(d)},
      "attn": {k: _normal(seed + i, (d, d), s) for i, k in enumerate(["wq", "wk", "wv", "wo"])},
      "mlp": {"w1": _normal(seed + 5, (d, f), s), "b1": jnp.zeros(f),
              "w2": _normal(seed + 6, (f, d), 1 / math.sqrt(f)), "b2": jnp.zeros(d)},
  }


_TB_PARAMS = _tb_params(300)
_TB_X = _normal(310, (2, 8, 16))

_add("transformer_block_fwd", _transformer_block, (_TB_PARAMS, _TB_X),
     grad_argnums=(0, 1), notes="pre-LN block: MHA w/ causal softmax + layernorm + gelu MLP")


def transformer_block_grad(params, x):
  def loss(p):
    y = _transformer_block(p, x)
    return jnp.mean(y ** 2)
  return jax.grad(loss)(params)


_add("transformer_block_grad", transformer_block_grad, (_TB_PARAMS, _TB_X))


def attention_variants(q, k, v, bias, scale):
  o1 = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
  o2 = jax.nn.dot_product_attention(q, k, v, bias=bias, implementation="xla")
  m = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))[None, None]
  o3 = jax.nn.dot_product_attention(q, k, v, mask=m, scale=0.5, implementation="xla")
  return o1, o2, o3, _rmsnorm(scale, o1)


_add("attention_variants", attention_variants,
     (_normal(311, (2, 6, 2, 4)), _normal(312, (2, 6, 2, 4)), _normal(313, (2, 6, 2, 4)),
      _normal(314, (2, 2, 6, 6)), jnp.ones(4)),
     grad_argnums=(0, 1, 2, 3, 4), notes="jax.nn.dot_product_attention (xla impl) + rmsnorm")


def _conv_params(seed):
  return {
      "c1": {"w": _normal(seed, (3, 3, 3, 8), 0.3), "b": jnp.zeros(8)},
      "bn1": {"scale": jnp.ones(8), "bias": jnp.zeros(8)},
      "c2": {"w": _normal(seed + 1, (3, 3, 8, 8), 0.2), "b": jnp.zeros(8)},
      "dense": _dense_init(seed + 2, 8, 10),
  }


def convnet_loss(params, x, labels):
  dn = ("NHWC", "HWIO", "NHWC")
  h = lax.conv_general_dilated(x, params["c1"]["w"], (1, 1), "SAME",
                               dimension_numbers=dn) + params["c1"]["b"]
  mean = jnp.mean(h, axis=(0, 1, 2))
  var = jnp.var(h, axis=(0, 1, 2))
  h = (h - mean) * lax.rsqrt(var + 1e-5) * params["bn1"]["scale"] + params["bn1"]["bias"]
  h = jax.nn.relu(h)
  h = _maxpool(h)
  h = lax.conv_general_dilated(h, params["c2"]["w"], (1, 1), "SAME",
                               dimension_numbers=dn) + params["c2"]["b"]
  h = jax.nn.relu(h)
  h = jnp.mean(h, axis=(1, 2))
  logits = h @ params["dense"]["w"] + params["dense"]["b"]
  return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))


_CONV_PARAMS = _conv_params(400)
_CONV_X = _normal(410, (2, 8, 8, 3))
_CONV_Y = jnp.array([3, 7], jnp.int32)

_add("convnet_loss", convnet_loss, (_CONV_PARAMS, _CONV_X, _CONV_Y),
     notes="conv + batchnorm-like normalization + relu + maxpool + dense + xent")


def convnet_train_step(params, x, labels):
  loss, g = jax.value_and_grad(convnet_loss)(params, x, labels)
  return loss, jax.tree.map(lambda p, gg: p - 0.01 * gg, params, g)


_add("convnet_train_step", convnet_train_step, (_CONV_PARAMS, _CONV_X, _CONV_Y))


def lstm_scan(params, xs, h0):
  def cell(carry, x):
    h, c = carry
    z = x @ params["wx"] + h @ params["wh"] + params["b"]
    i, f, g, o = jnp.split(z, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h

  (h, c), hs = lax.scan(cell, (h0, jnp.zeros_like(h0)), xs)
  return jnp.mean(hs @ params["wy"]), h, c


_add("lstm_scan", lstm_scan,
     ({"wx": _normal(500, (4, 32), 0.5), "wh": _normal(501, (8, 32), 0.3),
       "b": jnp.zeros(32), "wy": _normal(502, (8, 2), 0.3)},
      _normal(503, (6, 4)), jnp.zeros(8)),
     grad_argnums=(0, 1, 2), notes="LSTM via scan over time")


def gru_bidirectional(params, xs):
  def cell(h, x):
    z = jax.nn.sigmoid(x @ params["wz"] + h @ params["uz"])
    r = jax.nn.sigmoid(x @ params["wr"] + h @ params["ur"])
    n = jnp.tanh(x @ params["wn"] + (r * h) @ params["un"])
    h = (1 - z) * n + z * h
    return h, h

  h0 = jnp.zeros(params["uz"].shape[0])
  _, fw = lax.scan(cell, h0, xs)
  _, bw = lax.scan(cell, h0, xs, reverse=True)
  return jnp.concatenate([fw, bw], -1)


_add("gru_bidirectional", gru_bidirectional,
     ({k: _normal(510 + i, (4 if k[0] == "w" else 6, 6), 0.4)
       for i, k in enumerate(["wz", "uz", "wr", "ur", "wn", "un"])},
      _normal(520, (5, 4))),
     grad_argnums=(0, 1))


def adam_update(grads, state, params):
  """optax.adam(1e-3) style: returns (updates applied params, new_state)."""
  b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3
  count = state["count"] + 1
  mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
  nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["nu"], grads)
  c = count.astype(jnp.float32)
  mu_hat = jax.tree.map(lambda m: m / (1 - b1 ** c), mu)
  nu_hat = jax.tree.map(lambda v: v / (1 - b2 ** c), nu)
  updates = jax.tree.map(lambda m, v: -lr * m / (jnp.sqrt(v) + eps), mu_hat, nu_hat)
  new_params = jax.tree.map(jnp.add, params, updates)
  return new_params, {"count": count, "mu": mu, "nu": nu}


_ADAM_PARAMS = {"dense": _dense_init(600, 4, 3), "emb": _normal(602, (5, 4))}
_ADAM_GRADS = jax.tree.map(lambda p: 0.1 * jnp.cos(p), _ADAM_PARAMS)
_ADAM_STATE = {"count": jnp.int32(3),
               "mu": jax.tree.map(lambda p: 0.01 * p, _ADAM_PARAMS),
               "nu": jax.tree.map(lambda p: 0.001 * p * p, _ADAM_PARAMS)}
_add("adam_update", adam_update, (_ADAM_GRADS, _ADAM_STATE, _ADAM_PARAMS),
     grad_argnums=(0, 1), notes="optax-style Adam; state has an int32 count (float0 grad)")


def sgd_momentum_clip_update(grads, momentum, params):
  """optax.chain(clip_by_global_norm(1.0), sgd(0.1, momentum=0.9, nesterov=True))."""
  gnorm = jnp.sqrt(_sumall(jax.tree.map(lambda g: jnp.sum(g * g), grads)))
  scale = jnp.minimum(1.0, 1.0 / (gnorm + 1e-6))
  grads = jax.tree.map(lambda g: g * scale, grads)
  mom = jax.tree.map(lambda m, g: 0.9 * m + g, momentum, grads)
  upd = jax.tree.map(lambda m, g: -0.1 * (g + 0.9 * m), mom, grads)
  wd = jax.tree.map(lambda p: -1e-4 * p, params)
  return jax.tree.map(lambda p, u, w: p + u + w, params, upd, wd), mom


_add("sgd_momentum_clip_update", sgd_momentum_clip_update,
     (_ADAM_GRADS, jax.tree.map(jnp.zeros_like, _ADAM_PARAMS), _ADAM_PARAMS),
     grad_argnums=(0, 1, 2))


# ---- equinox-style module --------------------------------------------------

class Module:
  """Minimal equinox-like base: dataclass subclasses become pytrees.

  Fields with ``metadata={"static": True}`` are treated as static (aux data).
  """

  def __init_subclass__(cls, **kw):
    super().__init_subclass__(**kw)
    dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    data = [f.name for f in fields if not f.metadata.get("static", False)]
    meta = [f.name for f in fields if f.metadata.get("static", False)]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)


def static_field(**kw):
  return dataclasses.field(metadata={"static": True}, **kw)


class Linear(Module):
  weight: jax.Array
  bias: jax.Array
  use_bias: bool = static_field(default=True)

  def __call__(self, x):
    y = x @ self.weight.T
    return y + self.bias if self.use_bias else y


class MLPModule(Module):
  layers: tuple
  activation: Callable = static_field(default=jax.nn.tanh)

  def __call__(self, x):
    for l in self.layers[:-1]:
      x = self.activation(l(x))
    return self.layers[-1](x)


def _make_eqx_mlp(seed):
  sizes = [(4, 6), (6, 6), (6, 2)]
  layers = tuple(Linear(_normal(seed + i, (o, i_), 0.5), _normal(seed + 10 + i, (o,), 0.1),
                        use_bias=(i != 1))
                 for i, (i_, o) in enumerate(sizes))
  return MLPModule(layers, activation=jax.nn.swish)


def equinox_module(model, x):
  y = jax.vmap(model)(x)
  grads = jax.grad(lambda m: jnp.sum(jax.vmap(m)(x) ** 2))(model)
  new_model = jax.tree.map(lambda p, g: p - 0.1 * g, model, grads)
  return y, new_model


_add("equinox_module", equinox_module, (_make_eqx_mlp(700), _normal(710, (5, 4))),
     notes="equinox-style frozen dataclass Module registered as pytree (static fields); "
           "grad w.r.t. the module; returns an updated module")


def vae_loss(params, x, key):
  enc, dec = params["enc"], params["dec"]
  h = jnp.tanh(x @ enc["w1"] + enc["b1"])
  mu = h @ enc["wmu"]
  logvar = h @ enc["wlv"]
  eps = jax.random.normal(key, mu.shape)
  z = mu + jnp.exp(0.5 * logvar) * eps           # reparameterization trick
  logits = jnp.tanh(z @ dec["w1"]) @ dec["w2"]
  rec = jnp.sum(jax.nn.softplus(logits) - x * logits, -1)  # BCE with logits
  kl = -0.5 * jnp.sum(1 + logvar - mu ** 2 - jnp.exp(logvar), -1)
  return jnp.mean(rec + kl)


_add("vae_loss", vae_loss,
     ({"enc": {"w1": _normal(800, (8, 6), 0.4), "b1": jnp.zeros(6),
               "wmu": _normal(801, (6, 2), 0.4), "wlv": _normal(802, (6, 2), 0.1)},
       "dec": {"w1": _normal(803, (2, 6), 0.4), "w2": _normal(804, (6, 8), 0.4)}},
      jnp.asarray(_uniform(805, (4, 8), 0, 1) > 0.5, jnp.float32), jax.random.key(9)),
     grad_argnums=(0,), notes="VAE ELBO with reparameterized normal sample; key argument")


# ===========================================================================
# 16. misc jnp / lax / state / composite
# ===========================================================================

def jnp_misc(x, y):
  return (
      jnp.clip(x, -0.5, 0.5), jnp.nan_to_num(x / (y - y)), jnp.isclose(x, y),
      jnp.polyval(jnp.array([1.0, -2.0, 0.5]), x), jnp.correlate(x[0], y[0], mode="same"),
      jnp.cross(x[:, :3], y[:, :3]), jnp.hypot(x, y), jnp.arctan2(x, y), jnp.heaviside(x, 0.5),
      jnp.fmod(x, 0.3), jnp.remainder(x, 0.3), jnp.floor_divide(x, 0.3), jnp.copysign(x, y),
      jnp.ldexp(x, jnp.int32(2)), jnp.frexp(x)[0], jnp.cov(x), jnp.corrcoef(x)[0],
      jnp.logspace(0, 1, 4), jnp.linspace(x[0, 0], 1.0, 5), jnp.eye(3, k=1),
      jnp.vander(x[0], 3), jnp.average(x, axis=0, weights=jnp.abs(y[:, 0]) + 0.1),
      jnp.einsum("ij,jk,kl->il", x, y.T, x), jnp.nanmean(jnp.where(x > 0, x, jnp.nan)),
      jnp.count_nonzero(x > 0), jnp.signbit(x), jnp.float_power(jnp.abs(x) + 1, 2.0),
      jnp.deg2rad(x), jnp.sinc(x), jnp.i0(x), jnp.gcd(jnp.arange(6), 4), jnp.lcm(jnp.arange(6), 4),
  )


_add("jnp_misc", jnp_misc, (_uniform(900, (3, 4)), _uniform(901, (3, 4))),
     grad_argnums=(0, 1))


def state_refs(x, y):
  r = jax.ref.new_ref(x)
  r[...] = r[...] * 2.0
  jax.ref.addupdate(r, ..., y)
  old = jax.ref.swap(r, 0, x[1])
  r[1:3] = jnp.zeros(2)
  acc = jax.ref.new_ref(jnp.float32(0.0))

  def body(i, c):
    acc[...] += r[i]
    return c + 1

  n = lax.fori_loop(0, 4, body, 0)
  return jax.ref.freeze(r), acc[...], old, n


_add("state_refs", state_refs, (_uniform(902, (4,)), _uniform(903, (4,))),
     grad_argnums=None, notes="mutable array refs: new_ref/get/swap/addupdate/freeze, "
                              "ref closed over by a fori_loop body")


def composite_prog(x):
  double = lax.composite(lambda v, *, k: v * k, name="my.scale")
  y = double(x, k=2.0)
  z = lax.composite(lambda a, b: (a + b, a - b), name="my.addsub", version=2)(x, y)
  return y, z


_add("composite_prog", composite_prog, (_uniform(904, (4,)),), grad_argnums=None,
     vmap=False, notes="lax.composite (attributes, version); composite has no JVP or "
                       "batching rule")


def tokens_and_barrier(x):
  t = lax.create_token()
  t2 = lax.after_all(t, lax.create_token())
  y = lax.optimization_barrier(x * 2)
  return y + 1, t2


_add("tokens_and_barrier", tokens_and_barrier, (_uniform(905, (3,)),), vmap=False,
     notes="create_token / after_all: token-typed values in the jaxpr")


def debug_check_prog(x):
  from jax.experimental import checkify
  checkify.debug_check(jnp.all(jnp.isfinite(x)), "x has non-finite entries: {}", x[0])
  checkify.debug_check(jnp.sum(x) > -100.0, "sum too small")
  return jnp.sin(x) * 2


_add("debug_check_prog", debug_check_prog, (_uniform(702, (4,)),),
     notes="checkify.debug_check -> 'check' eqns (effectful, error-tree params)")


def integer_programs(i, j):
  k = (i * 7 + j) % 5
  return (k, jnp.cumsum(i), jnp.argsort(j), jnp.bincount(k, length=5),
          jnp.where(i > j, i, j), jnp.maximum.reduce(i),
          jnp.right_shift(i, 1), jnp.left_shift(j, 2), jnp.floor_divide(i, 3),
          i.astype(jnp.uint16) * jnp.uint16(3), jnp.abs(i - j), jnp.sort(i)[::-1],
          i.at[j % 8].apply(lambda v: v * 2 + 1))  # scatter with a custom update_jaxpr


_add("integer_programs", integer_programs,
     (_randint(906, (8,), -20, 20), _randint(907, (8,), 0, 20)), grad_argnums=None)


def emb_lookup_softmax_xent(table, ids, labels):
  e = table[ids]                                    # gather
  logits = e @ table.T
  lse = jax.nn.logsumexp(logits, -1)
  return jnp.mean(lse - jnp.take_along_axis(logits, labels[..., None], -1)[..., 0])


_add("emb_lookup_softmax_xent", emb_lookup_softmax_xent,
     (_normal(908, (10, 4)), _randint(909, (2, 3), 0, 10), _randint(910, (2, 3), 0, 10)),
     notes="embedding gather -> scatter-add in grad")


_BIG_TABLE = np.linspace(-1.0, 1.0, 1 << 18, dtype=np.float32).reshape(512, 512)  # 1 MiB


def big_constant(x):
  return jnp.tanh(x @ jnp.asarray(_BIG_TABLE)).sum(-1)


_add("big_constant", big_constant, (_uniform(911, (4, 512)),),
     notes="closes over a 1 MiB constant, which jp.save stores in a data file (format 1.2)")


# ---------------------------------------------------------------------------

assert len(PROGRAMS) >= 65, len(PROGRAMS)


# --- host callbacks, saved by their registered names ---------------------------------

import jaxpr_proto as _jp  # noqa: E402

CALLBACK_LOG: list = []  # what the corpus's callbacks received, in order


@_jp.register_callback(name="corpus.record")
def _record(x, tag="io"):
  CALLBACK_LOG.append((tag, np.asarray(x).tolist()))


@_jp.register_callback(name="corpus.host_sin")
def _host_sin(x):
  return np.sin(np.asarray(x)).astype(np.asarray(x).dtype)


@_jp.register_callback(name="corpus.host_affine")
def _host_affine(x, y, *, scale):
  return (np.asarray(x) * np.asarray(scale) + np.asarray(y)).astype(np.float32)


def debug_callback_prog(x):
  jax.debug.callback(_record, x, tag="debug")
  jax.debug.callback(_record, jnp.sum(x), "sum")  # a static positional arg
  return jnp.sin(x) * 2


_add("debug_callback_prog", debug_callback_prog, (_uniform(906, (3,)),),
     notes="jax.debug.callback of a registered function, with static args")


def pure_callback_prog(x, y):
  a = jax.pure_callback(_host_sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                        vmap_method="sequential")
  b = jax.pure_callback(_host_affine, jax.ShapeDtypeStruct(x.shape, jnp.float32), x, y,
                        scale=jnp.float32(3.0), vmap_method="expand_dims")
  return a + b


_add("pure_callback_prog", pure_callback_prog, (_uniform(907, (3,)), _uniform(908, (3,))),
     grad_argnums=None, notes="jax.pure_callback with sequential and expand_dims vmap "
                              "methods and keyword args (not differentiable)")


def pure_callback_default(x):
  return jax.pure_callback(_host_sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + x


_add("pure_callback_default", pure_callback_default, (_uniform(911, (3,)),), grad_argnums=None,
     vmap=False, notes="jax.pure_callback with JAX's default vmap_method (None), which newer "
                       "JAX refuses to vmap")


def io_callback_prog(x):
  from jax.experimental import io_callback
  io_callback(_record, None, x, ordered=True)
  y = io_callback(_host_sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x * 2, ordered=True)
  io_callback(_record, None, y, ordered=True)
  return y + 1


_add("io_callback_prog", io_callback_prog, (_uniform(909, (3,)),), grad_argnums=None,
     vmap=False, notes="ordered io_callback: the calls keep their order (ordered IO "
                       "cannot be vmapped)")


def callback_shardings(x):
  from jax.experimental import io_callback
  one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
  a = jax.pure_callback(_host_sin, shape, x, sharding=one, vmap_method="sequential")
  return io_callback(_host_sin, shape, a, sharding=one) * 2


# (Callbacks lower only a SingleDeviceSharding, or a NamedSharding of a scalar mesh.)
_add("callback_shardings", callback_shardings, (_uniform(910, (3,)),), grad_argnums=None,
     vmap=False, notes="callbacks with a SingleDeviceSharding result")


# ===========================================================================
# Pallas kernels (pallas_call), in interpret mode so that the CPU runs them.
# Pallas is imported inside each program: only processes that trace them load it.
# ===========================================================================

def _pl():
  from jax.experimental import pallas as pl
  return pl


def _pltpu():
  from jax.experimental.pallas import tpu as pltpu
  return pltpu


def _pallas_add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def pallas_add(x, y):
  return _pl().pallas_call(_pallas_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                           interpret=True)(x, y)


_add("pallas_add", pallas_add, (_uniform(1001, (8, 16)), _uniform(1002, (8, 16))),
     grad_argnums=None, notes="elementwise Pallas kernel, one block (pallas_call has no "
                              "transpose: grad needs a custom_vjp)")


def _pallas_matmul_kernel(x_ref, y_ref, o_ref):
  pl = _pl()

  @pl.when(pl.program_id(2) == 0)
  def _():
    o_ref[...] = jnp.zeros_like(o_ref)
  o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def pallas_matmul(x, y, bm=8, bk=8, bn=8):
  pl = _pl()
  (m, k), (_, n) = x.shape, y.shape
  return pl.pallas_call(
      _pallas_matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // bm, n // bn, k // bk),
      in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)), interpret=True)(x, y)


_add("pallas_matmul", pallas_matmul, (_normal(1003, (16, 24)), _normal(1004, (24, 16))),
     grad_argnums=None, notes="blocked matmul: a 3-d grid, BlockSpecs with index maps, "
                              "accumulation over the k axis with program_id")


def _pallas_rowsum_kernel(x_ref, o_ref, acc_ref):
  pl = _pl()

  @pl.when(pl.program_id(1) == 0)
  def _():
    acc_ref[...] = jnp.zeros_like(acc_ref)
  acc_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)

  @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)
  def _():
    o_ref[...] = acc_ref[...]


def pallas_rowsum_tpu(x):
  pl, pltpu = _pl(), _pltpu()
  m, n = x.shape
  return pl.pallas_call(
      _pallas_rowsum_kernel, out_shape=jax.ShapeDtypeStruct((m, 1), x.dtype),
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=(m // 8, n // 8),
          in_specs=[pl.BlockSpec((8, 8), lambda i, j: (i, j))],
          out_specs=pl.BlockSpec((8, 1), lambda i, j: (i, 0)),
          scratch_shapes=[pltpu.VMEM((8, 1), jnp.float32)]),
      compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
      cost_estimate=pl.CostEstimate(flops=384, transcendentals=0, bytes_accessed=1600),
      interpret=True, name="rowsum")(x)


_add("pallas_rowsum_tpu", pallas_rowsum_tpu, (_normal(1005, (16, 24)),), grad_argnums=None,
     notes="a reduction over a grid axis into a VMEM scratch buffer, with Mosaic TPU "
           "compiler params, a cost estimate and a name")


def _pallas_gather_kernel(idx_ref, s_ref, x_ref, o_ref):
  o_ref[...] = x_ref[...] * s_ref[0] + s_ref[idx_ref[0]]


def pallas_prefetch_tpu(idx, s, x):
  """Scalar prefetch (idx picks each step's row block) and an SMEM operand."""
  pl, pltpu = _pl(), _pltpu()
  return pl.pallas_call(
      _pallas_gather_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=1, grid=(2,),
          in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                    pl.BlockSpec((8, 24), lambda i, idx_ref: (idx_ref[i], 0))],
          out_specs=pl.BlockSpec((8, 24), lambda i, idx_ref: (i, 0))),
      compiler_params=pltpu.CompilerParams(vmem_limit_bytes=1 << 20),
      input_output_aliases={2: 0}, interpret=True, metadata={"origin": "corpus"})(idx, s, x)


_add("pallas_prefetch_tpu", pallas_prefetch_tpu,
     (jnp.array([1, 0], jnp.int32), jnp.array([2.0, 0.5], jnp.float32), _normal(1006, (16, 24))),
     grad_argnums=None, vmap=False,
     notes="TPU scalar prefetch into the index maps, an SMEM operand, an input aliased to the "
           "output and metadata (Pallas cannot vmap scalar prefetch)")


def pallas_triton(x, y):
  pl = _pl()
  from jax.experimental.pallas import triton as pltriton
  spec = pl.BlockSpec((8, 16), lambda i: (i, 0))
  return pl.pallas_call(
      _pallas_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
      in_specs=[spec, spec], out_specs=spec,
      compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2), interpret=True)(x, y)


_add("pallas_triton", pallas_triton, (_uniform(1007, (16, 16)), _uniform(1008, (16, 16))),
     grad_argnums=None, notes="a kernel with Triton compiler params, over a 1-d grid")


def _pallas_square_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * x_ref[...]


def _pallas_square_bwd_kernel(x_ref, g_ref, o_ref):
  o_ref[...] = 2.0 * x_ref[...] * g_ref[...]


@jax.custom_vjp
def _pallas_square(x):
  return _pl().pallas_call(_pallas_square_kernel,
                           out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


def _pallas_square_fwd(x):
  return _pallas_square(x), x


def _pallas_square_bwd(x, g):
  return (_pl().pallas_call(_pallas_square_bwd_kernel,
                            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, g),)


_pallas_square.defvjp(_pallas_square_fwd, _pallas_square_bwd)


def pallas_custom_vjp(x):
  return jnp.sin(_pallas_square(x)) + x


_add("pallas_custom_vjp", pallas_custom_vjp, (_uniform(1009, (8, 16)),),
     notes="a Pallas forward kernel under jax.custom_vjp whose bwd is another Pallas kernel: "
           "grad of the loaded program runs the saved bwd kernel")


def _pallas_tpu_interpret_kernel(x_ref, o_ref):
  o_ref[...] = jnp.tanh(x_ref[...]) + 1.0


def pallas_tpu_interpret(x):
  pl, pltpu = _pl(), _pltpu()
  spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
  return pl.pallas_call(_pallas_tpu_interpret_kernel,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                        in_specs=[spec], out_specs=spec,
                        interpret=pltpu.InterpretParams())(x)


_add("pallas_tpu_interpret", pallas_tpu_interpret, (_uniform(1010, (16, 128)),),
     grad_argnums=None, notes="a kernel run by Pallas's TPU interpreter (interpret="
                              "InterpretParams(), which simulates the TPU on the CPU)")


# ===========================================================================
# 15. JAX's public options, each kind: shardings, precisions, accuracies
# ===========================================================================

def sharded_jit(x):
  mesh = _mesh()
  named = jax.sharding.NamedSharding(mesh, P("x"))
  one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  y = jax.jit(lambda v: jnp.sin(v) * 2, in_shardings=named, out_shardings=named)(x)
  return jax.jit(lambda v: v + 1, in_shardings=one, out_shardings=one)(y)


_add("sharded_jit", sharded_jit, (_uniform(1100, (4, 2)),), vmap=False,
     notes="jit with NamedSharding and SingleDeviceSharding in and out shardings")


def dot_precisions(a, b):
  outs = [lax.dot(a, b, precision=p) for p in (
      lax.DotAlgorithmPreset.F32_F32_F32, lax.DotAlgorithmPreset.BF16_BF16_F32,
      lax.DotAlgorithmPreset.DEFAULT, (lax.Precision.HIGHEST, lax.Precision.DEFAULT), "bfloat16")]
  return sum(outs)


_add("dot_precisions", dot_precisions, (_normal(1101, (4, 8)), _normal(1102, (8, 3))),
     grad_argnums=(0, 1), notes="dot_general with DotAlgorithmPresets and precision pairs")


def unary_accuracies(x):
  return (lax.exp(x, accuracy=lax.Tolerance(atol=1e-5, rtol=1e-5, ulps=0))
          + lax.tanh(x, accuracy=lax.AccuracyMode.HIGHEST)
          + lax.sin(x, accuracy=lax.Tolerance(ulps=2)))


_add("unary_accuracies", unary_accuracies, (_uniform(1103, (5,)),),
     notes="exp, tanh, sin with lax.Tolerance and lax.AccuracyMode accuracies")


def explicit_mesh_reshard(x):
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",),
                           axis_types=(jax.sharding.AxisType.Explicit,))
  y = jax.sharding.reshard(x, jax.sharding.NamedSharding(mesh, P("x")))
  return jnp.cos(y) * 3


_add("explicit_mesh_reshard", explicit_mesh_reshard, (_uniform(1104, (4, 2)),), vmap=False,
     notes="reshard to a NamedSharding over an explicit-axes mesh")


def run_state_prog(x):
  from jax._src.state.discharge import run_state  # (no public path)

  def body(ref):
    ref[...] = jnp.sin(ref[...]) * 2.0 + 1.0
  return run_state(body)(x)


_add("run_state_prog", run_state_prog, (_uniform(1105, (3,)),), grad_argnums=None, vmap=False,
     notes="run_state over one ref (JAX has no batching or linearization rule for it)")
