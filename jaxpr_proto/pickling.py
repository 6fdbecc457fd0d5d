"""Pickle support: `pickle`, `cloudpickle` and `copy.deepcopy` of jaxprs.

Installed by `import jaxpr_proto` (unless the environment variable
`JAXPR_PROTO_NO_PICKLE` is set to a non-empty value other than "0"); `uninstall()`
takes it out again and `install()` puts it back.

What it registers with `copyreg` (so `pickle`, `cloudpickle`, Dask and
`copy.deepcopy` all use it):

* `ClosedJaxpr` pickles as its `.jaxpb` encoding; unpickling calls
  `_load_closed_jaxpr(data)`, which decodes it as `jaxpr_proto.loads` does,
  as trusted input (a pickle stream is code anyway): a program of this very
  jaxpr_proto, JAX and jaxlib skips the checks against hostile files, one
  of another writer is checked in full (check.loading). No JAX internals
  are in the stream.
* An open `Jaxpr` pickles as the `.jaxpb` encoding of the closed jaxpr that
  takes its constvars as leading invars (`pe.convert_constvars_jaxpr`) plus
  the number of constvars; unpickling turns those invars back into constvars.
* A `Primitive` pickles as its registry name (`namespace::name`) and unpickles
  to the very same registered object, with its lowering and other rules.
* `jax.extend.core.jaxpr_as_fun(cj)` pickles as "`jaxpr_as_fun` of this
  jaxpr" (it is a `functools.partial` of a JAX function that `pickle` cannot
  find by name); every other `functools.partial` pickles as before.
* `jax.jit(f)`, where `f` is `jaxpr_as_fun(cj)` or a `jaxpr_proto.Function`,
  pickles as "`jax.jit` of f with these options". Unpickling the same bytes
  again returns the same jitted function, so it compiles once per process.
  Other jitted functions pickle as JAX makes them.

`copy.copy` of a ClosedJaxpr or Jaxpr stays a cheap shallow copy: the payload
is only encoded when it is actually pickled or deep-copied.
"""
from __future__ import annotations

import copyreg
import functools
import hashlib
import os
import pickle

import jax
import jax.extend.core as jex_core

from jaxpr_proto import _lru, api, compat, function
from jaxpr_proto.check import loading
from jaxpr_proto.codec.names import REGISTRY
from jaxpr_proto.wire import external, files

# Whether pickles carry debug info (source locations, names).
DEBUG_INFO = True

_installed: dict[type, object] = {}  # type -> the dispatch entry it replaced (or _NONE)
_NONE = object()


# --- the payload --------------------------------------------------------------

class _Encoded:
  """A jaxpr, function or jitted function whose `.jaxpb` bytes are made lazily.

  Pickled, it becomes its `.jaxpb` bytes; with arrays of 1 MiB or more, an
  `external.Parts` of the message and the arrays' own buffers, which protocol
  5 carries out of band (Dask, `pickle.dumps(..., buffer_callback=...)`) and
  older protocols in band. Deep-copied, it becomes the same with the buffers
  copied. Shallow-copied (`copy.copy` of the owner), it stays this object,
  and the loaders then make a shallow copy of `obj` instead.
  """
  __slots__ = ("obj", "convert")

  def __init__(self, obj, convert=None):
    self.obj = obj
    self.convert = convert  # obj -> what is encoded, if not obj itself

  def parts(self) -> tuple[bytes, list]:
    """(the message's bytes, the buffers of its external arrays)."""
    obj = self.obj if self.convert is None else self.convert(self.obj)
    sink = external.PickleBuffers()
    # The pickle stream is code anyway: unregistered callbacks travel as code.
    m = api.encode(obj, debug_info=DEBUG_INFO, out_of_line=sink, pickle_functions=True)
    return m.SerializeToString(deterministic=True), sink.buffers

  def __reduce_ex__(self, protocol):
    message, buffers = self.parts()
    if not buffers:
      return (bytes, (message,))
    if protocol >= 5:
      return (external.Parts, (message, *map(pickle.PickleBuffer, buffers)))
    return (external.Parts, (message, *(b.tobytes() for b in buffers)))

  def __deepcopy__(self, memo):
    message, buffers = self.parts()
    return external.Parts(message, *(b.tobytes() for b in buffers)) if buffers else message


