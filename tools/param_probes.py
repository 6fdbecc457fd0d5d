"""Probes of primitives that neither JAX's harnesses nor our corpus bind.

    probes() -> [maker, ...]   # maker() -> jax.make_jaxpr(f)(*args)

Each maker traces a small, valid program that uses a primitive the way users
write it, through JAX's public APIs (jax.experimental.sparse, Pallas TPU /
Triton / Mosaic GPU kernels, new-style PRNG keys, jax.ffi, compute_on,
layouts, collectives in shard_map, ...), so that tools/param_names.py can
record the params of its eqns (see UNBOUND_PRIMITIVES in
jaxpr_proto/compat/v0_*/params.py). The probes only trace: nothing lowers or
runs, so the TPU and GPU kernels trace on a CPU. A maker that raises (an API
this JAX lacks, one that needs a device) is skipped by the caller; APIs that
differ between JAX 0.10, 0.11 and 0.12 are looked up with getattr.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

_PROBES: list[Callable[[], Any]] = []


def _probe(fn: Callable[[], Any]) -> Callable[[], Any]:
  """Registers a maker (a function of no arguments returning a ClosedJaxpr)."""
  _PROBES.append(fn)
  return fn


def probes() -> list[Callable[[], Any]]:
  """The makers: each, called, returns the ClosedJaxpr of one program."""
  return list(_PROBES)


def _mesh1(name="x", axis_type=None):
  """A mesh of this process's first device, of one axis."""
  import jax
  if axis_type is None:
    return jax.make_mesh((1,), (name,))
  return jax.make_mesh((1,), (name,), axis_types=(axis_type,))


def _shard_map(f, mesh, in_specs, out_specs, **kw):
  import jax
  sm = getattr(jax, "shard_map", None)
  if sm is None:
    from jax.experimental.shard_map import shard_map as sm
  return sm(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)


# ---------------------------------------------------------------------------
# jax.experimental.sparse
# ---------------------------------------------------------------------------

