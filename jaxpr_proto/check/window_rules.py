"""The param rules (`param_rules`) of reductions, windows and
convolutions: reducer jaxprs against the operands' dtypes, window entries
and padding per axis, select_and_scatter's source against its windows,
reduction axes within the rank, a convolution's dimension numbers."""
from __future__ import annotations

from jaxpr_proto.check.jaxpr_fits import _BOOL, _avals, _jaxpr_fits, _scalar


def _reducer(param, n_operands):
  """A rule for a jaxpr that reduces scalars: 2n in, n out, of the operands' dtypes."""
  def rule(eqn, **params):
    n = n_operands(eqn, params)
    ops = [_scalar(a) for a in _avals(eqn.invars[:n])]
    yield from _jaxpr_fits(param, params[param], ops + ops, ops)
  return rule


def _window_shape(shape, window_dimensions, window_strides, padding):
  """The shape of the windows over an operand of `shape` (None where a size
  is symbolic): what reduce_window gives and select_and_scatter's source is."""
  dims = (shape, window_dimensions, window_strides, [p for pair in padding for p in pair])
  if not all(type(d) is int for v in dims for d in v):
    return None
  return tuple(max(0, (d + lo + hi - w) // st + 1) if d + lo + hi >= w else 0
               for d, w, st, (lo, hi) in zip(*dims[:3], padding))


def _check_source(name, operand, source, *window):
  windows = _window_shape(operand.shape, *window)
  if windows is not None and tuple(source.shape) != windows:
    yield None, (f"{name}'s source is {source.str_short()} where its windows "
                 f"over {operand.str_short()} give shape {windows}")


def _select_and_scatter(eqn, *, select_jaxpr, scatter_jaxpr, window_dimensions,
                        window_strides, padding, **_):
  operand, source = eqn.invars[0].aval, eqn.invars[1].aval  # (operand, source, init)
  o, s = _scalar(operand), _scalar(source)
  yield from _check_source("select_and_scatter", operand, source, window_dimensions,
                           window_strides, padding)
  yield from _jaxpr_fits("select_jaxpr", select_jaxpr, [o, o], [_BOOL])
  yield from _jaxpr_fits("scatter_jaxpr", scatter_jaxpr, [s, s], [s])


def _scatter(eqn, *, update_jaxpr, **_):
  if update_jaxpr is None:
    return
  s = _scalar(eqn.invars[0].aval)
  yield from _jaxpr_fits("update_jaxpr", update_jaxpr, [s, s], [s])


_MAX_PAD = 1 << 31


def _windowed(eqn, *, window_dimensions, window_strides, padding, base_dilation=None,
              window_dilation=None, **params):
  """A windowed reduction: one window entry per operand axis, padding pairs
  of ints (XLA aborts on others; JAX's shape rules do not all check)."""
  rank = len(eqn.invars[0].aval.shape)
  found = _window_errors(rank, padding, window_dimensions=window_dimensions,
                         window_strides=window_strides, base_dilation=base_dilation,
                         window_dilation=window_dilation)
  yield from found
  if found:  # the window arithmetic below needs sound windows
    return
  if "select_jaxpr" in params:
    yield from _select_and_scatter(eqn, **eqn.params)
  elif eqn.primitive.name == "select_and_scatter_add":  # (source, operand); the
    # shape rule does not relate the two, and XLA's verifier refuses them
    yield from _check_source("select_and_scatter_add", eqn.invars[1].aval, eqn.invars[0].aval,
                             window_dimensions, window_strides, padding)


def _window_errors(n, padding, **sizes):
  """Errors of windows over `n` axes: one entry per axis in `padding` (low,
  high pairs within XLA's sizes) and in each of `sizes` (positive ints; None
  where absent)."""
  found = []
  for param, v in (("padding", padding), *sizes.items()):
    if v is not None and len(v) != n:
      found.append((param, f"{param} has {len(v)} entries for {n} axes"))
  for k, p in enumerate(padding):
    if len(p) != 2:
      return found + [("padding", f"padding[{k}] is not a (low, high) pair")]
    if any(type(x) is int and abs(x) >= _MAX_PAD for x in p):
      found.append(("padding", f"padding[{k}] is beyond {_MAX_PAD} (XLA's sizes overflow)"))
  for param, v in sizes.items():
    if v is not None and any(type(d) is int and d < 1 for d in v):
      found.append((param, f"{param} must be positive"))
  return found


def _conv(eqn, *, window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count,
          batch_group_count, dimension_numbers, **_):
  """A convolution's dimension numbers, each a permutation of the operands'
  axes, and its window entries, one per spatial axis (JAX's shape rule
  zips them, so that too few pass and XLA's verifier refuses them)."""
  rank = len(eqn.invars[0].aval.shape)
  for field in ("lhs_spec", "rhs_spec", "out_spec"):
    spec = getattr(dimension_numbers, field, None)
    if spec is None or sorted(spec) != list(range(rank)):
      yield "dimension_numbers", f"dimension_numbers.{field} {spec} is not a permutation of the {rank} axes"
      return
  spatial = rank - 2
  yield from _window_errors(spatial, padding, window_strides=window_strides,
                            lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation)
  for param, v in (("feature_group_count", feature_group_count),
                   ("batch_group_count", batch_group_count)):
    if v < 1:
      yield param, f"{param} must be positive"


def _one_shape(eqn):
  """A variadic reduction's operands (the first half; the rest are their
  init values) have one shape (JAX's shape rules read the first; XLA
  refuses others)."""
  shapes = {tuple(x.aval.shape) for x in eqn.invars[:len(eqn.invars) // 2]}
  if len(shapes) > 1:
    yield None, f"{eqn.primitive.name}'s operands have different shapes {sorted(shapes, key=str)}"


def _reduce(eqn, **params):
  yield from _one_shape(eqn)
  yield from _reduction_axes("dimensions")(eqn, **params)
  yield from _reducer("jaxpr", lambda e, p: len(e.invars) // 2)(eqn, **params)


def _reduce_window(eqn, **params):
  yield from _one_shape(eqn)
  yield from _reducer("jaxpr", lambda e, p: len(e.invars) // 2)(eqn, **params)
  yield from _windowed(eqn, **params)


# The shape rules of reduce_and/or/xor (axes) and of reduce (dimensions)
# delete the axes with numpy, which takes a negative one; lowering then
# refuses it. lax binds them canonical.
def _reduction_axes(param):
  def rule(eqn, **params):
    axes, rank = params[param], len(eqn.invars[0].aval.shape) if eqn.invars else 0
    if not all(0 <= a < rank for a in axes):
      yield param, f"reduction axes {axes} are not axes (0 to {rank - 1}) of the rank-{rank} operand"
  return rule
