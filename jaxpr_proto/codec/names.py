"""The one registry of names: everything a file may name, and what each name
stands for in this process.

* `PRIMITIVES` (`REGISTRY`): `namespace::name` <-> Primitive object;
* `ENUMS`, `RECORDS`: the allow-listed param types (`jax::core.MemorySpace`);
* `PYTREE_NODES`: pytree node classes (`optax::ScaleByAdamState`);
* `SINGLETONS`: objects written by name (`jax::UNSPECIFIED`).

All are filled the same way: from the modules that are already imported —
JAX's own, and of the known libraries (flax, equinox, optax, numpyro) once
the user imports them — and by the `register_*` functions. When a lookup
misses, the modules imported since the last look are scanned (`refresh`),
and the lookup is tried again. A primitive or param type of one of JAX's
optional modules (Pallas and its backends, Mosaic, sparse, ...) that is still
missing then imports that module, as the fixed table `compat.optional` names
it (`load_optional`), and is looked up once more; nothing else is ever
imported here, and never by a name read from a file.

Primitive name collisions are resolved deterministically: primitives of core
JAX take namespace "jax"; primitives defined in Pallas modules (whose
`gather`, `scatter`, `swap` and `bitcast` clash with core ones) take a
namespace named after their module, e.g. "jax.pallas.mosaic.sc_primitives".
A collision left after that is an error, never silently resolved.
"""
from __future__ import annotations

import dataclasses
import enum
import re
import sys
import threading

from jaxpr_proto import compat
from jaxpr_proto.compat import optional
from jaxpr_proto.compat import pallas as compat_pallas
from jaxpr_proto.compat.memo import identity
from jaxpr_proto.errors import EncodeError, Error, UnknownPrimitiveError


class RegistryError(Error):
  """Two different objects claim the same name."""


_changes = 0  # see generation()


def generation() -> int:
  """A number that changes whenever a name or an extension is added or
  removed: what a file's names stand for in this process is the same while
  it stays."""
  return _changes


def note_change() -> None:
  global _changes
  _changes += 1


class NameTable:
  """name <-> object, for one kind of thing a file names. Objects are keyed
  by identity where `by_id` (primitives, singletons), else by equality.
  Where `optional`, a name still missing after the scan loads the JAX module
  that defines it, if `compat.optional` names one (`load_optional`)."""

  def __init__(self, what: str, *, by_id: bool = False, scan_on_miss: bool = True,
               optional: bool = False):
    self.what, self._by_id, self._scan_on_miss = what, by_id, scan_on_miss
    self._optional = optional
    self._objects: dict = {}
    self._names: dict = {}
    self._keep: list = []  # keeps objects alive, so that their ids stay valid

  def add(self, name, obj, *, replace: bool = False) -> None:
    old = self._objects.get(name)
    if old is not None and old is not obj and not replace:
      raise RegistryError(f"{self.what} {_show(name)} is already registered to {old!r}")
    note_change()
    self._objects[name] = obj
    key = identity(obj) if self._by_id else obj
    self._names.setdefault(key, name) if not replace else self._names.__setitem__(key, name)
    if self._by_id:
      self._keep.append(obj)

  def name(self, obj):
    """The name of `obj`, or None."""
    name = self._name(obj)
    if name is None and self._scan_on_miss and refresh():
      name = self._name(obj)
    return name

  def _name(self, obj):
    try:
      name = self._names.get(identity(obj) if self._by_id else obj)
    except TypeError:  # unhashable
      return None
    return name if name is None or not self._by_id or self._objects.get(name) is obj else None

  def get(self, name):
    """The object named `name`, or None."""
    obj = self._objects.get(name)
    if obj is None and self._scan_on_miss and refresh():
      obj = self._objects.get(name)
    if obj is None and self._optional and load_optional(_show(name, quote=False)):
      obj = self._objects.get(name)
    return obj

  def names(self) -> dict:
    if self._scan_on_miss:
      refresh()
    return dict(self._objects)

  def remove(self, name) -> None:
    """Forgets a name (tests, and users undoing a registration)."""
    note_change()
    obj = self._objects.pop(name, None)
    if obj is not None:
      key = identity(obj) if self._by_id else obj
      if self._names.get(key) == name:
        del self._names[key]

  def __contains__(self, name) -> bool:
    return name in self._objects


