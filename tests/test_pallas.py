"""Pallas kernels (`pallas_call`) round-trip: the kernel jaxpr, the grid
mapping with its block specs and index maps, scratch shapes, compiler
params, cost estimate, `interpret` and name. A loaded program prints like
the original, re-encodes to the same bytes and, in interpret mode on the
CPU, computes the same bits (and the same gradient through a custom_vjp
whose rules are Pallas kernels). Kernels traced for a TPU (Mosaic) or a GPU
(Triton, Mosaic GPU) save and load here; running them needs the accelerator
(tools/pallas_tpu_check.py). A decoded pallas_call whose parts do not fit
together is refused with a path."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

pl = pytest.importorskip("jax.experimental.pallas")
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import jaxpr_proto as jp  # noqa: E402
from jaxpr_proto.v1 import jaxpr_pb2 as pb  # noqa: E402
from tests import corpus  # noqa: E402
from tests.helpers import run_json, run_script  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROGRAMS = [p for p in corpus.PROGRAMS if p.name.startswith("pallas_")]


def _bits(xs):
  return [(np.asarray(x).dtype, np.asarray(x).shape, np.asarray(x).tobytes())
          for x in jax.tree.leaves(xs)]


@pytest.fixture(scope="module", params=PROGRAMS, ids=lambda p: p.name)
def program(request):
  p = request.param
  cj = corpus.trace(p)
  data = jp.dumps(cj)
  return p, cj, data, jp.loads(data)


def test_corpus_has_the_kernels():
  assert {"pallas_add", "pallas_matmul", "pallas_rowsum_tpu", "pallas_prefetch_tpu",
          "pallas_triton", "pallas_custom_vjp", "pallas_tpu_interpret"} <= {p.name for p in PROGRAMS}


def test_prints_and_reencodes(program):
  p, cj, data, cj2 = program
  assert str(cj2) == str(cj)
  kw = dict(source_info=True, name_stack=True)
  assert cj2.jaxpr.pretty_print(**kw) == cj.jaxpr.pretty_print(**kw)
  assert jp.dumps(cj2) == data
  m = jp.parse(data)
  assert "pallas" in m.required_features
  assert (m.format_version.major, m.format_version.minor) == (1, 3)
  assert jp.check(data).ok


def test_outputs_bitwise(program):
  p, cj, _, cj2 = program
  assert _bits(jax.jit(jaxpr_as_fun(cj2))(*p.args)) == _bits(jax.jit(jaxpr_as_fun(cj))(*p.args))
  assert _bits(jax.jit(jaxpr_as_fun(cj2))(*p.args)) == _bits(jax.jit(p.fn)(*p.args))


def test_vmap_bitwise(program):
  p, cj, _, cj2 = program
  if not p.vmap:
    pytest.skip(f"{p.name} is not vmapped ({p.notes})")
    return
  args = corpus.vmap_args(p)
  got = jax.jit(jax.vmap(jaxpr_as_fun(cj2)))(*args)
  assert _bits(got) == _bits(jax.jit(jax.vmap(jaxpr_as_fun(cj)))(*args))


def test_grad_through_custom_vjp_kernels():
  p = corpus.get("pallas_custom_vjp")
  cj = corpus.trace(p)
  cj2 = jp.loads(jp.dumps(cj))

  def loss(f):
    return jax.jit(jax.grad(lambda x: jnp.sum(f(x)[0])))
  g = loss(jaxpr_as_fun(cj2))(*p.args)
  assert _bits(g) == _bits(loss(jaxpr_as_fun(cj))(*p.args))
  x = p.args[0]
  np.testing.assert_allclose(g, 2 * x * jnp.cos(x * x) + 1, rtol=1e-6)
  # The bwd rule that grad runs is the saved Pallas kernel.
  text = str(jax.make_jaxpr(jax.grad(lambda x: jnp.sum(jaxpr_as_fun(cj2)(x)[0])))(x))
  assert text.count("pallas_call") == 2


# --- kernels traced for accelerators: save and load here -------------------------------

def _tpu_matmul(x, y):
  def kernel(a_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
      acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)
    def _():
      o_ref[...] = acc_ref[...].astype(o_ref.dtype)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype),
      grid=(2, 2),
      in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k)),
                pl.BlockSpec((128, 128), lambda i, k: (k, 0), pipeline_mode=pl.Buffered(2))],
      out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
      scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
      compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                           vmem_limit_bytes=32 << 20),
      cost_estimate=pl.CostEstimate(flops=2 * 16 * 256 * 128, transcendentals=0,
                                    bytes_accessed=4 * (16 * 256 + 256 * 128 + 16 * 128)),
      name="tpu_matmul")(x, y)


def _tpu_memory_spaces(s, x):
  def kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * s_ref[0]
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pltpu.VMEM)],
      out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
      compiler_params=pltpu.CompilerParams(has_side_effects=False))(s, x)


def _triton_add(x, y):
  from jax.experimental.pallas import triton as pltriton

  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]
  spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
  return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                        in_specs=[spec, spec], out_specs=spec,
                        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=3))(x, y)


def _mosaic_gpu_add(x):
  from jax.experimental.pallas import mosaic_gpu as plgpu

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0
  return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        in_specs=[pl.BlockSpec(memory_space=plgpu.SMEM)],
                        out_specs=pl.BlockSpec(memory_space=plgpu.SMEM),
                        compiler_params=plgpu.CompilerParams(approx_math=True))(x)


_X = jnp.ones((16, 256), jnp.float32)
_Y = jnp.ones((256, 128), jnp.float32)
ACCELERATOR_KERNELS = {
    "tpu_matmul": (_tpu_matmul, (_X, _Y), "CompilerParams(dimension_semantics=('parallel', "),
    "tpu_memory_spaces": (_tpu_memory_spaces, (jnp.ones(2), jnp.ones((16, 128))), "Ref<smem>"),
    "triton_add": (_triton_add, (jnp.ones((16, 128)), jnp.ones((16, 128))), "num_warps=4"),
    "mosaic_gpu_add": (_mosaic_gpu_add, (jnp.ones((16, 128)),), "approx_math=True"),
}


@pytest.mark.parametrize("name", sorted(ACCELERATOR_KERNELS))
def test_accelerator_kernels_save_and_load(name):
  fn, args, shown = ACCELERATOR_KERNELS[name]
  cj = jax.make_jaxpr(fn)(*args)
  assert cj.eqns[-1].params["interpret"] is False
  data = jp.dumps(cj)
  cj2 = jp.loads(data)
  assert str(cj2) == str(cj) and shown in str(cj2)
  assert jp.dumps(cj2) == data
  assert cj2.eqns[-1].params["compiler_params"] == cj.eqns[-1].params["compiler_params"]
  assert cj2.eqns[-1].params["grid_mapping"].grid == cj.eqns[-1].params["grid_mapping"].grid


def test_unsupported_parts_are_named():
  def dma(x):
    def kernel(x_hbm, o_ref, buf, sem):
      copy = pltpu.make_async_copy(x_hbm, buf, sem)
      copy.start()
      copy.wait()
      o_ref[...] = buf[...]
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          scratch_shapes=[pltpu.VMEM(x.shape, x.dtype),
                                          pltpu.SemaphoreType.DMA(())])(x)
  cj = jax.make_jaxpr(dma)(jnp.ones((8, 128)))
  with pytest.raises(jp.EncodeError, match=r"eqn\[0\].params.jaxpr.*dma_sem"):
    jp.dumps(cj)


# --- hostile files ------------------------------------------------------------------------

def _module(name="pallas_matmul"):
  return jp.encode(corpus.trace(corpus.get(name)))


def _param(m, name):
  return next(p.value for p in m.params if p.name == name)


def _field(ext, name):
  """A field of an Extension or a Record message."""
  return next(f.value for f in ext.fields if f.name == name)


def _grid_mapping(m):
  return _param(m, "grid_mapping").extension


def _block(m, k):
  return _field(_grid_mapping(m), "block_mappings").tuple.items[k].extension


def _index_map(m, k):
  v = _field(_block(m, k), "index_map_jaxpr")
  i = m.closed_jaxprs[v.closed_jaxpr].jaxpr if v.WhichOneof("kind") == "closed_jaxpr" else v.jaxpr
  return m.jaxprs[i]


def _set_int(value, n):
  value.int = n


def _ints(value, xs):
  del value.tuple.items[:]
  for x in xs:
    value.tuple.items.add(int=x)


def _extra_invar(j):
  """Gives jaxpr `j` one more input, unused, of its first input's type."""
  v = j.invars.add()
  v.CopyFrom(j.invars[0])
  v.id = 1 << 20
  if j.debug_info.HasField("arg_names"):
    j.debug_info.arg_names.values.append("extra")