def _loads(data):
  """The program of pickled bytes or Parts: a pickle stream is trusted input
  (unpickling runs code by design), so the program is checked only against
  another writer (check.loading.decode's `trusted`), not as a hostile file."""
  message, source = external.message_and_source(data)
  m = files.parse(message)
  if m.HasField("function"):
    return function.decode_function(m, source=source, trust_pickled_code=True, trusted=True)
  return loading.decode(m, source=source, trust_pickled_code=True, trusted=True)[1]


# --- ClosedJaxpr ----------------------------------------------------------------

def _reduce_closed_jaxpr(cj):
  return (_load_closed_jaxpr, (_Encoded(cj),))


def _load_closed_jaxpr(data):
  if isinstance(data, _Encoded):  # copy.copy
    cj = data.obj
    return compat.ClosedJaxpr(cj.jaxpr, cj.consts)
  cj = _loads(data)
  if not isinstance(cj, compat.ClosedJaxpr):
    raise TypeError(f"the pickle holds a {type(cj).__name__}, not a ClosedJaxpr")
  return cj


# --- Jaxpr ---------------------------------------------------------------------

def _reduce_jaxpr(jaxpr):
  return (_load_jaxpr, (_Encoded(jaxpr, _closed_form), len(jaxpr.constvars)))


def _closed_form(jaxpr):
  """The ClosedJaxpr (no consts) that takes the constvars as leading invars."""
  if jaxpr.constvars:
    jaxpr = compat.convert_constvars_jaxpr(jaxpr)
  return compat.ClosedJaxpr(jaxpr, ())


def _load_jaxpr(data, num_constvars: int):
  if isinstance(data, _Encoded):  # copy.copy
    return data.obj.replace()
  cj = _load_closed_jaxpr(data)
  jaxpr = cj.jaxpr
  n = num_constvars if type(num_constvars) is int else -1  # never int() of a pickle's str
  if cj.consts or not 0 <= n <= len(jaxpr.invars):
    raise ValueError("malformed pickled Jaxpr")
  if n:
    dbg = jaxpr.debug_info
    if dbg.arg_names is not None:
      dbg = dbg._replace(arg_names=tuple(dbg.arg_names[n:]))
    jaxpr = jaxpr.replace(constvars=jaxpr.invars[:n], invars=jaxpr.invars[n:],
                          debug_info=dbg)
  return jaxpr


# --- Primitive -----------------------------------------------------------------

def _reduce_primitive(prim):
  ns, name = REGISTRY.name_of(prim)
  return (_lookup_primitive, (ns, name))


def _lookup_primitive(namespace: str, name: str):
  return REGISTRY.lookup(namespace, name)


def _primitive_types() -> set[type]:
  out, todo = set(), [compat.Primitive]
  while todo:
    t = todo.pop()
    if t not in out:
      out.add(t)
      todo.extend(t.__subclasses__())
  return out


# --- jaxpr_as_fun(cj) ----------------------------------------------------------

def _jaxpr_as_fun_impl():
  """The uncurried function behind `jax.extend.core.jaxpr_as_fun`, or None."""
  curried = jex_core.jaxpr_as_fun
  if (isinstance(curried, functools.partial) and curried.func is functools.partial
      and len(curried.args) == 1 and callable(curried.args[0])):
    return curried.args[0]
  return None


_JAXPR_AS_FUN = _jaxpr_as_fun_impl()


def _is_jaxpr_as_fun(f) -> bool:
  return (type(f) is functools.partial and _JAXPR_AS_FUN is not None
          and f.func is _JAXPR_AS_FUN and len(f.args) == 1 and not f.keywords
          and isinstance(f.args[0], compat.ClosedJaxpr) and not f.__dict__)


def _reduce_partial(p):
  if _is_jaxpr_as_fun(p):
    return (jaxpr_as_fun, (p.args[0],))
  return p.__reduce__()  # exactly what pickle does without this hook


def jaxpr_as_fun(closed_jaxpr):
  """`jax.extend.core.jaxpr_as_fun`, by a name that pickle can find."""
  return jex_core.jaxpr_as_fun(closed_jaxpr)


# --- jax.jit of a jaxpr or Function --------------------------------------------

_PJIT_TYPE = type(jax.jit(lambda: None))


def _jit_info(f):
  """The (fun, PjitInfo) of a jitted function, or None."""
  return compat.jit_info(f)


def _jit_options_of(f) -> dict | None:
  """The jax.jit options of jitted function `f` that pickling keeps, or None."""
  got = _jit_info(f)
  return None if got is None else _simple_jit_options(got[1])