def _dense(shape=(4, 4)):
  import numpy as np
  x = np.zeros(shape, np.float32)
  x.flat[::3] = np.arange(1, x.size // 3 + 2)[: len(x.flat[::3])]
  return x


# BCOO: fromdense, todense, dot_general (sparse x dense), transpose, sum_duplicates, sort_indices.
@_probe
def sparse_bcoo_basic():
  import jax
  from jax.experimental import sparse

  def f(x, y):
    m = sparse.BCOO.fromdense(x, nse=6)
    t = m.T.sort_indices().sum_duplicates(nse=6)
    return (m @ y).sum() + t.todense().sum()
  return jax.make_jaxpr(f)(_dense(), _dense())


# BCOO batched (n_batch=1, n_dense=1) and sparse x sparse dot (bcoo_spdot_general).
@_probe
def sparse_bcoo_batched_spdot():
  import jax
  from jax.experimental import sparse

  def f(x):
    a = sparse.bcoo_fromdense(x, nse=4, n_batch=1)
    b = sparse.bcoo_fromdense(x, nse=4, n_dense=1)
    s = sparse.bcoo_dot_general(a, a, dimension_numbers=(((2,), (2,)), ((0,), (0,))))
    return sparse.bcoo_todense(s).sum() + sparse.bcoo_todense(b).sum()
  return jax.make_jaxpr(f)(_dense((2, 4, 4)))


# BCOO extract and dot_general_sampled (the transpose of a sparse-dense dot's rhs).
@_probe
def sparse_bcoo_extract_sampled():
  import jax
  from jax.experimental import sparse

  def f(x, y):
    m = sparse.BCOO.fromdense(x, nse=6)
    e = sparse.bcoo_extract(m, y)
    s = sparse.bcoo_dot_general_sampled(x, y, m.indices,
                                        dimension_numbers=(((1,), (0,)), ((), ())))
    return e.data.sum() + s.sum()
  return jax.make_jaxpr(f)(_dense(), _dense())


# BCOO gradient: dot_general's transpose binds bcoo_dot_general_sampled and extract.
@_probe
def sparse_bcoo_grad():
  import jax
  from jax.experimental import sparse
  m = sparse.BCOO.fromdense(_dense(), nse=6)

  def f(data, y):
    a = sparse.BCOO((data, m.indices), shape=m.shape)
    return (a @ y).sum()
  return jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(m.data, _dense())


# BCSR: fromdense, todense, dot_general, extract.
@_probe
def sparse_bcsr():
  import jax
  from jax.experimental import sparse

  def f(x, y):
    m = sparse.BCSR.fromdense(x, nse=6)
    e = sparse.bcsr_extract(m.indices, m.indptr, y)
    return (m @ y).sum() + m.todense().sum() + e.sum()
  return jax.make_jaxpr(f)(_dense(), _dense())


# COO and CSR: fromdense, todense, matvec, matmat (and their transposes).
def _sparse_format(name):
  def probe():
    import jax
    from jax.experimental import sparse

    def f(x, v, b):
      m = getattr(sparse, name).fromdense(x, nse=6)
      return ((m @ v).sum() + (m @ b).sum() + (m.T @ v).sum() + m.todense().sum())
    return jax.make_jaxpr(f)(_dense(), _dense()[0], _dense())
  probe.__name__ = f"sparse_{name.lower()}"
  return _probe(probe)


for _name in ("COO", "CSR"):
  _sparse_format(_name)


# sparse.todense (the generic todense primitive) on a BCOO, and its gradient.
@_probe
def sparse_todense_generic():
  import jax
  from jax.experimental import sparse
  m = sparse.BCOO.fromdense(_dense(), nse=6)

  def f(data):
    return sparse.todense(sparse.BCOO((data, m.indices), shape=m.shape)).sum()
  return jax.make_jaxpr(jax.grad(f))(m.data)


# sparsify: a dense function evaluated on a BCOO.
@_probe
def sparse_sparsify():
  import jax
  import jax.numpy as jnp
  from jax.experimental import sparse
  m = sparse.BCOO.fromdense(_dense(), nse=6)

  @sparse.sparsify
  def f(a, y):
    return jnp.sum(a @ y, axis=0) + jnp.sum(a.T * 2.0, axis=1)
  return jax.make_jaxpr(f)(m, _dense())


# spsolve (CSR direct solver: a scipy callback on the CPU).
@_probe
def sparse_spsolve():
  import jax
  import numpy as np
  from jax.experimental import sparse
  a = np.eye(4, dtype=np.float32) * 2
  m = sparse.CSR.fromdense(a)
  return jax.make_jaxpr(lambda d, b: sparse.linalg.spsolve(d, m.indices, m.indptr, b))(
      m.data, np.ones(4, np.float32))


# ---------------------------------------------------------------------------
# jax.random with new-style keys and the other PRNG implementations
# ---------------------------------------------------------------------------

# threefry4x32, philox2x32 and philox4x32 keys: seed, split, fold_in, bits, uniform.
def _random_impl_probe(impl):
  def make():
    import jax

    def f(seed):
      k = jax.random.key(seed, impl=impl)
      k1, k2 = jax.random.split(k)
      k3 = jax.random.fold_in(k2, 3)
      return (jax.random.bits(k1, (4,)), jax.random.uniform(k3, (2, 3)),
              jax.random.key_data(k))
    return jax.make_jaxpr(f)(0)
  make.__name__ = f"random_{impl}"
  return make


for _impl in ("threefry4x32", "philox2x32", "philox4x32", "rbg", "unsafe_rbg"):
  _probe(_random_impl_probe(_impl))


# The bit generators of those implementations themselves (threefry4x32,
# philox2x32, philox4x32 primitives): jax.random binds only random_bits on a
# typed key; the key's implementation (jax.random.key_impl) generates the bits.
@_probe
def random_impl_generators():
  import jax
  import numpy as np

  def f(seed):
    outs = []
    for impl in ("threefry4x32", "philox2x32", "philox4x32"):
      k = jax.random.key(seed, impl=impl)
      gen = k.dtype._impl
      data = jax.random.key_data(k)
      outs += [gen.random_bits(data, 32, (4,)), gen.split(data, (2,)),
               gen.fold_in(data, np.uint32(3))]
    return outs
  return jax.make_jaxpr(f)(np.uint32(0))


# ---------------------------------------------------------------------------
# jax.ffi, compute_on, layouts, shard_alike, memory spaces, metadata
# ---------------------------------------------------------------------------

# jax.ffi.ffi_call of a target that need not exist (tracing never looks it up).
@_probe
def ffi_call():
  import jax
  import numpy as np
  ffi = getattr(jax, "ffi", None) or __import__("jax.extend.ffi").extend.ffi

  def f(x):
    out = ffi.ffi_call("jaxpr_proto_probe_target",
                       jax.ShapeDtypeStruct(x.shape, x.dtype),
                       vmap_method="broadcast_all")(x, alpha=np.float32(2.0), n=3,
                                                     name="probe")
    return out
  return jax.make_jaxpr(f)(np.ones(4, np.float32))


# ffi_call with several results, input_output_aliases and side effects.
@_probe
def ffi_call_effects():
  import jax
  import numpy as np

  def f(x):
    return jax.ffi.ffi_call(
        "jaxpr_proto_probe_target",
        (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((), np.int32)),
        has_side_effect=True, input_output_aliases={0: 0})(x, flag=True)
  return jax.make_jaxpr(f)(np.ones(4, np.float32))


def _compute_on(compute_type):
  """jax.experimental.compute_on's decorator: compute_on(type) as a context
  and decorator in JAX 0.10; compute_on(f, compute_type=, out_memory_spaces=)
  in JAX >= 0.11 (compute_on2 in 0.10)."""
  import inspect
  from jax.experimental import compute_on as mod
  fn = getattr(mod, "compute_on2", None)
  if fn is None and "out_memory_spaces" in inspect.signature(mod.compute_on).parameters:
    fn = mod.compute_on
  return fn


# compute_on as a context inside jit (JAX 0.10: a compute type on the inner jit's eqns).
@_probe
def compute_on_host():
  import jax
  import numpy as np
  from jax.experimental.compute_on import compute_on

  def f(x):
    with compute_on("device_host"):
      y = jax.jit(lambda x: x * 2)(x)
    return y + 1
  return jax.make_jaxpr(jax.jit(f))(np.ones(4, np.float32))


# The compute_on primitive (compute_on2 in JAX 0.10, compute_on in >= 0.11), with memory spaces.
@_probe
def compute_on_primitive():
  import jax
  import numpy as np
  fn = _compute_on("device_host")
  space = jax.memory.Space.Host if hasattr(jax, "memory") else None

  def g(x):
    return x * 2
  h = fn(g, compute_type="device_host", out_memory_spaces=space)
  return jax.make_jaxpr(jax.jit(lambda x: h(x) + 1))(np.ones(4, np.float32))


# with_layout_constraint (jax.experimental.layout).
@_probe
def layout_constraint():
  import jax
  import numpy as np
  from jax.experimental import layout
  Layout = getattr(layout, "Layout", None) or getattr(layout, "DeviceLocalLayout")
  wlc = getattr(layout, "with_layout_constraint", None)
  if wlc is None:
    from jax._src.pjit import with_layout_constraint as wlc
  return jax.make_jaxpr(lambda x: wlc(x * 2, Layout(major_to_minor=(0, 1))))(
      np.ones((4, 8), np.float32))


# shard_alike (jax.experimental.shard_alike).
@_probe
def shard_alike():
  import jax
  import numpy as np
  from jax.experimental.shard_alike import shard_alike
  return jax.make_jaxpr(lambda x, y: shard_alike(x * 2, y))(
      np.ones(4, np.float32), np.ones(4, np.float32))


# jax.debug.inspect_array_sharding inside jit.
@_probe
def inspect_sharding():
  import jax
  import numpy as np

  def f(x):
    jax.debug.inspect_array_sharding(x, callback=lambda s: None)
    return x * 2
  return jax.make_jaxpr(jax.jit(f))(np.ones(4, np.float32))


# jax.debug.visualize_array_sharding is eager; its jit form is inspect_sharding too.

# set_xla_metadata on values (xla_metadata_value) and as a context (jax.experimental.xla_metadata).
@_probe
def xla_metadata_value():
  import jax
  import numpy as np
  from jax.experimental import xla_metadata as xm

  def f(x):
    y = xm.set_xla_metadata(x * 2, _scheduling_group_id="1")
    with xm.set_xla_metadata(op_name_tag="probe"):
      z = y + 1
    return z
  return jax.make_jaxpr(f)(np.ones(4, np.float32))


# scheduling groups: xla_metadata_call (jax.experimental.scheduling_groups).
@_probe
def xla_metadata_call():
  import jax
  import numpy as np
  from jax.experimental import scheduling_groups as sg

  @sg.xla_metadata_call(_scheduling_group_id="1")
  def g(x):
    return x * 2
  return jax.make_jaxpr(lambda x: g(x) + 1)(np.ones(4, np.float32))


# scheduling_group as a decorator.
@_probe
def scheduling_group():
  import jax
  import numpy as np
  from jax.experimental import scheduling_groups as sg

  @sg.scheduling_group("probe")
  def g(x):
    return x * 2
  return jax.make_jaxpr(lambda x: g(x) + 1)(np.ones(4, np.float32))


# custom_partitioning (jax.experimental.custom_partitioning) with its rules.
@_probe
def custom_partitioning():
  import jax
  import numpy as np
  from jax.experimental.custom_partitioning import custom_partitioning
  from jax.sharding import NamedSharding, PartitionSpec as P

  @custom_partitioning
  def f(x):
    return x * 2

  def infer(mesh, arg_shapes, result_shape):
    return arg_shapes[0].sharding

  def partition(mesh, arg_shapes, result_shape):
    return mesh, lambda x: x * 2, arg_shapes[0].sharding, (arg_shapes[0].sharding,)

  f.def_partition(infer_sharding_from_operands=infer, partition=partition,
                  sharding_rule="i -> i")
  return jax.make_jaxpr(jax.jit(f))(np.ones(4, np.float32))


# jax.custom_vjp with optimize_remat (remat_opt), and its gradient.
@_probe
def remat_opt():
  import jax
  import jax.numpy as jnp
  import numpy as np

  @jax.custom_vjp
  def f(x):
    return jnp.sin(x)

  def fwd(x):
    return jnp.sin(x), jnp.cos(x)

  def bwd(c, g):
    return (c * g,)
  f.defvjp(fwd, bwd, optimize_remat=True)
  return jax.make_jaxpr(lambda x: (f(x).sum(), jax.grad(lambda y: f(y).sum())(x)))(
      np.ones(4, np.float32))


# jax.experimental.rnn: the cuDNN LSTM (rnn_fwd, and rnn_bwd under grad).
@_probe
def rnn_lstm():
  import jax
  import numpy as np
  from jax.experimental import rnn
  b, t, i, h, layers = 2, 3, 4, 5, 1
  nw = rnn.get_num_params_in_lstm(i, h, layers, False)
  args = (np.ones((b, t, i), np.float32), np.zeros((layers, b, h), np.float32),
          np.zeros((layers, b, h), np.float32), np.ones(nw, np.float32),
          np.full((b,), t, np.int32))

  def f(x, h0, c0, w, lens):
    y, hn, cn = rnn.lstm(x, h0, c0, w, lens, input_size=i, hidden_size=h,
                         num_layers=layers, dropout=0.0, bidirectional=False)
    return y.sum() + hn.sum() + cn.sum()
  return jax.make_jaxpr(jax.value_and_grad(f, argnums=(0, 3)))(*args)


# scaled_matmul / scaled_dot (jax.nn, block-scaled matmuls; cuDNN custom call).
@_probe
def scaled_matmul():
  import jax
  import numpy as np
  import jax.numpy as jnp
  lhs = np.ones((1, 32, 64), np.float32)
  rhs = np.ones((1, 16, 64), np.float32)
  ls = np.ones((1, 32, 2), np.float32)
  rs = np.ones((1, 16, 2), np.float32)

  def f(a, b, sa, sb):
    return jax.nn.scaled_matmul(a.astype(jnp.float8_e4m3fn), b.astype(jnp.float8_e4m3fn),
                                sa.astype(jnp.float8_e8m0fnu), sb.astype(jnp.float8_e8m0fnu))
  return jax.make_jaxpr(f)(lhs, rhs, ls, rs)


# jax.nn.scaled_dot_general (the quantize-and-dot of its configs).
@_probe
def scaled_dot_general():
  import jax
  import numpy as np
  cfgs = jax.nn.get_scaled_dot_general_config("mxfp8")
  return jax.make_jaxpr(lambda a, b: jax.nn.scaled_dot_general(
      a, b, (((1,), (0,)), ((), ())), configs=[cfgs, cfgs, cfgs]))(
          np.ones((32, 64), np.float32), np.ones((64, 32), np.float32))


# lax.scaled_dot (JAX >= 0.10 public, where present).
@_probe
def lax_scaled_dot():
  import jax
  import jax.numpy as jnp
  import numpy as np
  sd = getattr(jax.lax, "scaled_dot", None)
  if sd is None:
    from jax._src.lax.scaled_dot import scaled_dot as sd
  a = np.ones((32, 64), np.float32)
  b = np.ones((64, 32), np.float32)

  def f(a, b, sa, sb):
    return sd(a.astype(jnp.float8_e4m3fn), b.astype(jnp.float8_e4m3fn),
              lhs_scale=sa.astype(jnp.float8_e8m0fnu), rhs_scale=sb.astype(jnp.float8_e8m0fnu),
              dimension_numbers=(((1,), (0,)), ((), ())))
  return jax.make_jaxpr(f)(a, b, np.ones((32, 2), np.float32), np.ones((2, 32), np.float32))


# jax.nn.dot_product_attention with the cuDNN implementation (traces the GPU custom call).
@_probe
def cudnn_dot_product_attention():
  import jax
  import jax.numpy as jnp
  import numpy as np
  q = np.ones((1, 16, 2, 64), np.float32)

  def f(q, k, v):
    return jax.nn.dot_product_attention(q.astype(jnp.bfloat16), k.astype(jnp.bfloat16),
                                        v.astype(jnp.bfloat16), implementation="cudnn").sum()
  return jax.make_jaxpr(jax.value_and_grad(f, argnums=(0, 1, 2)))(q, q, q)


# lax.empty, lax.stage (public in newer JAX) and jnp zeros_like of a vmap'd custom rule.
@_probe
def lax_empty_stage():
  import jax
  import numpy as np
  import jax.numpy as jnp
  fs = []
  if hasattr(jax.lax, "empty"):
    fs.append(lambda x: jax.lax.empty((4,), jnp.float32) + x)
  if hasattr(jax.lax, "stage"):
    fs.append(lambda x: jax.lax.stage(np.ones(4, np.float32)) + x)
  if not fs:
    raise NotImplementedError
  return jax.make_jaxpr(lambda x: sum(f(x) for f in fs))(np.ones(4, np.float32))


# ---------------------------------------------------------------------------
# collectives inside shard_map over an abstract mesh of 2 devices (JAX skips
# collectives over axes of size 1, so a 1-device mesh would bind nothing)
# ---------------------------------------------------------------------------

def _collective_probe(name, body, n_in=1):
  """A maker tracing body(x) (x: f32[2] per device, varying over 'x') inside
  shard_map over a 2-device abstract mesh, with check_vma on."""
  def make():
    import jax
    import numpy as np
    from jax.sharding import AbstractMesh, AxisType, PartitionSpec as P
    mesh = AbstractMesh((2,), ("x",), axis_types=(AxisType.Auto,))
    g = _shard_map(body, mesh, P("x"), P("x"))
    return jax.make_jaxpr(g)(jax.ShapeDtypeStruct((4,), np.float32))
  make.__name__ = name
  return _probe(make)


def _varying(x):
  import jax
  return jax.lax.pcast(x, "x", to="varying")


# Unreduced -> invariant psum (vary_unreduced_cast, unreduced_psum).
_collective_probe("unreduced_psum", lambda x: __import__("jax").lax.psum(
    __import__("jax").lax.pcast(x, "x", to="unreduced"), "x") + x)
# Invariant -> reduced -> varying casts (preduced, reduced_vary_cast).
_collective_probe("preduced_reduced_vary_cast", lambda x: __import__("jax").lax.pcast(
    __import__("jax").lax.pcast(__import__("jax").lax.psum(x, "x"), "x", to="reduced"),
    "x", to="varying"))
# all_gather to an invariant (all_gather_invariant) and to a reduced value (all_gather_reduced).
_collective_probe("all_gather_invariant", lambda x: __import__("jax").lax.all_gather(
    x, "x", to="invarying", tiled=True)[:2] + x)
_collective_probe("all_gather_reduced", lambda x: __import__("jax").lax.pcast(
    __import__("jax").lax.all_gather(x, "x", to="reduced", tiled=True)[:2], "x", to="varying"))
# psum_scatter of an unreduced value (unreduced_reduce_scatter).
_collective_probe("unreduced_reduce_scatter", lambda x: __import__("jax").numpy.concatenate(
    [__import__("jax").lax.psum_scatter(__import__("jax").lax.pcast(x, "x", to="unreduced"),
                                        "x", tiled=True)] * 2))
# pbroadcast (the CollectiveBroadcast HLO).
_collective_probe("pbroadcast", lambda x: __import__("jax").lax.pbroadcast(x, "x", source=0))
# psend / precv (the Send / Recv HLOs; deprecated in JAX 0.12).
_collective_probe("psend_precv", lambda x: __import__("jax").lax.precv(
    __import__("jax").lax.psend(x, "x", [(0, 1), (1, 0)]),
    __import__("jax").ShapeDtypeStruct(x.shape, x.dtype), "x", [(0, 1), (1, 0)]))


# ragged_all_to_all, with offsets and sizes per device.
def _ragged(x):
  import jax
  import jax.numpy as jnp
  z = _varying(jnp.zeros(2, jnp.int32))
  s = _varying(jnp.ones(2, jnp.int32))
  return jax.lax.ragged_all_to_all(x, jnp.zeros_like(x), z, s, z, s, axis_name="x")


_collective_probe("ragged_all_to_all", _ragged)


# Asynchronous collectives (psum_start ... / the matching _done), where JAX
# exposes them (jax.lax.psum_scatter_start in 0.12; the rest in jax._src.lax.parallel).
def _async(x):
  import jax
  from jax._src.lax import parallel
  outs = []
  for start, args, kw in (("psum_start", (), {}),
                          ("all_gather_start", (), {"tiled": True}),
                          ("psum_scatter_start", (), {"tiled": True}),
                          ("all_to_all_start", (0, 0), {"tiled": True}),
                          ("ppermute_start", ([(0, 1), (1, 0)],), {}),
                          ("pbroadcast_start", (0,), {})):
    fn = getattr(jax.lax, start, None) or getattr(parallel, start, None)
    if fn is None:
      continue
    try:
      fut = fn(x, "x", *args, **kw)
      y = fut.done() if hasattr(fut, "done") else fut
    except Exception:
      continue
    outs.append(jax.numpy.resize(y, x.shape) * 0 if y.shape != x.shape else y)
  if not outs:
    raise NotImplementedError("no asynchronous collectives")
  return x + sum(outs)


_collective_probe("async_collectives", _async)


# ---------------------------------------------------------------------------
# Pallas TPU kernels (jax.experimental.pallas.tpu), traced with
# interpret=False: make_jaxpr traces the kernel body, nothing lowers to Mosaic.
# ---------------------------------------------------------------------------

def _tpu_probe(fn):
  """Registers fn(pl, pltpu, jnp) -> ClosedJaxpr as a probe."""
  def make():
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    return fn(pl, pltpu, jnp)
  make.__name__ = fn.__name__
  return _probe(make)


def _x(shape=(8, 128), dtype="float32"):
  import numpy as np
  return np.ones(shape, dtype)


def _trace_kernel(pl, kernel):
  """The jaxpr of a Mosaic pallas_call of `kernel` (one (8, 128) float32
  operand and output), traced only: nothing lowers, so no TPU is needed."""
  import jax
  x = _x()
  return jax.make_jaxpr(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                                       interpret=False))(x)