def _program_id_axis(m, axis):
  """Sets the axis of the program_id eqns of the module."""
  for p in m.params:
    if p.name == "axis" and p.value.WhichOneof("kind") == "int":
      p.value.int = axis


def _kernel(m):
  v = _param(m, "jaxpr")
  i = m.closed_jaxprs[v.closed_jaxpr].jaxpr if v.WhichOneof("kind") == "closed_jaxpr" else v.jaxpr
  return m.jaxprs[i]


HOSTILE = {
    "num_inputs": (lambda m: _set_int(_field(_grid_mapping(m), "num_inputs"), 1),
                   r"params.grid_mapping: has 3 block mappings for num_inputs=1"),
    "num_outputs_negative": (lambda m: _set_int(_field(_grid_mapping(m), "num_outputs"), -1),
                             r"params.grid_mapping.num_outputs: .*must be a count"),
    "block_shape": (
        lambda m: _set_int(_field(_block(m, 0), "block_shape").tuple.items[0].record.fields[0].value, 4),
        r"params.grid_mapping.block_mappings\[0\]: the block .* is not of block shape \(4, 8\)"),
    "block_size_zero": (
        lambda m: _set_int(_field(_block(m, 1), "block_shape").tuple.items[1].record.fields[0].value, 0),
        r"params.grid_mapping.block_mappings\[1\].block_shape: .*must be a tuple of block dims"),
    "block_rank": (
        lambda m: _field(_block(m, 2), "block_shape").tuple.items.pop(),
        r"params.grid_mapping.block_mappings\[2\]: block shape .* has 1 dims for the array"),
    "index_map_outputs": (lambda m: _index_map(m, 0).outvars.pop(),
                          r"params.grid_mapping.block_mappings\[0\]: the index map gives 1 "
                          r"indices for 2 block dims"),
    "index_map_inputs": (lambda m: _extra_invar(_index_map(m, 1)),
                         r"params.grid_mapping.block_mappings\[1\].index_map_jaxpr: the index "
                         r"map takes \(int32\[\], int32\[\], int32\[\], int32\[\]\) where the grid "
                         r"mapping gives \(int32\[\], int32\[\], int32\[\]\)"),
    "grid_rank": (lambda m: _ints(_field(_grid_mapping(m), "grid"), [2, 2]),
                  r"params.grid_mapping: index maps take 3 operands for a grid of 2 axes"),
    "grid_huge": (lambda m: _ints(_field(_grid_mapping(m), "grid"), [1 << 20, 1 << 20, 3]),
                  r"params.grid_mapping.grid: a grid of .* steps is beyond"),
    "grid_negative": (lambda m: _ints(_field(_grid_mapping(m), "grid"), [2, -2, 3]),
                      r"params.grid_mapping.grid: .*must be a tuple of sizes"),
    "kernel_arity": (lambda m: _extra_invar(_kernel(m)),
                     r"params.jaxpr: the kernel takes 4 operands where the grid mapping has"),
    "vmapped_dims": (lambda m: _ints(_field(_grid_mapping(m), "vmapped_dims"), [5]),
                     r"params.grid_mapping.vmapped_dims: .*distinct axes of the grid"),
    "extension_field": (lambda m: _grid_mapping(m).fields.add(name="get_grid_indices").value.none.SetInParent(),
                        r"params.grid_mapping: jax::pallas.GridMapping needs fields"),
    "program_id_axis": (lambda m: _program_id_axis(m, 7),
                        r"params.jaxpr: the kernel reads grid axis 7 of a grid of 3 axes"),
    "interpret_type": (lambda m: _param(m, "interpret").CopyFrom(pb.Value(str="yes")),
                       r"params.interpret: pallas_call's interpret must be a bool"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_mutations_are_refused_with_a_path(case):
  mutate, error = HOSTILE[case]
  m = _module()
  mutate(m)
  data = m.SerializeToString()
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\]\." + error):
    jp.loads(data)
  report = jp.check(data)
  assert not report.ok and any(path.startswith("eqn[0].params") for path, _ in report.errors)


def _scratch(m):
  return _field(_grid_mapping(m), "scratch_avals").tuple.items[0].extension


HOSTILE_TPU = {
    # The scratch buffer's type against the kernel's scratch ref.
    "scratch_shape": (
        lambda m: _set_aval(m, _field(_scratch(m), "inner"), (8, 2)),
        r"params.jaxpr: the kernel takes .* for scratch operand 0"),
    # A memory space that is not Pallas's: refused by the codec.
    "memory_space": (
        lambda m: _field(_scratch(m), "memory_space").CopyFrom(
            pb.Value(enum=pb.EnumValue(type="jax::lax.lax.RoundingMethod", member="TO_NEAREST_EVEN"))),
        r"params.grid_mapping.scratch_avals\[0\]: jax::pallas.Ref needs"),
    "dimension_semantics": (
        lambda m: _field(_param(m, "compiler_params").record, "dimension_semantics").tuple.items.pop(),
        r"params.compiler_params: dimension_semantics has 1 entries for a grid of 2 axes"),
    "compiler_params_type": (
        lambda m: _param(m, "compiler_params").CopyFrom(pb.Value(record=pb.Record(
            type="jax::pallas.core.CostEstimate", fields=[
                pb.RecordField(name=n, value=pb.Value(int=1))
                for n in ("flops", "transcendentals", "bytes_accessed")]))),
        r"params.compiler_params: pallas_call's compiler_params must be None or the CompilerParams"),
}


def _set_aval(m, value, shape):
  a = pb.Aval()
  a.CopyFrom(m.avals[value.aval])
  del a.shaped_array.shape[:]
  for d in shape:
    a.shaped_array.shape.add(constant=d)
  m.avals.append(a)
  value.aval = len(m.avals) - 1


def _interpret_field(name, **value):
  def mutate(m):
    _field(_param(m, "interpret").record, name).CopyFrom(pb.Value(**value))
  return mutate


HOSTILE_INTERPRET = {
    # (found by the fuzzer: the core count reaches a callback as an int32)
    "cores_huge": (_interpret_field("num_cores_or_threads", int=1 << 40),
                   r"params.interpret: num_cores_or_threads=1099511627776: the interpreter "
                   r"simulates 1 to 1024"),
    "clocks_too_few": (_interpret_field("vector_clock_size", int=1),
                       r"params.interpret: vector_clock_size=1: the interpreter takes more than"),
    "clocks_huge": (_interpret_field("vector_clock_size", int=1 << 30),
                    r"params.interpret: vector_clock_size=1073741824: .* at most 65536"),
    "seed_str": (_interpret_field("random_seed", str="7"),
                 r"params.interpret: pallas_call's interpret must be a bool or InterpretParams"),
    "seed_huge": (_interpret_field("random_seed", big_int=str(1 << 70)),
                  r"params.interpret: pallas_call's interpret must be a bool or InterpretParams"),
}


HOSTILE_OF_PROGRAM = {"pallas_rowsum_tpu": HOSTILE_TPU, "pallas_tpu_interpret": HOSTILE_INTERPRET}


@pytest.mark.parametrize("program, case", [(p, c) for p, cases in HOSTILE_OF_PROGRAM.items()
                                           for c in sorted(cases)])
def test_hostile_tpu_mutations_are_refused_with_a_path(program, case):
  mutate, error = HOSTILE_OF_PROGRAM[program][case]
  m = _module(program)
  mutate(m)
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\]\." + error):
    jp.loads(m.SerializeToString())