def _show(name, quote: bool = True) -> str:
  if isinstance(name, tuple):
    return "::".join(name)
  return repr(name) if quote else str(name)


PRIMITIVES = NameTable("primitive", by_id=True, optional=True)
ENUMS = NameTable("enum type", optional=True)
RECORDS = NameTable("record type", optional=True)
PYTREE_NODES = NameTable("pytree name")
SINGLETONS = NameTable("singleton", by_id=True, scan_on_miss=False)


# --- the scan ------------------------------------------------------------------

_lock = threading.RLock()
_seen: set[str] = set()  # modules scanned so far
_seen_count = 0  # len(sys.modules) then: a cheap first test
_scanning = False


def refresh() -> bool:
  """Scans the modules imported since the last call; True if there were any."""
  global _scanning, _seen_count
  if len(sys.modules) == _seen_count:
    return False
  with _lock:
    if _scanning:
      return False
    _seen_count = len(sys.modules)
    new = [m for m in list(sys.modules) if m not in _seen]
    if not new:
      return False
    _scanning = True
    try:
      _seen.update(new)
      _scan_primitives(new)
      _scan_param_types(set(new))
      _scan_library_nodes(set(new))
    finally:
      _scanning = False
    return True


# --- JAX's optional modules, imported where a file needs them ---------------------

_optional_tried: dict[str, str | None] = {}  # module -> None (imported) or why not


def load_optional(name: str) -> bool:
  """Imports the JAX module that defines `name` (`namespace::name`, a
  primitive or a param type), where `compat.optional`'s fixed table names
  one, once per process; its primitives and param types are registered as
  it is imported. True if that module is loaded (now or before). The module
  imported is always the table's, never a name read from a file."""
  module = optional.module_for(name)
  if module is None:
    return False
  if module not in _optional_tried:
    try:
      optional.import_optional(module)
      why = None
    except Exception as e:  # (a backend this build or machine lacks)
      why = f"{type(e).__name__}: {e}"
    with _lock:
      _optional_tried.setdefault(module, why)
      refresh()
  else:
    with _lock:  # (waits while another thread registers what it imported)
      pass
  return _optional_tried[module] is None


def optional_failure(name: str) -> str:
  """Why the JAX module that defines `name` is not loaded here, where it
  failed to import (to append to the error of a name not found), or ''."""
  module = optional.module_for(name)
  why = _optional_tried.get(module) if module is not None else None
  return f" (JAX's module {module}, which defines it, failed to import: {why})" if why else ""


# Top-level packages whose primitives are registered automatically, and their
# namespaces. JAX itself is special-cased for Pallas, see `_namespace_for`.
KNOWN_PACKAGES = {"jax": "jax", "jaxlib": "jax", "equinox": "equinox",
                  "flax": "flax", "optax": "optax", "numpyro": "numpyro",
                  "oryx": "oryx"}


def _namespace_for(module_name: str) -> str | None:
  top = module_name.split(".", 1)[0]
  ns = KNOWN_PACKAGES.get(top)
  if ns == "jax" and (".pallas" in module_name):
    return "jax." + module_name.split("._src.", 1)[-1].removeprefix("jax.")
  return ns


def _scan_primitives(modules) -> None:
  # Non-Pallas modules first, so that a primitive re-exported by a Pallas
  # module keeps its core name; then shortest module name first.
  known = sorted((m for m in modules if _namespace_for(m)),
                 key=lambda m: (".pallas" in m, len(m), m))
  for mname in known:
    try:
      attrs = list(vars(sys.modules.get(mname)).values())
    except TypeError:
      continue
    ns = _namespace_for(mname)
    for v in attrs:
      if isinstance(v, compat.Primitive) and PRIMITIVES._name(v) is None:
        _add_primitive(v, ns, v.name)