def _any(pl, pltpu):
  """The memory space of an operand left in HBM (pl.ANY, or pltpu.ANY)."""
  return getattr(pl, "ANY", None) or pltpu.ANY


def _sem_dma(pltpu):
  return pltpu.SemaphoreType.DMA


def _sem_regular(pltpu):
  return pltpu.SemaphoreType.REGULAR


# Local DMAs: make_async_copy(...).start()/.wait() between HBM and VMEM scratch (dma_start, dma_wait).
@_tpu_probe
def tpu_async_copy(pl, pltpu, jnp):
  import jax

  def kernel(x_hbm, o_hbm, buf, sem):
    c = pltpu.make_async_copy(x_hbm, buf, sem)
    c.start()
    c.wait()
    buf[...] = buf[...] * 2
    c2 = pltpu.make_async_copy(buf, o_hbm.at[pl.ds(0, 8)], sem)
    c2.start()
    c2.wait()
  x = _x()
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     in_specs=[pl.BlockSpec(memory_space=_any(pl, pltpu))],
                     out_specs=pl.BlockSpec(memory_space=_any(pl, pltpu)),
                     scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), _sem_dma(pltpu)],
                     interpret=False)
  return jax.make_jaxpr(f)(x)


# pltpu.async_copy / sync_copy (newer helpers), DMA into a slice, with add=True.
@_tpu_probe
def tpu_async_copy_helpers(pl, pltpu, jnp):
  import jax

  def kernel(x_hbm, o_hbm, buf, sems):
    pltpu.sync_copy(x_hbm, buf)
    c = pltpu.async_copy(buf, o_hbm, sems.at[0])
    c.wait()
    pltpu.sync_copy(x_hbm.at[pl.ds(0, 8)], buf, add=True)
  x = _x()
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     in_specs=[pl.BlockSpec(memory_space=_any(pl, pltpu))],
                     out_specs=pl.BlockSpec(memory_space=_any(pl, pltpu)),
                     scratch_shapes=[pltpu.VMEM(x.shape, x.dtype),
                                     pltpu.SemaphoreType.DMA((2,))],
                     interpret=False)
  return jax.make_jaxpr(f)(x)


