"""The param rules (`param_rules`) of refs: pinned refs, and the indexers
of get, swap and addupdate (index operands, slices within their dims)."""
from __future__ import annotations

import numpy as np

from jaxpr_proto import compat

_INT32 = (-(1 << 31), (1 << 31) - 1)


# Ref primitives, and where their indexer operands start.
_REF_INDEXED = {"get": 1, "swap": 2, "addupdate": 2}


def _ref(eqn, *, pin=False, **_):
  """A pinned ref (jax.new_ref(x, pin=True)) discharges to a linear value that
  no primitive but pin/unpin accepts: reading it fails inside JAX 0.12."""
  if pin:
    yield "pin", "pinned refs (pin=True) are not supported: JAX cannot read them on this backend"


def _ref_indexers(eqn, *, tree, **_):
  """get/swap/addupdate's indexers: each slice's start and size an int or an
  operand, its stride a positive int (lowering computes with them; JAX's
  rules take the tree as traced); each NDIndexer of the shape of what it
  indexes (the discharge rules slice by its indices, JAX's type rule reads
  only their sizes), each static slice within its dim."""
  for k, x in enumerate(eqn.invars[_REF_INDEXED[eqn.primitive.name]:]):
    dtype = getattr(x.aval, "dtype", None) if isinstance(x.aval, compat.ShapedArray) else None
    if dtype is None or not (np.issubdtype(dtype, np.integer) or dtype == np.bool_):
      yield "tree", (f"index operand {k} is of type {x.aval.str_short()}, not an array of "
                     "integers or bools (JAX's indexing refuses it)")
      return
  operand = object()
  try:
    transforms = tree.unflatten([operand] * tree.num_leaves)
  except Exception as e:  # NDIndexer's own checks
    yield "tree", f"the ref's indexers do not rebuild ({type(e).__name__}: {e})"
    return
  slice_type = compat.internal_pytree_types()["jax::Slice"]
  aval = getattr(eqn.invars[0].aval, "inner_aval", None)
  for t in (transforms if type(transforms) is tuple else (transforms,)):
    indices = getattr(t, "indices", None)
    if indices is not None and isinstance(aval, compat.ShapedArray) and \
        tuple(t.shape) != aval.shape:
      yield "tree", f"an indexer of shape {tuple(t.shape)} indexes a ref of shape {aval.shape}"
      return
    for idx, dim in zip(indices or (), getattr(t, "shape", ())):
      if type(idx) is not slice_type:
        continue
      for field in ("start", "size"):
        v = getattr(idx, field)
        if v is not operand and not (isinstance(v, (int, np.integer)) and type(v) is not bool):
          yield "tree", f"a slice's {field} is {v!r}, neither an int nor an operand"
          return
      if not isinstance(idx.stride, (int, np.integer)) or idx.stride < 1:
        yield "tree", f"a slice's stride is {idx.stride!r}, not a positive int"
        return
      why = _slice_misfit(idx, dim, operand)
      if why:
        yield "tree", why
        return
    try:
      aval = t.transform_type(aval)
    except Exception:  # the types stage says why
      aval = None


def _slice_misfit(idx, dim, operand):
  """Why a static slice does not fit a dim of size `dim` (its start, size
  and span in 0..dim; the discharge rules compute its start, and its
  indices by stride, in int32), or None."""
  if type(dim) is not int:
    return None
  start = None if idx.start is operand else int(idx.start)
  size = None if idx.size is operand else int(idx.size)
  stride = int(idx.stride)
  if start is not None and not 0 <= start <= min(dim, _INT32[1]):
    return f"a slice's start {start} is outside its dim of size {dim}"
  if size is not None and not 0 <= size <= dim:
    return f"a slice's size {size} is outside its dim of size {dim}"
  if size and (size - 1) * stride + 1 > dim - (start or 0):
    at = "" if start is None else f" from {start}"
    return f"a slice of {size} at stride {stride}{at} overruns its dim of size {dim}"
  if stride > _INT32[1]:
    return f"a slice's stride {stride} is over int32's range"
  return None
