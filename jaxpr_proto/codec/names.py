"""The primitive registry: `namespace::name` <-> Primitive object.

JAX's primitives are found by scanning the attributes of the already-imported
modules of JAX and of a few known libraries (tracing creates no new Primitive
objects, so this is enough); nothing is ever imported. Users add their own
with `register_primitive`.

Name collisions are resolved deterministically: primitives of core JAX take
namespace "jax"; primitives defined in Pallas modules (whose `gather`,
`scatter`, `swap` and `bitcast` clash with core ones) take a namespace named
after their module, e.g. "jax.pallas.mosaic.sc_primitives". A collision
left after that is an error, never silently resolved.
"""
from __future__ import annotations

import sys
import threading

from jaxpr_proto import compat
from jaxpr_proto.errors import EncodeError, Error, UnknownPrimitiveError

# Top-level packages whose primitives are registered automatically, and their
# namespaces. JAX itself is special-cased for Pallas, see `_namespace_for`.
KNOWN_PACKAGES = {"jax": "jax", "jaxlib": "jax", "equinox": "equinox",
                  "flax": "flax", "optax": "optax", "numpyro": "numpyro",
                  "oryx": "oryx"}


class RegistryError(Error):
  """Two different primitives claim the same `namespace::name`."""


def _namespace_for(module_name: str) -> str | None:
  top = module_name.split(".", 1)[0]
  ns = KNOWN_PACKAGES.get(top)
  if ns == "jax" and (".pallas" in module_name):
    return "jax." + module_name.split("._src.", 1)[-1].removeprefix("jax.")
  return ns


class Registry:

  def __init__(self):
    self._lock = threading.RLock()
    self._by_name: dict[tuple[str, str], object] = {}
    self._by_prim: dict[int, tuple[str, str]] = {}
    self._keep: list = []     # keeps registered primitives alive (ids stay valid)
    self._seen_modules: set[str] = set()
    self._scanning = False

  def register(self, prim, namespace: str, name: str | None = None) -> None:
    if not isinstance(prim, compat.Primitive):
      raise TypeError(f"expected a jax Primitive, got {type(prim).__name__}")
    if not namespace or "::" in namespace:
      raise ValueError(f"bad namespace {namespace!r}")
    key = (namespace, name or prim.name)
    with self._lock:
      if not self._scanning and self._needs_scan():
        self._scan()  # the primitives already imported take their names first
      old = self._by_name.get(key)
      if old is not None and old is not prim:
        raise RegistryError(
            f"primitive {key[0]}::{key[1]} is already registered to another "
            "Primitive object")
      self._by_name[key] = prim
      self._by_prim.setdefault(id(prim), key)
      self._keep.append(prim)

  def _scan(self) -> None:
    """Registers the primitives of newly imported known modules."""
    with self._lock:
      self._scanning = True
      try:
        self._scan_new_modules()
      finally:
        self._scanning = False

  def _scan_new_modules(self) -> None:
    new = sorted(m for m in list(sys.modules)
                 if m not in self._seen_modules and _namespace_for(m))
    # Non-Pallas modules first, so that a primitive re-exported by a Pallas
    # module keeps its core name; then shortest module name first.
    new.sort(key=lambda m: (".pallas" in m, len(m), m))
    for mname in new:
      self._seen_modules.add(mname)
      mod = sys.modules.get(mname)
      try:
        attrs = list(vars(mod).values())
      except TypeError:
        continue
      ns = _namespace_for(mname)
      for v in attrs:
        if isinstance(v, compat.Primitive) and id(v) not in self._by_prim:
          self.register(v, ns)

  def _needs_scan(self) -> bool:
    return len(self._seen_modules) < sum(1 for m in list(sys.modules) if _namespace_for(m))

  def name_of(self, prim, path: str = "") -> tuple[str, str]:
    key = self._by_prim.get(id(prim))
    if key is None and self._needs_scan():
      self._scan()
      key = self._by_prim.get(id(prim))
    if key is None:
      raise EncodeError(
          f"primitive {prim.name!r} ({type(prim).__module__}."
          f"{type(prim).__qualname__}) is not registered; call "
          "jaxpr_proto.register_primitive(prim, namespace='yourlib') first", path)
    return key

  def lookup(self, namespace: str, name: str, path: str = ""):
    prim = self._by_name.get((namespace, name))
    if prim is None and self._needs_scan():
      self._scan()
      prim = self._by_name.get((namespace, name))
    if prim is None:
      hint = ("import the JAX module that defines it (this JAX may be too old)"
              if namespace.startswith("jax") else
              f"import the library that defines it and call "
              f"jaxpr_proto.register_primitive(prim, namespace={namespace!r})")
      raise UnknownPrimitiveError(
          f"unknown primitive {namespace}::{name}; {hint}", path)
    return prim

  def all(self) -> dict[tuple[str, str], object]:
    if self._needs_scan():
      self._scan()
    return dict(self._by_name)


REGISTRY = Registry()


def register_primitive(prim, namespace: str, name: str | None = None) -> None:
  """Registers a user primitive as `namespace::name` (name defaults to prim.name)."""
  REGISTRY.register(prim, namespace, name)