# Remote DMAs and the barrier semaphore (a collective kernel: collective_id set),
# semaphore signal to a remote device, semaphore wait.
@_tpu_probe
def tpu_remote_copy_barrier(pl, pltpu, jnp):
  import jax

  def kernel(x_ref, o_ref, send_sem, recv_sem):
    me = jax.lax.axis_index("x")
    peer = jax.lax.rem(me + 1, 2)
    barrier = pltpu.get_barrier_semaphore()
    pl.semaphore_signal(barrier, 1, device_id=(peer,),
                        device_id_type=pl.DeviceIdType.MESH
                        if hasattr(pl, "DeviceIdType") else pltpu.DeviceIdType.MESH)
    pl.semaphore_wait(barrier, 1)
    c = pltpu.make_async_remote_copy(x_ref, o_ref, send_sem, recv_sem, device_id=(peer,),
                                     device_id_type=pl.DeviceIdType.MESH
                                     if hasattr(pl, "DeviceIdType") else
                                     pltpu.DeviceIdType.MESH)
    c.start()
    c.wait()

  def body(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=_any(pl, pltpu))],
        out_specs=pl.BlockSpec(memory_space=_any(pl, pltpu)),
        scratch_shapes=[_sem_dma(pltpu), _sem_dma(pltpu)],
        compiler_params=pltpu.CompilerParams(collective_id=0),
        interpret=False)(x)
  from jax.sharding import AbstractMesh, AxisType, PartitionSpec as P
  mesh = AbstractMesh((2,), ("x",), axis_types=(AxisType.Auto,))
  g = _shard_map(body, mesh, P("x"), P("x"), check_vma=False)
  return jax.make_jaxpr(g)(jax.ShapeDtypeStruct((16, 128), jnp.float32))