def _simple_jit_options(info) -> dict | None:
  """jax.jit keyword arguments that rebuild `info`, or None if it has any
  option we do not rebuild (shardings, layouts, device, backend)."""
  try:
    if (info.device is not None or info.backend is not None or info.use_resource_env
        or info.user_specified_in_shardings
        or any(not _is_unspecified(s) for s in info.in_shardings_leaves)
        or any(not _is_unspecified(s) for s in info.out_shardings_leaves)
        or any(l is not None for l in info.in_layouts_leaves)
        or any(l is not None for l in info.out_layouts_leaves)):
      return None
    kw = {}
    for k in ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames"):
      v = tuple(getattr(info, k))
      if v:
        kw[k] = v
    if info.keep_unused:
      kw["keep_unused"] = True
    if info.inline:
      kw["inline"] = True
    if info.compiler_options_kvs:
      kw["compiler_options"] = dict(info.compiler_options_kvs)
    return kw
  except AttributeError:
    return None


def _is_unspecified(s) -> bool:
  return s is compat.UNSPECIFIED or type(s).__name__ == "UnspecifiedValue"


def _reduce_pjit(f):
  got = _jit_info(f)
  if got is not None:
    fun, info = got
    if _is_jaxpr_as_fun(fun) or isinstance(fun, function.Function):
      kw = _simple_jit_options(info)
      if kw is not None:
        target = fun.args[0] if _is_jaxpr_as_fun(fun) else fun
        return (_load_jit, (_Encoded(target), tuple(sorted(kw.items()))))
  return f.__reduce_ex__(4)  # what pickle does without this hook


_JIT_CACHE = _lru.LruCache(64)


def _load_jit(data, options):
  """Unpickles `jax.jit(jaxpr_as_fun(cj))` or `jax.jit(function)`.

  The same bytes and options give the same jitted function (a small LRU cache
  keyed by their SHA-256), so a function that is shipped again and again, as
  Dask does with each task, is traced and compiled once per process.
  """
  kw = dict(options)
  if isinstance(data, _Encoded):  # copy.copy: same target, new jit
    return _make_jit(data.obj, kw)
  digest = data.digest() if isinstance(data, external.Parts) else hashlib.sha256(data).digest()
  return _JIT_CACHE.get_or_make((digest, tuple(options)), lambda: _make_jit(_loads(data), kw))


def _make_jit(target, kw):
  if isinstance(target, compat.ClosedJaxpr):
    return jax.jit(jex_core.jaxpr_as_fun(target), **kw)
  return jax.jit(target, **kw)


# --- install / uninstall -------------------------------------------------------

def _reducers() -> dict[type, object]:
  # ClosedJaxpr after Jaxpr: from JAX 0.11 they are one class, and every jaxpr is closed.
  out = {compat.Jaxpr: _reduce_jaxpr, compat.ClosedJaxpr: _reduce_closed_jaxpr,
         _PJIT_TYPE: _reduce_pjit}
  if _JAXPR_AS_FUN is not None:
    out[functools.partial] = _reduce_partial
  for t in _primitive_types():
    out[t] = _reduce_primitive
  return out


def install(*, debug_info: bool = True) -> None:
  """Registers the pickle hooks (done by `import jaxpr_proto`).

  Call it again after defining a new `Primitive` subclass, so that its
  instances pickle by name too. `debug_info=False` leaves source locations
  and names out of the pickles.
  """
  global DEBUG_INFO
  DEBUG_INFO = bool(debug_info)
  for t, reducer in _reducers().items():
    current = copyreg.dispatch_table.get(t, _NONE)
    if current is reducer:
      continue
    if t not in _installed:
      _installed[t] = current
    copyreg.pickle(t, reducer)


def uninstall() -> None:
  """Removes the pickle hooks: jaxprs pickle as they do without jaxpr_proto
  (that is, mostly not at all). Pickles made before stay loadable."""
  reducers = set(_reducers().values())
  for t, previous in list(_installed.items()):
    if copyreg.dispatch_table.get(t) in reducers:
      if previous is _NONE:
        del copyreg.dispatch_table[t]
      else:
        copyreg.dispatch_table[t] = previous
    del _installed[t]


def installed() -> bool:
  """Whether the hooks are in place."""
  return copyreg.dispatch_table.get(compat.ClosedJaxpr) is _reduce_closed_jaxpr


# --- jp.Function: pickles whether or not the hooks are installed ----------------

def _reduce_function(f):
  return (function._load_function, (_Encoded(f),))


copyreg.pickle(function.Function, _reduce_function)


def _install_on_import() -> None:
  if os.environ.get("JAXPR_PROTO_NO_PICKLE", "") in ("", "0"):
    install()
