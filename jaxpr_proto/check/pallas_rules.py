"""The param rule (`param_rules`) of pallas_call: a Pallas kernel against
its grid mapping, what its interpreter can simulate, the grid axes and
refs its kernel reads."""
from __future__ import annotations

import jax
import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.check.jaxpr_fits import _avals, _match
from jaxpr_proto.check.ref_rules import _INT32, _REF_INDEXED


def _pallas_call(eqn, *, jaxpr, grid_mapping, out_avals, input_output_aliases=(),
                 interpret=False, compiler_params=None, **_):
  """A Pallas kernel against its grid mapping (JAX's abstract eval of
  pallas_call returns out_avals and checks nothing else; lowering and the
  interpreter index by these counts and shapes): the operands are the
  kernel's closed-over refs, the scalar prefetch operands and the inputs;
  the kernel takes a ref per scalar prefetch operand, a block per input and
  output, then the scratch refs; each index map takes the grid indices
  (int32 scalars) and the scalar prefetch refs and gives an integer scalar
  per block dim; each block is of its array's dtype and block shape."""
  gm = grid_mapping
  bms, grid = gm.block_mappings, gm.grid
  n_idx, n_in, n_out, n_scratch = (gm.num_index_operands, gm.num_inputs, gm.num_outputs,
                                   len(gm.scratch_avals))
  if len(bms) != n_in + n_out:
    yield "grid_mapping", (f"has {len(bms)} block mappings for num_inputs={n_in} and "
                           f"num_outputs={n_out}")
    return
  ima = list(gm.index_map_avals)
  if len(ima) != len(grid) + n_idx:
    yield "grid_mapping", (f"index maps take {len(ima)} operands for a grid of {len(grid)} axes "
                           f"and {n_idx} scalar prefetch operands")
    return
  for k, a in enumerate(ima[:len(grid)]):
    if not (type(a) is compat.ShapedArray and a.shape == () and a.dtype == np.int32):
      yield "grid_mapping", f"index map operand {k} is {a.str_short()}, not the int32 grid index"
      return
  if gm.index_map_tree.num_leaves != len(ima):
    yield "grid_mapping", (f"the index maps' input tree has {gm.index_map_tree.num_leaves} "
                           f"leaves for {len(ima)} operands")
    return
  kernel = jaxpr.jaxpr if isinstance(jaxpr, compat.ClosedJaxpr) else jaxpr
  if kernel.outvars:
    yield "jaxpr", f"the kernel returns {len(kernel.outvars)} values; a Pallas kernel returns none"
    return
  kin = _avals(kernel.invars)
  if len(kin) != n_idx + n_in + n_out + n_scratch:
    yield "jaxpr", (f"the kernel takes {len(kin)} operands where the grid mapping has {n_idx} "
                    f"scalar prefetch, {n_in} input, {n_out} output and {n_scratch} scratch operands")
    return
  ops = _avals(eqn.invars)
  n_consts = len(kernel.constvars)
  if len(ops) != n_consts + n_idx + n_in:
    yield None, (f"pallas_call has {len(ops)} operands where its kernel closes over {n_consts} "
                 f"refs and the grid mapping has {n_idx} scalar prefetch and {n_in} inputs")
    return
  for k, (v, a) in enumerate(zip(kernel.constvars, ops)):
    if not _match(v.aval, a):
      yield "jaxpr", f"the kernel's closed-over ref {k} is {v.aval.str_short()}, its operand {a.str_short()}"
      return
  if len(out_avals) != n_out or len(eqn.outvars) != n_out:
    yield "out_avals", (f"{len(out_avals)} out_avals and {len(eqn.outvars)} results for "
                        f"num_outputs={n_out}")
    return

  def same_array(a, b):
    return getattr(a, "shape", None) == getattr(b, "shape", None) and \
        getattr(a, "dtype", None) == getattr(b, "dtype", None)

  def same_ref(a, b):
    return (isinstance(a, compat.AbstractRef) and isinstance(b, compat.AbstractRef)
            and same_array(a, b) and a.memory_space == b.memory_space)

  for k in range(n_idx):
    op, im, kr = ops[n_consts + k], ima[len(grid) + k], kin[k]
    if not (same_array(op, im) and same_array(op, kr)):
      yield "grid_mapping", (f"scalar prefetch operand {k} is {op.str_short()}, the index maps "
                             f"take {im.str_short()} and the kernel {kr.str_short()}")
      return
  for k, bm in enumerate(bms):
    where = f"grid_mapping.block_mappings[{k}]"
    array, dims = bm.array_aval, bm.block_shape
    if len(dims) != len(array.shape):
      yield where, f"block shape {dims} has {len(dims)} dims for the array {array.str_short()}"
      return
    if 0 in array.shape:  # no block fits (the interpreter slices blocks out of it)
      yield where, f"the array {array.str_short()} is empty"
      return
    block = tuple(d.block_size for d in dims if type(d).__name__ != "Squeezed")
    ref = bm.transformed_block_aval
    if getattr(ref, "shape", None) != block or getattr(ref, "dtype", None) != array.dtype:
      yield where, (f"the block {ref.str_short()} is not of block shape {block} and dtype "
                    f"{array.dtype}")
      return
    if not same_ref(kin[n_idx + k], ref):
      yield "jaxpr", (f"the kernel takes {kin[n_idx + k].str_short()} for block {k} "
                      f"({bm.origin}), which is {ref.str_short()}")
      return
    outer = ops[n_consts + n_idx + k] if k < n_in else out_avals[k - n_in]
    if not same_array(outer, array):
      what = f"operand {n_consts + n_idx + k}" if k < n_in else f"out_avals[{k - n_in}]"
      yield where, f"the array {array.str_short()} is not {what}, {outer.str_short()}"
      return
    im = bm.index_map_jaxpr
    ins = list(im.in_avals)
    if len(ins) != len(ima) or not all(_match(a, b) for a, b in zip(ins, ima)):
      show = lambda avals: ", ".join(a.str_short() for a in avals)  # noqa: E731
      yield f"{where}.index_map_jaxpr", (f"the index map takes ({show(ins)}) where the grid "
                                         f"mapping gives ({show(ima)})")
      return
    outs = list(im.out_avals)
    if not all(type(a) is compat.ShapedArray and a.shape == () and a.dtype in (np.int32, np.int64)
               for a in outs):
      yield where, "the index map must give integer scalars"
      return
    if bm.index_map_out_tree.num_leaves != len(outs) or (
        len(outs) != len(dims) and not any(type(d).__name__ == "BoundedSlice" for d in dims)):
      yield where, f"the index map gives {len(outs)} indices for {len(dims)} block dims"
      return
    for j, (x, d) in enumerate(zip(im.jaxpr.outvars, dims)):
      # (Pallas computes a block's start as index * block size in int32)
      size = getattr(d, "block_size", 1)
      start = int(x.val) * (size if type(size) is int else 1) if isinstance(x, compat.Literal) else 0
      if not _INT32[0] <= start <= _INT32[1]:
        yield f"{where}.index_map_jaxpr", (f"block index {int(x.val)} of dim {j} starts at "
                                           f"element {start}, beyond int32")
        return
  for k, (a, s) in enumerate(zip(kin[n_idx + n_in + n_out:], gm.scratch_avals)):
    if not (same_ref(a, s) if isinstance(s, compat.AbstractRef) else same_array(a, s)):
      yield "jaxpr", f"the kernel takes {a.str_short()} for scratch operand {k}, which is {s.str_short()}"
      return
  if interpret is True and any(type(d).__name__ in ("BoundedSlice", "Indirect")
                              for bm in bms for d in bm.block_shape):
    yield "interpret", "Pallas's interpreter takes Blocked, Element and Squeezed block dims only"
    return
  if type(interpret) is not bool:
    found = _interpreter_cores(interpret)
    if found:
      yield "interpret", found
      return
  semantics = getattr(compiler_params, "dimension_semantics", None)
  if semantics is not None and len(semantics) != len(grid):
    yield "compiler_params", (f"dimension_semantics has {len(semantics)} entries for a grid of "
                              f"{len(grid)} axes")
    return
  axis = _pallas_grid_axis(kernel, len(grid))
  if axis is not None:
    yield "jaxpr", f"the kernel reads {axis}"
    return
  seen = set()
  for pair in input_output_aliases:
    i, o = pair if type(pair) is tuple and len(pair) == 2 else (None, None)
    if not (type(i) is int and type(o) is int and 0 <= i < len(ops) - n_consts
            and 0 <= o < n_out) or o in seen:
      yield "input_output_aliases", f"{pair!r} is not a distinct (input, output) pair in range"
      return
    seen.add(o)
    if not same_array(ops[n_consts + i], out_avals[o]):
      yield "input_output_aliases", (f"input {i} ({ops[n_consts + i].str_short()}) is aliased "
                                     f"to output {o} ({out_avals[o].str_short()})")
      return