# Regular semaphores: signal, wait, read (scratch semaphores, an array of them).
@_tpu_probe
def tpu_semaphores(pl, pltpu, jnp):
  import jax

  def kernel(x_ref, o_ref, sem, sems):
    pl.semaphore_signal(sem, 2)
    pl.semaphore_signal(sems.at[1])
    v = pl.semaphore_read(sem)
    pl.semaphore_wait(sem, 2)
    pl.semaphore_wait(sems.at[1])
    o_ref[...] = x_ref[...] + v.astype(jnp.float32)
  x = _x()
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     scratch_shapes=[_sem_regular(pltpu), pltpu.SemaphoreType.REGULAR((2,))],
                     interpret=False)
  return jax.make_jaxpr(f)(x)


# run_scoped (pl.run_scoped, and pl.with_scoped where present) with VMEM and a semaphore.
@_tpu_probe
def tpu_run_scoped(pl, pltpu, jnp):
  def kernel(x_ref, o_ref):
    def scoped(tmp, sem):
      tmp[...] = x_ref[...] * 2
      pl.semaphore_signal(sem)
      pl.semaphore_wait(sem)
      o_ref[...] = tmp[...]
    pl.run_scoped(scoped, pltpu.VMEM((8, 128), jnp.float32), _sem_regular(pltpu))
    y = pl.run_scoped(lambda t: (t.__setitem__(Ellipsis, x_ref[...]), t[...])[1],
                      pltpu.VMEM((8, 128), jnp.float32))
    o_ref[...] += y
  return _trace_kernel(pl, kernel)