def test_interpret_params_in_range_load_and_run():
  p = corpus.get("pallas_tpu_interpret")
  m = _module("pallas_tpu_interpret")
  _interpret_field("num_cores_or_threads", int=2)(m)
  _interpret_field("vector_clock_size", int=2 * jax.device_count() + 1)(m)
  _interpret_field("random_seed", int=-3)(m)
  cj = jp.loads(m.SerializeToString())
  params = cj.jaxpr.eqns[0].params["interpret"]
  assert (params.num_cores_or_threads, params.random_seed) == (2, -3)
  out = jax.jit(jax.extend.core.jaxpr_as_fun(cj))(*jax.tree.leaves(p.args))
  want = jax.jit(jax.extend.core.jaxpr_as_fun(corpus.trace(p)))(*jax.tree.leaves(p.args))
  np.testing.assert_array_equal(out[0], want[0])


def test_scalar_prefetch_operand_types_are_checked():
  m = _module("pallas_prefetch_tpu")
  # The operand that the index maps read as int32 scalar prefetch, said to be float32.
  root = m.jaxprs[m.closed_jaxprs[m.root].jaxpr]
  a = pb.Aval()
  a.CopyFrom(m.avals[root.invars[0].aval])
  a.shaped_array.dtype = pb.DTYPE_FLOAT32
  m.avals.append(a)
  root.invars[0].aval = len(m.avals) - 1
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\].params.grid_mapping: scalar prefetch operand 0"):
    jp.loads(m.SerializeToString())