def _add_primitive(prim, namespace: str, name: str) -> None:
  key = (namespace, name)
  old = PRIMITIVES._objects.get(key)
  if old is not None and old is not prim:
    raise RegistryError(f"primitive {namespace}::{name} is already registered to another "
                        "Primitive object")
  PRIMITIVES.add(key, prim)


class Registry:
  """The primitives' table, as the encoder, decoder and pickling use it."""

  def register(self, prim, namespace: str, name: str | None = None) -> None:
    if not isinstance(prim, compat.Primitive):
      raise TypeError(f"expected a jax Primitive, got {type(prim).__name__}")
    if not namespace or "::" in namespace:
      raise ValueError(f"bad namespace {namespace!r}")
    with _lock:
      refresh()  # the primitives already imported take their names first
      _add_primitive(prim, namespace, name or prim.name)

  def name_of(self, prim, path: str = "") -> tuple[str, str]:
    key = PRIMITIVES.name(prim)
    if key is None:
      raise EncodeError(
          f"primitive {prim.name!r} ({type(prim).__module__}."
          f"{type(prim).__qualname__}) is not registered; call "
          "jaxpr_proto.register_primitive(prim, namespace='yourlib') first", path)
    return key

  def lookup(self, namespace: str, name: str, path: str = ""):
    prim = PRIMITIVES.get((namespace, name))
    if prim is None:
      failure = optional_failure(f"{namespace}::{name}")
      if not namespace.startswith("jax"):
        hint = (f"import the library that defines it and call "
                f"jaxpr_proto.register_primitive(prim, namespace={namespace!r})")
      elif failure:
        hint = f"its JAX module is not loaded{failure}"
      else:
        hint = "this JAX may be too old, or the JAX module that defines it is not imported"
      raise UnknownPrimitiveError(
          f"unknown primitive {namespace}::{name}; {hint}", path)
    return prim

  def all(self) -> dict[tuple[str, str], object]:
    return PRIMITIVES.names()


REGISTRY = Registry()


def register_primitive(prim, namespace: str, name: str | None = None) -> None:
  """Registers a user primitive as `namespace::name` (name defaults to prim.name)."""
  REGISTRY.register(prim, namespace, name)


# --- param types: JAX's enums and records, and the user's ------------------------

# Types that look like records but must not be built from file data.
_NOT_RECORDS = {"PRNGImpl"}


def is_record_type(cls) -> bool:
  if cls.__name__ in _NOT_RECORDS:
    return False
  if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
    return True
  return dataclasses.is_dataclass(cls) and isinstance(cls, type)


def _scan_param_types(new: set[str]) -> None:
  """Registers the param types of the modules `new` (just imported): all
  enums and records of JAX's PARAM_TYPE_MODULES, and Pallas's listed ones."""
  for mname in compat.PARAM_TYPE_MODULES:
    mod = sys.modules.get(mname) if mname in new else None
    if mod is None:
      continue
    short = mname.removeprefix(compat.PARAM_TYPE_PREFIX)
    for attr, cls in sorted(vars(mod).items()):
      if not isinstance(cls, type) or cls.__module__ != mname:
        continue
      name = f"jax::{short}.{cls.__qualname__}"
      if issubclass(cls, enum.Enum):
        _add_param_type(ENUMS, name, cls)
      elif is_record_type(cls):
        _add_param_type(RECORDS, name, cls)
  for name, cls in compat_pallas.param_types(new).items():
    _add_param_type(ENUMS if issubclass(cls, enum.Enum) else RECORDS, name, cls)


def _add_param_type(table, name, cls) -> None:
  if table._objects.get(name) is not cls:
    table.add(name, cls, replace=True)


def register_param_type(cls, name: str) -> None:
  """Allow-lists a user enum, NamedTuple or dataclass for eqn params."""
  if issubclass(cls, enum.Enum):
    ENUMS.add(name, cls, replace=True)
  elif is_record_type(cls):
    RECORDS.add(name, cls, replace=True)
  else:
    raise TypeError(f"{cls} is neither an enum nor a NamedTuple/dataclass")


