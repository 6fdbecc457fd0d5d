"""Saved functions: a ClosedJaxpr with its pytree signature (`jp.Function`).

`jp.trace(fun, static_argnums=..., static_argnames=...)(*args, **kwargs)`
traces `fun` like `jax.jit(fun).trace(...)` and returns a `Function`, which
holds the closed jaxpr, the pytree structures of the inputs `(args, kwargs)`
and of the outputs, and the input and output avals, much like
`jax.export.Exported`. Unlike an `Exported`, a `Function` is a jaxpr: it can be
called under `jax.jit`, `jax.vmap`, `jax.grad`, `jax.jvp` and `jax.hessian`.

`jp.dumps` / `jp.loads` / `jp.save` / `jp.load` and `pickle` accept a Function
and give one back: the `.jaxpb` file's `Module.function` holds the signature.
"""
from __future__ import annotations

import hashlib

import jax
import numpy as np
from jax.tree_util import PyTreeDef

from jaxpr_proto import _lru
from jaxpr_proto import compat
from jaxpr_proto.check import loading, signature
from jaxpr_proto.codec import encoder
from jaxpr_proto.codec import pytrees
from jaxpr_proto.errors import EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import external, files

_PY_SCALARS = (bool, int, float, complex)


class Function:
  """A traced function: `closed_jaxpr` plus its pytree signature.

  Call it with arguments of the same pytree structure, shapes and dtypes as
  the ones it was traced with (static arguments were fixed when it was
  traced: leave them out). It returns outputs of the original structure.
  Calls run a `jax.jit` of the jaxpr that is compiled once per Function, and
  once per process for Functions loaded from the same bytes.
  """
  __slots__ = ("closed_jaxpr", "in_tree", "out_tree", "name", "static_leaves", "_digest",
               "_jit", "__weakref__")

  def __init__(self, closed_jaxpr, in_tree: PyTreeDef, out_tree: PyTreeDef,
               name: str = "", *, static_leaves=(), _digest: bytes | None = None):
    """`static_leaves`: (position among in_tree's leaves, value) of each leaf
    fixed at trace time (jp.trace(filter=True)); the others are the inputs."""
    if not isinstance(closed_jaxpr, compat.ClosedJaxpr):
      raise TypeError(f"expected a ClosedJaxpr, got {type(closed_jaxpr).__name__}")
    if not isinstance(in_tree, PyTreeDef) or not isinstance(out_tree, PyTreeDef):
      raise TypeError("in_tree and out_tree must be PyTreeDefs")
    static_leaves = tuple(sorted(static_leaves, key=lambda kv: kv[0]))
    for problem in signature.problems(in_tree, out_tree, len(closed_jaxpr.jaxpr.invars),
                                      len(closed_jaxpr.jaxpr.outvars),
                                      [i for i, _ in static_leaves]):
      raise ValueError(problem)
    self.closed_jaxpr = closed_jaxpr
    self.in_tree = in_tree
    self.out_tree = out_tree
    self.static_leaves = static_leaves
    self.name = name or "function"
    self._digest = _digest
    self._jit = None

  @classmethod
  def from_closed_jaxpr(cls, closed_jaxpr, name: str = "") -> "Function":
    """The Function `f(*flat_inputs) -> [flat_outputs]`, like `jaxpr_as_fun`."""
    n_in, n_out = len(closed_jaxpr.jaxpr.invars), len(closed_jaxpr.jaxpr.outvars)
    in_tree = jax.tree.structure(((0,) * n_in, {}))
    out_tree = jax.tree.structure([0] * n_out)
    return cls(closed_jaxpr, in_tree, out_tree, name)

  # The flat avals, like jax.export.Exported.
  @property
  def in_avals(self) -> tuple:
    return tuple(self.closed_jaxpr.in_avals)

  @property
  def out_avals(self) -> tuple:
    return tuple(self.closed_jaxpr.out_avals)

  @property
  def jaxpr(self):
    """The closed jaxpr (same as `closed_jaxpr`)."""
    return self.closed_jaxpr

  @property
  def __name__(self) -> str:  # for jax.jit(function) and functools.wraps
    return self.name

  def __repr__(self) -> str:
    ins = ", ".join(a.str_short() for a in self.in_avals)
    outs = ", ".join(a.str_short() for a in self.out_avals)
    return f"<jaxpr_proto.Function {self.name}({ins}) -> ({outs})>"

  def __call__(self, *args, **kwargs):
    flat, tree = jax.tree.flatten((args, kwargs))
    if tree != self.in_tree and not _same_structure(tree, self.in_tree):
      raise TypeError(
          f"{self.name}: the arguments (args, kwargs) have the structure {tree}, "
          f"but the function was traced with {self.in_tree} (arguments that were "
          "static when it was traced must be left out)")
    if self.static_leaves:
      flat = _without_static(self.name, flat, self.static_leaves)
    for i, (x, aval) in enumerate(zip(flat, self.in_avals)):
      _check_arg(self.name, i, x, aval)
    out = self._jitted()(*flat)
    return jax.tree.unflatten(self.out_tree, out)

  def _jitted(self):
    f = self._jit
    if f is None:
      f = self._jit = _jit_for(self)
    return f

  def __copy__(self):
    return self  # immutable