# --- in a fresh process -------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import pallas as pl
    import jaxpr_proto as jp

    def kernel(x_ref, y_ref, o_ref):
      @pl.when(pl.program_id(2) == 0)
      def _():
        o_ref[...] = jnp.zeros_like(o_ref)
      o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    def matmul(x, y):
      return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 16), jnp.float32),
          grid=(2, 2, 3),
          in_specs=[pl.BlockSpec((8, 8), lambda i, j, k: (i, k)),
                    pl.BlockSpec((8, 8), lambda i, j, k: (k, j))],
          out_specs=pl.BlockSpec((8, 8), lambda i, j, k: (i, j)), interpret=True)(x, y)

    @jax.custom_vjp
    def cube(x):
      return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] ** 3),
                            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)

    def cube_bwd(x, g):
      def k(x_ref, g_ref, o_ref):
        o_ref[...] = 3.0 * x_ref[...] ** 2 * g_ref[...]
      return (pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                             interpret=True)(x, g),)
    cube.defvjp(lambda x: (cube(x), x), cube_bwd)

    def program(x, y):  # (pallas_call has no transpose: grad goes through cube's rule only)
      m = matmul(jax.lax.stop_gradient(x), jax.lax.stop_gradient(y))
      return jnp.sum(cube(x[:, :16] + m))

    x = np.linspace(-1, 1, 16 * 24, dtype=np.float32).reshape(16, 24)
    y = np.linspace(1, -1, 24 * 16, dtype=np.float32).reshape(24, 16)
    jp.save(jp.trace(program)(x, y), sys.argv[1])
    out = jax.jit(program)(x, y)
    g = jax.jit(jax.grad(program, argnums=(0, 1)))(x, y)
    print(json.dumps({"out": np.asarray(out).tolist(),
                      "grad": [np.asarray(a).tolist() for a in g],
                      "text": str(jax.make_jaxpr(program)(x, y))}))