# --- singletons -----------------------------------------------------------------

for _name, _obj in {
    "jax::UNSPECIFIED": compat.UNSPECIFIED,
    "jax::UNCONSTRAINED": compat.UNCONSTRAINED,
    "jax::empty_concrete_mesh": compat.mesh_lib.empty_concrete_mesh,
    "jax::checkpoint_policies.everything_saveable": compat.checkpoint_policies.everything_saveable,
    "jax::checkpoint_policies.nothing_saveable": compat.checkpoint_policies.nothing_saveable,
    "jax::abstract_token": compat.abstract_token,
    **compat.CALLBACK_SINGLETONS,
}.items():
  SINGLETONS.add(_name, _obj)


# --- pytree node types: JAX's own, the known libraries', and the user's -----------

def register_pytree_node(cls: type, name: str) -> None:
  """Registers a pytree node class (already registered with JAX) by name."""
  old = PYTREE_NODES._objects.get(name)
  if old is not None and old is not cls:
    raise ValueError(f"pytree name {name!r} is already registered to {old}")
  PYTREE_NODES.add(name, cls)


# --- host callbacks, by name ---------------------------------------------------

CALLBACKS = NameTable("callback", by_id=True, scan_on_miss=False)
_CALLBACK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*([.:][A-Za-z_][A-Za-z0-9_]*)*")


def register_callback(fn=None, *, name: str, replace: bool = False):
  """Registers the host function `fn` of a jax.debug.callback,
  jax.pure_callback or io_callback under `name` (such as
  "mylib.log_metrics"), in the process that saves a program calling it and
  in the one that loads it: the file holds the name, never the code. As a
  decorator: `@jp.register_callback(name="mylib.log_metrics")`. A name bound
  to another function is refused unless `replace`."""
  return _register_by_name(CALLBACKS, register_callback, fn, name, replace, "mylib.log_metrics")


def _register_by_name(table, register, fn, name, replace, example):
  """`register(fn, name=..., replace=...)` of register_callback and
  register_function: `fn` under `name` in `table`, or a decorator."""
  if fn is None:
    return lambda f: register(f, name=name, replace=replace)
  if not callable(fn):
    raise TypeError(f"{register.__name__} takes a callable, not a {type(fn).__name__}")
  if not isinstance(name, str) or not _CALLBACK_NAME.fullmatch(name):
    raise ValueError(f"{table.what} name {name!r} is not a dotted name such as {example!r}")
  try:
    table.add(name, fn, replace=replace)
  except RegistryError as e:
    raise RegistryError(f"{e} (pass replace=True to bind the name to {fn!r})") from None
  return fn


# --- functions, by qualified name ----------------------------------------------------

FUNCTIONS = NameTable("function", by_id=True)
# JAX's public modules whose functions are known by qualified name
# ("jax.nn.silu"), scanned in this order on first use (the first name of an
# object wins: jax.nn.silu, not its alias jax.nn.swish).
FUNCTION_MODULES = ("jax.nn", "jax.numpy", "jax.lax", "jax.numpy.linalg", "jax.numpy.fft",
                    "jax.scipy.special", "jax.scipy.linalg", "jax.scipy.signal",
                    "jax.scipy.stats.norm", "jax.random")
# Functions of known libraries that their pytrees hold (equinox's MLP has
# final_activation=_identity by default), known once the library is imported.
KNOWN_LIBRARY_FUNCTIONS = (("equinox.nn._mlp", "_identity"),)
_jax_functions_scanned = False


def _scan_jax_functions() -> None:
  global _jax_functions_scanned
  _jax_functions_scanned = True
  import importlib
  for mod_name in FUNCTION_MODULES:  # our own list: never a name from a file
    mod = importlib.import_module(mod_name)
    for attr, obj in sorted(vars(mod).items()):
      if (callable(obj) and not attr.startswith("_") and not isinstance(obj, type)
          and f"{mod_name}.{attr}" not in FUNCTIONS and FUNCTIONS._name(obj) is None):
        FUNCTIONS.add(f"{mod_name}.{attr}", obj)