# emit_pipeline: an inner pipelined loop over HBM operands.
@_tpu_probe
def tpu_emit_pipeline(pl, pltpu, jnp):
  import jax

  def inner(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  def kernel(x_hbm, o_hbm):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    pltpu.emit_pipeline(inner, grid=(4,), in_specs=[spec], out_specs=[spec],
                        tiling=pltpu.Tiling.COMPACT)(x_hbm, o_hbm)
  x = _x((32, 128))
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     in_specs=[pl.BlockSpec(memory_space=_any(pl, pltpu))],
                     out_specs=pl.BlockSpec(memory_space=_any(pl, pltpu)),
                     interpret=False)
  return jax.make_jaxpr(f)(x)


# Vector ops of Mosaic: roll (static and dynamic shift, strided), bitcast, reciprocal.
@_tpu_probe
def tpu_vector_ops(pl, pltpu, jnp):
  import jax
  recip = getattr(pltpu, "reciprocal", None) or pl.reciprocal

  def kernel(x_ref, s_ref, o_ref, i_ref):
    x = x_ref[...]
    y = pltpu.roll(x, 3, 1) + pltpu.roll(x, s_ref[0], 0)
    y = y + pltpu.roll(x, 1, 1, stride=1, stride_axis=0)
    i_ref[...] = pltpu.bitcast(y, jnp.int32)
    o_ref[...] = recip(y, approx=True)
  x = _x()
  f = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                                        jax.ShapeDtypeStruct(x.shape, jnp.int32)),
                     in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                               pl.BlockSpec(memory_space=pltpu.SMEM)],
                     interpret=False)
  import numpy as np
  return jax.make_jaxpr(f)(x, np.ones(1, np.int32))


# Grids: program_id, num_programs, multiple_of in index arithmetic, scalar
# prefetch; a static grid, and a dynamic one (where num_programs is not a constant).
@_tpu_probe
def tpu_grid_ops(pl, pltpu, jnp):
  import jax
  import numpy as np

  def kernel(idx_ref, x_ref, o_ref):
    i = pl.program_id(0)
    n = pl.num_programs(0)
    start = pl.multiple_of(i * 8, 8)
    o_ref[...] = x_ref[...] + (start + n + idx_ref[0]).astype(jnp.float32)
  x = _x((32, 128))

  def call(grid, idx, x):
    gs = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=grid,
        in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid_spec=gs, interpret=False)(idx, x)

  def f(n, idx, x):
    y = call((4,), idx, x)
    try:
      y = y + call((n,), idx, x)
    except Exception:  # a JAX without dynamic grids
      pass
    return y
  return jax.make_jaxpr(f)(np.int32(4), np.zeros(1, np.int32), x)


# The kernel PRNG: prng_seed, prng_random_bits, stochastic_round, the stateful samplers.
@_tpu_probe
def tpu_prng(pl, pltpu, jnp):
  import jax

  def kernel(seed_ref, x_ref, o_ref, b_ref):
    pltpu.prng_seed(seed_ref[0])
    bits = pltpu.prng_random_bits((8, 128))
    b_ref[...] = bits
    r = pltpu.stochastic_round(x_ref[...], bits.astype(jnp.uint32), target_dtype=jnp.bfloat16)
    o_ref[...] = r.astype(jnp.float32) + pltpu.stateful_uniform((8, 128), jnp.float32)
  import numpy as np
  x = _x()
  f = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                                        jax.ShapeDtypeStruct(x.shape, jnp.int32)),
                     in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                               pl.BlockSpec(memory_space=pltpu.VMEM)],
                     interpret=False)
  return jax.make_jaxpr(f)(np.zeros(1, np.int32), x)


# Pallas TPU keys (pltpu.to_pallas_key) used inside a kernel: split / join of key words,
# jax.random in the kernel, and sample_block.
@_tpu_probe
def tpu_prng_keys(pl, pltpu, jnp):
  import jax

  def kernel(key_ref, o_ref):
    key = key_ref[0, ...]
    k1, k2 = jax.random.split(key)
    o_ref[...] = jax.random.uniform(k1, (8, 128)) + jax.random.bits(
        jax.random.fold_in(k2, 1), (8, 128)).astype(jnp.float32)
  key = pltpu.to_pallas_key(jax.random.key(0))
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                     in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                     interpret=False)
  return jax.make_jaxpr(lambda k: f(k[None]))(key)


# Tracing and timing helpers: trace_value, delay, touch (add_dependency), debug_check.
@_tpu_probe
def tpu_trace_delay_touch(pl, pltpu, jnp):
  def kernel(x_ref, o_ref):
    v = x_ref[0, 0]
    pltpu.trace_value("probe_value", v)
    pl.delay(100)
    o_ref[...] = x_ref[...]
    pltpu.touch(o_ref)
  return _trace_kernel(pl, kernel)