""")

# The reader: never the writer's kernels. With "with_pallas" it imports
# Pallas itself; without, loading imports JAX's modules that the file needs.
READER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax
    import jaxpr_proto as jp
    from jaxpr_proto.codec import names
    if sys.argv[2] == "with_pallas":
      import jax.experimental.pallas  # noqa: F401  (the pallas_call primitive, not the kernels)
    before = set(sys.modules)
    f = jp.load(sys.argv[1])
    loaded = sorted(set(sys.modules) - before)
    x = np.linspace(-1, 1, 16 * 24, dtype=np.float32).reshape(16, 24)
    y = np.linspace(1, -1, 24 * 16, dtype=np.float32).reshape(24, 16)
    out = jax.jit(f)(x, y)
    g = jax.jit(jax.grad(f, argnums=(0, 1)))(x, y)
    print(json.dumps({"out": np.asarray(out).tolist(),
                      "grad": [np.asarray(a).tolist() for a in g],
                      "text": str(f.closed_jaxpr), "loaded": loaded,
                      "imported": names._optional_tried}))
""")

# What importing JAX's modules sys.argv[1:] imports, in a fresh process.
IMPORTER = textwrap.dedent("""
    import importlib, json, sys
    import jax
    import jaxpr_proto  # noqa: F401
    before = set(sys.modules)
    for m in sys.argv[1:]:
      importlib.import_module(m)
    print(json.dumps(sorted(set(sys.modules) - before)))
""")


