"""Host callbacks: the user's function inside a callback param, and the
param that JAX's API would make for it."""
from __future__ import annotations

from jax._src import callback as _callback_lib
from jax._src import debugging as _debugging

CALLBACK_PRIMITIVES = frozenset({"debug_callback", "pure_callback", "io_callback"})
# The name JAX gives jax.debug.callback's flat function (printed as its param).
_DEBUG_FLAT_QUALNAME = "debug_callback.<locals>._debug_callback.<locals>._flat_callback"


def callback_parts(prim_name: str, value):
  """(the user's function, in_tree, static_args or None) of a callback
  primitive's `callback` param as JAX's API makes it, or None for another
  value: for debug_callback a closure over them, else a _FlatCallback."""
  if prim_name == "debug_callback":
    code = getattr(value, "__code__", None)
    if code is None or getattr(value, "__module__", None) != _debugging.__name__ \
        or value.__name__ != "_flat_callback":
      return None
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in value.__closure__ or ())))
    if not {"callback", "in_tree", "static_args"} <= set(cells):
      return None
    return cells["callback"], cells["in_tree"], dict(cells["static_args"])
  if isinstance(value, _callback_lib._FlatCallback):
    return value.callback_func, value.in_tree, None
  return None


def make_callback(prim_name: str, fn, in_tree, static_args):
  """The `callback` param that JAX's API would make for `fn`."""
  if prim_name == "debug_callback":
    flat = _debugging._make_flat_callback(in_tree, fn, dict(static_args or {}))
    flat.__qualname__ = _DEBUG_FLAT_QUALNAME  # printed as the original's
    flat.__module__ = _debugging.__name__
    return flat
  return _callback_lib._FlatCallback(fn, in_tree)


# Param values of the callback primitives written by name (debug_callback's effect).
CALLBACK_SINGLETONS = {
    "jax::debug_effect": _debugging.debug_effect,
    "jax::ordered_debug_effect": _debugging.ordered_debug_effect,
}