# The TPU interpreter runs a thread per simulated core, each with a vector
# clock (int32s: by default two per core of every device), and hands the
# count to a callback as an int32. A TPU chip has a few cores; a GPU block
# at most 1024 threads.
_MAX_INTERPRETED_CORES = 1024
_MAX_VECTOR_CLOCK = 1 << 16


def _interpreter_cores(params):
  """Why the interpreter cannot simulate the cores that InterpretParams
  asks for, or None. Its vector clocks must outnumber the cores of all the
  devices that it runs the kernel on (at most this process's devices)."""
  cores = getattr(params, "num_cores_or_threads", 1)
  if not 1 <= cores <= _MAX_INTERPRETED_CORES:
    return f"num_cores_or_threads={cores}: the interpreter simulates 1 to {_MAX_INTERPRETED_CORES}"
  clocks = getattr(params, "vector_clock_size", None)
  devices = jax.device_count()
  if clocks is not None and not cores * devices < clocks <= _MAX_VECTOR_CLOCK:
    return (f"vector_clock_size={clocks}: the interpreter takes more than num_cores_or_threads "
            f"x devices ({cores} x {devices}) and at most {_MAX_VECTOR_CLOCK}")
  return None


def _pallas_grid_axis(kernel, rank):
  """What a kernel reads that it cannot (in it or its sub-jaxprs): a grid
  axis outside the grid (program_id, num_programs), a ref at a non-integer
  index; or None."""
  todo, seen = [kernel], set()
  while todo:
    j = todo.pop()
    j = j.jaxpr if isinstance(j, compat.ClosedJaxpr) else j
    if id(j) in seen or not isinstance(j, compat.Jaxpr):
      continue
    seen.add(id(j))
    for e in j.eqns:
      if e.primitive.name in ("program_id", "num_programs"):
        axis = e.params.get("axis")
        if not (type(axis) is int and 0 <= axis < rank):
          return f"grid axis {axis} of a grid of {rank} axes"
      elif e.primitive.name in _REF_INDEXED:  # (the discharge rules index with them)
        for x in e.invars[_REF_INDEXED[e.primitive.name]:]:
          dtype = getattr(x.aval, "dtype", None)
          if dtype is None or not (np.issubdtype(dtype, np.integer) or dtype == np.bool_):
            return f"a ref indexed by {x.aval.str_short()}, not an integer"
      todo.extend(compat.jaxprs_in_params(e.params))
  return None