def _imports_only(loaded, modules):
  """`loaded` (the modules a load imported) holds only what importing
  `modules`, JAX's optional modules, imports (and jaxpr_proto's own)."""
  extra = set(loaded) - set(run_json(IMPORTER, *modules))
  assert not {m for m in extra if not m.startswith("jaxpr_proto.")}, sorted(extra)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  path = tmp_path_factory.mktemp("pallas") / "program.jaxpb"
  return path, run_json(WRITER, path)


def test_kernels_load_and_run_in_a_fresh_process(saved):
  path, want = saved
  got = run_json(READER, path, "with_pallas")
  assert got["out"] == want["out"]  # bit for bit (JSON floats print exactly)
  assert got["grad"] == want["grad"]
  assert got["text"] == want["text"] and got["text"].count("pallas_call") == 2


def test_a_process_that_never_imported_pallas_loads_and_runs(saved):
  path, want = saved
  got = run_json(READER, path, "without_pallas")
  assert got["out"] == want["out"] and got["grad"] == want["grad"]
  assert got["text"] == want["text"]
  # Loading imported Pallas (from the fixed table of JAX's modules), and
  # nothing that importing Pallas does not import.
  assert got["imported"] == {"jax.experimental.pallas": None}
  assert "jax.experimental.pallas" in got["loaded"]
  _imports_only(got["loaded"], got["imported"])


# A kernel of the TPU backend's memory spaces, interpreted, and the CLI on it.
TPU_WRITER = textwrap.dedent("""
    import sys
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    import jaxpr_proto as jp

    def scale(s, x):
      def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[0] + s_ref[1]
      return pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
          in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pltpu.VMEM)],
          out_specs=pl.BlockSpec(memory_space=pltpu.VMEM), interpret=True)(s, x)

    s = np.array([2.5, -1.0], np.float32)
    x = np.linspace(-3, 3, 16 * 128, dtype=np.float32).reshape(16, 128)
    folder = sys.argv[1]
    jp.save(jp.trace(scale)(s, x), f"{folder}/scale.jaxpb")
    np.savez(f"{folder}/inputs.npz", s, x)
    np.save(f"{folder}/want.npy", np.asarray(jax.jit(scale)(s, x)))
""")

TPU_READER = textwrap.dedent("""
    import json, sys
    import numpy as np, jax
    import jaxpr_proto as jp
    from jaxpr_proto.codec import names
    before = set(sys.modules)
    f = jp.loads(open(sys.argv[1] + "/scale.jaxpb", "rb").read())
    loaded = sorted(set(sys.modules) - before)
    with np.load(sys.argv[1] + "/inputs.npz") as z:
      out = jax.jit(f)(z["arr_0"], z["arr_1"])
    same = np.asarray(out).tobytes() == np.load(sys.argv[1] + "/want.npy").tobytes()
    print(json.dumps({"same": same, "loaded": loaded, "imported": names._optional_tried,
                      "text": str(f.closed_jaxpr)}))
""")


@pytest.fixture(scope="module")
def tpu_saved(tmp_path_factory):
  folder = tmp_path_factory.mktemp("pallas_tpu")
  run_script(TPU_WRITER, folder)
  return folder