# Masked loads and stores (pltpu.load / pltpu.store with a mask).
@_tpu_probe
def tpu_masked_load_store(pl, pltpu, jnp):
  import jax

  def kernel(x_ref, o_ref):
    mask = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1) < 64
    v = pltpu.load(x_ref, mask=mask)
    pltpu.store(o_ref, v * 2, mask=mask)
  return _trace_kernel(pl, kernel)


# Packing of narrow types: pack_elementwise / unpack_elementwise.
@_tpu_probe
def tpu_pack_unpack(pl, pltpu, jnp):
  import jax

  def kernel(x_ref, y_ref, o_ref):
    p = pltpu.pack_elementwise([x_ref[...], y_ref[...]], packed_dtype=jnp.bfloat16)
    a = pltpu.unpack_elementwise(p, index=0, packed_dtype=jnp.bfloat16,
                                 unpacked_dtype=jnp.float32)
    o_ref[...] = a
  x = _x()
  return jax.make_jaxpr(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                                       interpret=False))(x, x)


# Explicit MXU control: matmul_push_rhs, matmul_acc_lhs, matmul_pop (the JAX 0.10
# API, by accumulator address; JAX >= 0.11 takes accumulator refs: skipped there).
@_tpu_probe
def tpu_mxu(pl, pltpu, jnp):
  import jax

  def kernel(x_ref, y_ref, o_ref):
    pltpu.matmul_push_rhs(y_ref[...], 0, 0)
    pltpu.matmul_acc_lhs(0, x_ref[...], 0, load_staged_rhs=0)
    o_ref[...] = pltpu.matmul_pop(0, (128, 128), jnp.float32, 0)
  x = _x((128, 128))
  return jax.make_jaxpr(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                                       interpret=False))(x, x)


# einshape (pltpu.einshape: reshapes and transposes of tiles).
@_tpu_probe
def tpu_einshape(pl, pltpu, jnp):
  import jax

  def kernel(x_ref, o_ref):
    o_ref[...] = pltpu.einshape("a(bc)->(ab)c", x_ref[...], b=2)
  x = _x((8, 256))
  return jax.make_jaxpr(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128),
                                                                              x.dtype),
                                       interpret=False))(x)


# core_map / pl.kernel over a TensorCore mesh, with scratch and a core barrier.
@_tpu_probe
def tpu_core_map(pl, pltpu, jnp):
  import jax
  mesh = pltpu.create_tensorcore_mesh("core", num_cores=1) if hasattr(
      pltpu, "create_tensorcore_mesh") else pltpu.TensorCoreMesh.create("core", num_cores=1)

  def body(x_ref, o_ref, buf):
    pltpu.sync_copy(x_ref, buf)
    buf[...] += 1
    pltpu.sync_copy(buf, o_ref)
  x = _x()
  f = pl.kernel(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh,
                scratch_shapes=[pltpu.VMEM(x.shape, x.dtype)]) if "scratch_shapes" in \
      __import__("inspect").signature(pl.kernel).parameters else pl.kernel(
          body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh,
          scratch_types=[pltpu.VMEM(x.shape, x.dtype)])
  return jax.make_jaxpr(f)(x)


# pl.core_map as a context over refs (jax.experimental.pallas run_state style).
@_tpu_probe
def tpu_core_map_state(pl, pltpu, jnp):
  import jax
  mesh = pltpu.create_tensorcore_mesh("core", num_cores=1) if hasattr(
      pltpu, "create_tensorcore_mesh") else pltpu.TensorCoreMesh.create("core", num_cores=1)

  def f(x):
    def stateful(refs):
      x_ref, o_ref = refs

      @pl.core_map(mesh)
      def _():
        pltpu.sync_copy(x_ref, o_ref)
    _, out = pl.run_state(stateful)((x, jnp.zeros_like(x)))
    return out
  return jax.make_jaxpr(f)(_x())


# with_memory_space_constraint (pltpu): pin an operand of a pallas_call to a memory space.
@_tpu_probe
def tpu_memory_space_constraint(pl, pltpu, jnp):
  import jax

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

  def f(x):
    y = pltpu.with_memory_space_constraint(x * 2, pltpu.HBM)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
                          out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
                          interpret=False)(y)
  return jax.make_jaxpr(f)(_x())


# Ref helpers in kernels: pl.broadcast_to, pl.get_global, pl.empty_ref_like.
@_tpu_probe
def tpu_ref_helpers(pl, pltpu, jnp):
  def kernel(x_ref, o_ref):
    o_ref[...] = pl.broadcast_to(x_ref[0:1, :], (8, 128)) if hasattr(pl, "broadcast_to") \
        else x_ref[...]
  return _trace_kernel(pl, kernel)


# A global semaphore (pl.get_global) signalled in a kernel.
@_tpu_probe
def tpu_get_global(pl, pltpu, jnp):
  def kernel(x_ref, o_ref):
    sem = pl.get_global(pltpu.SemaphoreType.REGULAR)
    pl.semaphore_signal(sem)
    pl.semaphore_wait(sem)
    o_ref[...] = x_ref[...]
  return _trace_kernel(pl, kernel)


# ---------------------------------------------------------------------------
# Pallas Triton and Mosaic GPU kernels: traced under make_jaxpr, no GPU needed
# ---------------------------------------------------------------------------

def _gpu_probe(fn):
  """Registers fn(pl, jnp) -> ClosedJaxpr as a probe."""
  def make():
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    return fn(pl, jnp)
  make.__name__ = fn.__name__
  return _probe(make)