def _load_function(data) -> Function:
  """Unpickles a Function (jaxpr_proto.pickling writes its .jaxpb bytes, or
  an external.Parts with its big arrays)."""
  message, source = external.message_and_source(data)
  digest = data.digest() if isinstance(data, external.Parts) else None
  # (a pickle stream is code anyway: its callbacks' code is trusted, and so
  # is the program, checked only against another writer: check.loading)
  f = decode_function(files.parse(message), source=source, digest=digest,
                      trust_pickled_code=True, trusted=True)
  if not isinstance(f, Function):
    raise TypeError(f"the pickle holds a {type(f).__name__}, not a Function")
  return f


def _same_structure(a: PyTreeDef, b: PyTreeDef) -> bool:
  """Equal structures, where namedtuple classes of the same name and fields
  count as equal (a loaded Function has its own class for a namedtuple that
  was encoded structurally)."""
  da, db = a.node_data(), b.node_data()
  if da is None or db is None:
    return da is None and db is None
  (ca, xa), (cb, xb) = da, db
  if ca is not cb:
    if not (pytrees._is_namedtuple(ca) and pytrees._is_namedtuple(cb)
            and ca.__name__ == cb.__name__ and ca._fields == cb._fields):
      return False
  elif xa != xb:
    return False
  ka, kb = jax.tree_util.treedef_children(a), jax.tree_util.treedef_children(b)
  return len(ka) == len(kb) and all(_same_structure(x, y) for x, y in zip(ka, kb))


def _without_static(name, flat, static_leaves):
  """The inputs among the leaves `flat`, after checking that each static
  leaf is the one the function was traced with."""
  for i, v in static_leaves:
    x = flat[i]
    if not (x is v or (type(x) is type(v) and not is_array(x) and _equal(x, v))):
      raise TypeError(f"{name}: argument leaf {i} is static, traced as {v!r}; got {x!r}")
  static = {i for i, _ in static_leaves}
  return [x for i, x in enumerate(flat) if i not in static]


def _equal(a, b) -> bool:
  try:
    return bool(a == b)
  except Exception:  # an == that is not a bool
    return False


def is_array(x) -> bool:
  """What jp.trace(filter=True) traces (as eqx.filter_jit does): arrays, and
  abstract ones; every other leaf is static."""
  return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct))


def _check_arg(name, i, x, aval):
  try:
    t = jax.typeof(x)
  except TypeError:
    raise TypeError(f"{name}: input {i} ({type(x).__name__}) is not a JAX type") from None
  shape_ok = (not all(isinstance(d, int) for d in aval.shape)) or tuple(t.shape) == tuple(aval.shape)
  if not shape_ok or getattr(t, "dtype", None) != aval.dtype:
    raise TypeError(f"{name}: input {i} has type {t.str_short()}, expected {aval.str_short()}")


# The jitted callables of loaded Functions, by SHA-256 of their bytes, so that
# the same bytes loaded again (as Dask does for every task) compile once.
_JIT_CACHE = _lru.LruCache(64)


def _jit_for(f: Function):
  make = lambda: jax.jit(compat.jaxpr_as_fun(f.closed_jaxpr))
  key = f._digest
  if key is None:
    return make()
  return _JIT_CACHE.get_or_make(key, make)


