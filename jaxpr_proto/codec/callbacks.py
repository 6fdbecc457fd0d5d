"""Host callbacks by name: the `callback` param of debug_callback,
pure_callback and io_callback, encode and decode side by side.

A file holds the name the host function was registered under
(`jp.register_callback`), the pytree structure of its arguments and, for
jax.debug.callback, its static (non-array) arguments: never code. Decoding
binds the name to the function registered in the reading process, or to one
passed for that load (`jp.load(path, callbacks={name: fn})`); a name bound
to nothing is refused, naming every callback the file needs.
"""
from __future__ import annotations

import jax

from jaxpr_proto import compat
from jaxpr_proto.codec import extensions, names
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

CODEC = "jax::callback"
FEATURE = "callbacks"


def _codec(prim_name):
  def encode(enc, value, eqn, path):
    parts = compat.callback_parts(prim_name, value)
    if parts is None:
      raise EncodeError(f"{prim_name}'s callback {value!r} was not made by JAX's callback API", path)
    fn, in_tree, static_args = parts
    name = names.CALLBACKS.name(fn)
    if name is not None:
      fields = [("name", name)]
    elif enc.pickle_functions:
      fields = [("pickled", _pickled(fn, path)), ("qualname", _show(fn))]
      enc.state.features.add(PICKLED_FEATURE)
    else:
      raise EncodeError(
          f"the {prim_name} calls {_show(fn)}, which is not registered: a file names its "
          "callbacks, never their code. Register it, in the process that saves and the one "
          "that loads, with jp.register_callback(fn, name='mylib.fn_name') (or, for files "
          "only you will load, save its code with pickle_functions=True)", path)
    fields.append(("in_tree", in_tree))
    if static_args:
      fields.append(("static_args", static_args))
    enc.state.features.add(FEATURE)
    return extensions.param_value(enc, CODEC, fields, path)

  def decode(dec, msg, path):
    fields = extensions.param_fields(dec, msg, CODEC, _FIELDS, path)
    in_tree, static_args = fields.get("in_tree"), fields.get("static_args", {})
    if not isinstance(in_tree, jax.tree_util.PyTreeDef):
      raise DecodeError("a callback needs the pytree structure of its arguments (in_tree)", path)
    _check_call_tree(in_tree, static_args, prim_name, path)
    if "pickled" in fields:
      fn = _unpickled(dec, fields, path)
      if not isinstance(fn, compat.UnresolvedCallback):
        dec.bound_callbacks[f"<pickled at {path}>"] = fn
    else:
      name = fields.get("name")
      if not isinstance(name, str) or not names._CALLBACK_NAME.fullmatch(name):
        raise DecodeError(f"a callback needs a dotted name, not {name!r}", path)
      fn = resolve(dec, name, path)
    return compat.make_callback(prim_name, fn, in_tree, static_args)
  return encode, decode


_FIELDS = ("name", "in_tree", "static_args", "pickled", "qualname")
PICKLED_FEATURE = "pickled_code"


def _pickled(fn, path) -> bytes:
  try:
    import cloudpickle
  except ImportError:
    raise EncodeError("pickle_functions=True needs cloudpickle (pip install cloudpickle)",
                      path) from None
  try:
    return cloudpickle.dumps(fn)
  except Exception as e:
    raise EncodeError(f"cannot pickle the callback {_show(fn)}: {type(e).__name__}: {e}",
                      path) from None


def _unpickled(dec, fields, path):
  """The callback saved as code: unpickled only for a load that trusts the
  file (`trust_pickled_code=True`); otherwise a placeholder where the load
  takes them (unresolved="placeholder"), or refused. Never unpickled but
  with trust: unpickling runs code."""
  data, qualname = fields.get("pickled"), fields.get("qualname")
  if not isinstance(data, bytes) or not isinstance(qualname, str) or not qualname.isprintable():
    raise DecodeError("a pickled callback needs its bytes and a printable str qualname", path)
  if not dec.trust_pickled_code:
    why = f"the callback {qualname} is saved as pickled code, which loading would run"
    if dec.placeholders:
      return compat.UnresolvedCallback(
          qualname, f"{why}, and was not unpickled (trust_pickled_code=False)",
          shown=f"pickled callback {qualname}, not unpickled")
    raise DecodeError(
        f"{why}: load this file with trust_pickled_code=True only if you trust it, or bind a "
        "registered function in its place (save it with jp.register_callback). To inspect "
        "it without running its code, load it with unresolved='placeholder'", path)
  import pickle
  try:
    return pickle.loads(data)  # trusted: see above
  except Exception as e:
    raise DecodeError(f"cannot unpickle the callback {qualname}: {type(e).__name__}: {e}",
                      path) from None


def _check_call_tree(in_tree, static_args, prim_name, path) -> None:
  """JAX calls the function as fn(*args, **kwargs) of in_tree's (args,
  kwargs), the static args at their leaf positions."""
  n = in_tree.num_leaves
  if not isinstance(static_args, dict) or prim_name != "debug_callback" and static_args:
    raise DecodeError("static_args must be a dict, and only jax.debug.callback has them", path)
  if not all(type(k) is int and 0 <= k < n for k in static_args):
    raise DecodeError(f"static_args positions must be ints below the {n} leaves of in_tree", path)
  try:
    args, kwargs = jax.tree_util.tree_unflatten(in_tree, [0] * n)
    ok = type(args) is tuple and type(kwargs) is dict and all(type(k) is str for k in kwargs)
  except Exception:
    ok = False
  if not ok:
    raise DecodeError("in_tree must be the structure of (args tuple, kwargs dict with str keys)", path)


def resolve(dec, name: str, path: str):
  """The function bound to a callback name for this load."""
  fn = dec.callbacks.get(name) if dec.callbacks else None
  if fn is None:
    fn = names.CALLBACKS.get(name)
  if fn is None and dec.placeholders:
    return compat.UnresolvedCallback(name)  # the eqn becomes a placeholder
  if fn is None:
    needed = ", ".join(sorted(file_callbacks(dec.m)))
    raise DecodeError(
        f"callback {name!r} is not registered in this process (the file calls: {needed}). "
        "Register each with jp.register_callback(fn, name=...), or pass "
        "callbacks={name: fn} to jp.load / jp.loads", path)
  dec.bound_callbacks[name] = fn
  return fn


def file_callbacks(m: pb.Module) -> set[str]:
  """The callback names a module's params hold."""
  out = set()
  for p in m.params:
    v = p.value
    if v.WhichOneof("kind") == "extension" and v.extension.codec == CODEC:
      for f in v.extension.fields:
        if f.name == "name" and f.value.WhichOneof("kind") == "str":
          out.add(f.value.str)
  return out


def _show(fn) -> str:
  """module.qualname of a function, or of a callable object's class."""
  qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
  return f"{getattr(fn, '__module__', None) or type(fn).__module__}.{qualname}"


PARAM_CODECS = {(p, "callback"): _codec(p) for p in sorted(compat.CALLBACK_PRIMITIVES)}