def test_tpu_memory_spaces_load_and_run_in_a_fresh_process(tpu_saved):
  got = run_json(TPU_READER, tpu_saved)
  assert got["same"] and "Ref<smem>" in got["text"]
  assert got["imported"] == {"jax.experimental.pallas": None, "jax.experimental.pallas.tpu": None}
  _imports_only(got["loaded"], got["imported"])


def _cli(*argv):
  """`python -m jaxpr_proto ARGV` in a fresh process: (exit status, stdout, stderr)."""
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  r = subprocess.run([sys.executable, "-m", "jaxpr_proto", *map(str, argv)], capture_output=True,
                     text=True, timeout=300, cwd=ROOT, env=env)
  return r.returncode, r.stdout, r.stderr


def test_the_cli_reads_pallas_files(tpu_saved):
  f = tpu_saved / "scale.jaxpb"
  code, out, err = _cli("dump", f)
  assert code == 0 and "pallas_call[" in out and "Ref<smem>" in out, err
  code, out, err = _cli("check", f)
  assert code == 0 and f"{f}: ok" in out, (out, err)
  code, out, err = _cli("load", f)
  assert code == 0 and "pallas_call" in out and "check_jaxpr   ok" in out, (out, err)
  code, out, err = _cli("run", f, "--inputs", tpu_saved / "inputs.npz",
                        "--outputs", tpu_saved / "out.npz")
  assert code == 0, (out, err)
  with np.load(tpu_saved / "out.npz") as z:
    # (a jp.Function's outputs are written by path: its one output, the whole result, is "out")
    assert z["out"].tobytes() == np.load(tpu_saved / "want.npy").tobytes()
  code, out, err = _cli("diff", f, f)
  assert code == 0 and "no differences" in out, (out, err)
  code, out, err = _cli("convert", f, tpu_saved / "scale.mlir")
  assert code == 0 and "tpu_custom_call" not in (tpu_saved / "scale.mlir").read_text(), err


# A backend whose module fails to import here (as Mosaic GPU does on builds
# without it) is named, with the path of what needed it.
FAILING_IMPORT_READER = textwrap.dedent("""
    import json, sys
    sys.modules["jax.experimental.pallas.mosaic_gpu"] = None  # its import fails
    import jaxpr_proto as jp
    out = {}
    for key in ("kernel", "primitive"):
      try:
        jp.loads(open(f"{sys.argv[1]}/{key}.jaxpb", "rb").read())
        out[key] = None
      except jp.DecodeError as e:
        out[key] = [type(e).__name__, e.path, e.message]
    r = jp.check(open(f"{sys.argv[1]}/kernel.jaxpb", "rb").read())
    out["check"] = [r.ok, r.errors]
    print(json.dumps(out))
""")


def test_a_jax_module_that_fails_to_import_is_a_decode_error_with_a_path(tmp_path):
  fn, args, _ = ACCELERATOR_KERNELS["mosaic_gpu_add"]
  (tmp_path / "kernel.jaxpb").write_bytes(jp.dumps(jax.make_jaxpr(fn)(*args)))
  m = jp.encode(jax.make_jaxpr(jnp.sin)(1.0))
  m.primitives[0].namespace, m.primitives[0].name = "jax.pallas.mosaic_gpu.primitives", "barrier_arrive"
  (tmp_path / "primitive.jaxpb").write_bytes(m.SerializeToString())
  got = run_json(FAILING_IMPORT_READER, tmp_path)
  why = "(JAX's module jax.experimental.pallas.mosaic_gpu, which defines it, failed to import: "
  kind, path, message = got["kernel"]
  assert kind == "DecodeError" and path.startswith("eqn[0].params."), got
  assert "jax::pallas.mosaic_gpu.core." in message and why in message, message
  kind, path, message = got["primitive"]
  assert kind == "UnknownPrimitiveError" and path == "eqn[0]", got
  assert "jax.pallas.mosaic_gpu.primitives::barrier_arrive" in message and why in message
  ok, errors = got["check"]
  assert not ok and errors and all(p.startswith("eqn[0].params.") and why in msg
                                   for p, msg in errors), errors