def trace(fun, *, static_argnums=(), static_argnames=(), filter: bool = False):
  """`jp.trace(fun, ...)(*args, **kwargs)` -> a `Function`.

  Traces `fun` as `jax.jit(fun, static_argnums=..., static_argnames=...)`
  would for these arguments. Arguments may be arrays, Python scalars,
  `jax.ShapeDtypeStruct`s or pytrees of them; static arguments are fixed in
  the Function and are left out when calling it.

  With `filter=True`, as `equinox.filter_jit`: the array leaves of the
  arguments are traced and every other leaf (a model's activation function,
  a Python float) is static. The Function keeps the static leaves in its
  signature, and is called with the whole arguments, checking that each
  static leaf is the one it was traced with. A file holds a static function
  by the name it is known by (jax.nn.silu; jp.register_function).
  """
  name = getattr(fun, "__name__", None)
  if filter:
    if static_argnums or static_argnames:
      raise ValueError("jp.trace(filter=True) takes no static_argnums or static_argnames: "
                       "every non-array leaf is static")
    return _filter_trace(fun, name)
  jitted = jax.jit(fun, static_argnums=static_argnums, static_argnames=static_argnames)

  def traced(*args, **kwargs) -> Function:
    t = jitted.trace(*args, **kwargs)
    return Function(t.jaxpr, t.in_tree, t.out_tree, name or t.fun_name)

  traced.__name__ = f"trace({name or 'function'})"
  traced.__doc__ = getattr(fun, "__doc__", None)
  return traced


def _filter_trace(fun, name):
  def traced(*args, **kwargs) -> Function:
    flat, tree = jax.tree.flatten((args, kwargs))
    static = tuple((i, x) for i, x in enumerate(flat) if not is_array(x))
    inputs = [x for x in flat if is_array(x)]

    def flat_fun(*inputs):
      it, fixed = iter(inputs), dict(static)
      a, k = jax.tree.unflatten(tree, [fixed[i] if i in fixed else next(it)
                                       for i in range(len(flat))])
      return fun(*a, **k)
    flat_fun.__name__ = name or "function"
    t = jax.jit(flat_fun).trace(*inputs)
    return Function(t.jaxpr, tree, t.out_tree, name or t.fun_name, static_leaves=static)

  traced.__name__ = f"trace({name or 'function'}, filter=True)"
  traced.__doc__ = getattr(fun, "__doc__", None)
  return traced


# --- .jaxpb -------------------------------------------------------------------

def encode_function(f: Function, *, debug_info: bool = True, out_of_line=None,
                    pickle_functions: bool = False) -> pb.Module:
  enc = encoder.Encoder(debug_info=debug_info, out_of_line=out_of_line,
                        pickle_functions=pickle_functions)
  m = enc.module(f.closed_jaxpr)
  sig = m.function
  sig.name = f.name
  sig.in_tree.CopyFrom(pytrees.encode_treedef(f.in_tree, enc.value, "function.in_tree"))
  sig.out_tree.CopyFrom(pytrees.encode_treedef(f.out_tree, enc.value, "function.out_tree"))
  sig.in_avals.extend(enc.aval(a, f"function.in_avals[{i}]") for i, a in enumerate(f.in_avals))
  sig.out_avals.extend(enc.aval(a, f"function.out_avals[{i}]") for i, a in enumerate(f.out_avals))
  for k, (i, v) in enumerate(f.static_leaves):
    sig.static_leaves.add(index=i, value=enc.value(v, f"function.static_leaves[{k}]"))
    enc.state.features.add("static_leaves")
  if len(m.namespaces) != len(enc.state.namespaces):
    # pytree aux data named a primitive of a namespace the jaxpr does not use
    raise EncodeError("the pytree signature refers to primitives the jaxpr does not use",
                      "function")
  return enc.finish()


def decode_function(m: pb.Module, *, typecheck: bool = True, source=None,
                    digest: bytes | None = None, callbacks=None,
                    trust_pickled_code: bool = False, unresolved: str = "error",
                    trusted: bool = False) -> Function:
  """`digest` names the program for the jit cache: by default the message's
  SHA-256, which covers external arrays through their checksums; a pickle's
  buffers have none, so the unpickler passes one of message and buffers.
  The host functions its callbacks were bound to count too (a compiled
  program calls the functions it was compiled with)."""
  dec, cj, (in_tree, out_tree, static_leaves) = loading.decode(
      m, typecheck=typecheck, source=source, callbacks=callbacks,
      trust_pickled_code=trust_pickled_code, unresolved=unresolved, trusted=trusted)
  if digest is None:
    digest = hashlib.sha256(m.SerializeToString(deterministic=True)).digest()
  if dec.unresolved:
    digest = None  # (not cached: the same bytes may load resolved later)
  elif dec.bound_callbacks:  # alive as long as the program (and its cache entry) is
    bound = sorted((name, id(fn)) for name, fn in dec.bound_callbacks.items())
    digest = hashlib.sha256(digest + repr(bound).encode()).digest()
  return Function(cj, in_tree, out_tree, m.function.name, static_leaves=static_leaves,
                  _digest=digest)