# Triton: masked load/store with `other`, atomics (rmw and cas), debug_barrier,
# max_contiguous, multiple_of, num_programs, approx_tanh, elementwise_inline_asm.
@_gpu_probe
def triton_ops(pl, jnp):
  import jax
  from jax.experimental.pallas import triton as plt
  n = 64

  def kernel(x_ref, o_ref, c_ref):
    i = pl.program_id(0)
    off = pl.multiple_of(i * 16, 16) + plt.max_contiguous(jnp.arange(16), 16)
    mask = off < n
    x = plt.load(x_ref.at[off], mask=mask, other=0.0)
    x = plt.approx_tanh(x) + jnp.asarray(pl.num_programs(0), jnp.float32)
    plt.debug_barrier()
    plt.store(o_ref.at[off], x, mask=mask)
    plt.atomic_add(c_ref, 0, x.sum())
    plt.atomic_max(c_ref, 1, x.max())
    [y] = plt.elementwise_inline_asm("tanh.approx.f32 $0, $1;", args=[x], constraints="=r,r",
                                     pack=1, result_shape_dtypes=[jax.ShapeDtypeStruct(
                                         x.shape, x.dtype)])
    del y
  x = _x((n,))
  f = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((n,), jnp.float32),
                                        jax.ShapeDtypeStruct((4,), jnp.float32)),
                     grid=(4,),
                     in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                     out_specs=(pl.BlockSpec(memory_space=pl.ANY),
                                pl.BlockSpec(memory_space=pl.ANY)),
                     compiler_params=plt.CompilerParams(num_warps=4),
                     interpret=False)
  return jax.make_jaxpr(f)(x)


# Triton atomic compare-and-swap on an int32 counter.
@_gpu_probe
def triton_atomic_cas(pl, jnp):
  import jax
  import numpy as np
  from jax.experimental.pallas import triton as plt

  def kernel(lock_ref, o_ref):
    o_ref[...] = plt.atomic_cas(lock_ref, 0, 1)
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((), jnp.int32),
                     in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                     compiler_params=plt.CompilerParams(), interpret=False)
  return jax.make_jaxpr(f)(np.zeros((), np.int32))


def _mgpu():
  from jax.experimental.pallas import mosaic_gpu as plgpu
  return plgpu


# Mosaic GPU TMA copies: copy_gmem_to_smem with a barrier, barrier_wait, copy_smem_to_gmem,
# commit_smem, wait_smem_to_gmem, async_prefetch, print_layout, layout_cast.
@_gpu_probe
def mosaic_gpu_tma(pl, jnp):
  import jax
  plgpu = _mgpu()

  def kernel(x_gmem, o_gmem, smem, bar):
    plgpu.copy_gmem_to_smem(x_gmem, smem, bar)
    plgpu.barrier_wait(bar)
    v = smem[...]
    v = plgpu.layout_cast(v, plgpu.Layout.WGMMA)
    plgpu.print_layout("v: {}", v)
    smem[...] = v * 2
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(smem, o_gmem)
    plgpu.wait_smem_to_gmem(0)
  x = _x((128, 128))
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     in_specs=[pl.BlockSpec(memory_space=plgpu.GMEM)],
                     out_specs=pl.BlockSpec(memory_space=plgpu.GMEM),
                     scratch_shapes=[plgpu.SMEM(x.shape, x.dtype), plgpu.Barrier(num_arrivals=1)],
                     compiler_params=plgpu.CompilerParams(), interpret=False)
  return jax.make_jaxpr(f)(x)


# Mosaic GPU WGMMA: an accumulator ref, wgmma, wgmma_wait, the accumulator's load.
@_gpu_probe
def mosaic_gpu_wgmma(pl, jnp):
  import jax
  plgpu = _mgpu()

  def kernel(a_ref, b_ref, o_ref):
    def scope(acc_ref):
      plgpu.wgmma(acc_ref, a_ref, b_ref)
      plgpu.wgmma_wait(0)
      return acc_ref[...]
    o_ref[...] = pl.run_scoped(scope, plgpu.ACC((64, 128), jnp.float32))
  a = _x((64, 128), "float16")
  b = _x((128, 128), "float16")
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32),
                     in_specs=[pl.BlockSpec(memory_space=plgpu.SMEM)] * 2,
                     out_specs=pl.BlockSpec(memory_space=plgpu.SMEM),
                     compiler_params=plgpu.CompilerParams(), interpret=False)
  return jax.make_jaxpr(f)(a, b)


# Mosaic GPU plgpu.kernel with warpgroup threads: barrier_arrive, set_max_registers,
# griddepcontrol, semaphore signals, atomics.
@_gpu_probe
def mosaic_gpu_kernel(pl, jnp):
  import jax
  plgpu = _mgpu()

  def body(x_gmem, o_gmem, smem, bar):
    wg = jax.lax.axis_index("wg")

    @pl.when(wg == 0)
    def _():
      plgpu.set_max_registers(40, action="decrease")
      plgpu.copy_gmem_to_smem(x_gmem, smem, bar)
      plgpu.barrier_arrive(bar)

    @pl.when(wg == 1)
    def _():
      plgpu.set_max_registers(232, action="increase")
      plgpu.barrier_wait(bar)
      plgpu.griddepcontrol_wait()
      plgpu.commit_smem()
      plgpu.copy_smem_to_gmem(smem, o_gmem)
      plgpu.wait_smem_to_gmem(0)
      plgpu.griddepcontrol_launch_dependents()
  import inspect
  x = _x((128, 128))
  out = jax.ShapeDtypeStruct(x.shape, x.dtype)
  scratch = [plgpu.SMEM(x.shape, x.dtype), plgpu.Barrier(num_arrivals=1)]
  if "out_shape" in inspect.signature(plgpu.kernel).parameters:  # JAX 0.10
    f = plgpu.kernel(body, out_shape=out, scratch_shapes=scratch, num_threads=2,
                     thread_name="wg")
  else:
    f = plgpu.kernel(body, out_type=out, scratch_types=scratch, num_threads=2,
                     thread_name="wg")
  return jax.make_jaxpr(f)(x)