def function_name(fn):
  """The name `fn` is known by (a function of JAX's public modules or a known
  library's, or one registered with register_function or register_callback),
  or None."""
  if not _jax_functions_scanned:
    _scan_jax_functions()
  return FUNCTIONS.name(fn) or CALLBACKS.name(fn)


def function(name: str):
  """The function known by `name` in this process, or None."""
  if not _jax_functions_scanned:
    _scan_jax_functions()
  return FUNCTIONS.get(name) or CALLBACKS.get(name)


def register_function(fn=None, *, name: str, replace: bool = False):
  """Registers a function that pytrees or params hold (such as a model's
  activation) under `name` (such as "mylib.gelu_tanh"), in the process that
  saves and the one that loads: the file holds the name, never the code. As a
  decorator: `@jp.register_function(name="mylib.gelu_tanh")`."""
  return _register_by_name(FUNCTIONS, register_function, fn, name, replace, "mylib.gelu_tanh")


# Public modules of flax, equinox and optax whose node classes are registered
# by name once the user imports them, in order (the first name found for a
# class wins), and the prefix of the names they give.
KNOWN_LIBRARY_MODULES = (
    ("flax.core", "flax::core."),
    ("flax.core.meta", "flax::core.meta."),
    ("flax.struct", "flax::struct."),
    ("flax.linen", "flax::linen."),
    ("flax.nnx", "flax::nnx."),
    ("flax.training.train_state", "flax::training.train_state."),
    ("optax", "optax::"),
    ("optax.contrib", "optax::contrib."),
    ("optax.schedules", "optax::schedules."),
    ("optax.transforms", "optax::transforms."),
    ("optax.tree_utils", "optax::tree_utils."),
    ("equinox", "equinox::"),
    ("equinox.nn", "equinox::nn."),
)
# Sentinel objects these libraries put in pytree aux data, written by name.
KNOWN_LIBRARY_SINGLETONS = (
    ("equinox._module._flatten", "MISSING", "equinox::MISSING"),
)


def _is_namedtuple(cls) -> bool:
  return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _scan_library_nodes(new: set[str]) -> None:
  for mod_name, attr, name in KNOWN_LIBRARY_SINGLETONS:
    obj = getattr(sys.modules.get(mod_name), attr, None) if mod_name in new else None
    if obj is not None and name not in SINGLETONS:
      SINGLETONS.add(name, obj)
  for mod_name, attr in KNOWN_LIBRARY_FUNCTIONS:
    obj = getattr(sys.modules.get(mod_name), attr, None) if mod_name in new else None
    if obj is not None and f"{mod_name}.{attr}" not in FUNCTIONS:
      FUNCTIONS.add(f"{mod_name}.{attr}", obj)
  nodes = compat.pytree_node_registry()
  for mod_name, prefix in KNOWN_LIBRARY_MODULES:
    mod = sys.modules.get(mod_name) if mod_name in new else None
    if mod is None:
      continue
    top = mod_name.split(".", 1)[0]
    try:
      items = sorted(vars(mod).items())
    except TypeError:
      continue
    for attr, obj in items:
      if (not isinstance(obj, type) or attr.startswith("_")
          or getattr(obj, "__module__", "").split(".", 1)[0] != top
          or PYTREE_NODES._name(obj) is not None or f"{prefix}{attr}" in PYTREE_NODES):
        continue
      if _is_namedtuple(obj) or nodes is None or obj in nodes:
        register_pytree_node(obj, f"{prefix}{attr}")


for _name, _cls in compat.extra_enum_types().items():
  ENUMS.add(_name, _cls, replace=True)
for _name, _cls in compat.internal_pytree_types().items():
  register_pytree_node(_cls, _name)
refresh()
