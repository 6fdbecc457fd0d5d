"""Pytree structures (PyTreeDef) <-> TreeDef messages.

Built-in containers and None are encoded structurally. Namedtuples and custom
node types are encoded by a registered name (`register_pytree_node`); decoding
looks the name up here and never imports anything.
"""
from __future__ import annotations

import collections

import jax
from jax.tree_util import PyTreeDef, default_registry, treedef_children

from jaxpr_proto import compat
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

PYTREE_TYPES: dict[str, type] = {}
_PYTREE_NAMES: dict[type, str] = {}

_K = pb.TreeNodeKind
_BUILTIN = {tuple: _K.TREE_NODE_KIND_TUPLE, list: _K.TREE_NODE_KIND_LIST,
            dict: _K.TREE_NODE_KIND_DICT, type(None): _K.TREE_NODE_KIND_NONE}
_BUILTIN_INV = {v: k for k, v in _BUILTIN.items()}


def register_pytree_node(cls: type, name: str) -> None:
  """Registers a pytree node class (already registered with JAX) by name."""
  old = PYTREE_TYPES.get(name)
  if old is not None and old is not cls:
    raise ValueError(f"pytree name {name!r} is already registered to {old}")
  PYTREE_TYPES[name] = cls
  _PYTREE_NAMES[cls] = name


def encode_treedef(t: PyTreeDef, value_encoder, path: str) -> pb.TreeDef:
  return pb.TreeDef(root=_encode_node(t, value_encoder, path))


def _encode_node(t, value_encoder, path):
  node = pb.TreeNode()
  data = t.node_data()
  if data is None:
    return node  # a leaf
  cls, aux = data
  kind = _BUILTIN.get(cls)
  if kind is not None:
    node.kind = kind
    if cls is dict:
      for i, k in enumerate(aux):
        node.keys.append(value_encoder(k, f"{path}.keys[{i}]"))
  elif _is_namedtuple(cls) and aux is None and _name_of(cls) is None:
    # An unregistered namedtuple: by its name and field names (structurally).
    node.kind = _K.TREE_NODE_KIND_NAMEDTUPLE
    node.type = _STRUCTURAL_NAMES.get(cls) or f"{cls.__module__}.{cls.__qualname__}"
    for i, f in enumerate(cls._fields):
      node.keys.append(value_encoder(f, f"{path}.keys[{i}]"))
  elif _name_of(cls) is not None:
    name = _PYTREE_NAMES[cls]
    node.type = name
    if issubclass(cls, tuple) and hasattr(cls, "_fields") and aux is None:
      node.kind = _K.TREE_NODE_KIND_NAMEDTUPLE
    else:
      node.kind = _K.TREE_NODE_KIND_CUSTOM
      node.aux.CopyFrom(value_encoder(aux, f"{path}.aux"))
  else:
    raise EncodeError(
        f"pytree node type {cls.__module__}.{cls.__qualname__} is not "
        "registered; call jaxpr_proto.register_pytree_node(cls, name)", path)
  for i, c in enumerate(treedef_children(t)):
    node.children.append(_encode_node(c, value_encoder, f"{path}.children[{i}]"))
  return node


def decode_treedef(msg: pb.TreeDef, value_decoder, path: str) -> PyTreeDef:
  return _decode_node(msg.root, value_decoder, path, 0)


_LEAF = jax.tree_util.tree_structure(0)
_MAX_DEPTH = 200


def _decode_node(node, value_decoder, path, depth):
  if depth > _MAX_DEPTH:
    raise DecodeError("pytree structure nested too deeply", path)
  if node.kind == _K.TREE_NODE_KIND_LEAF_UNSPECIFIED:
    if node.children:
      raise DecodeError("a pytree leaf has children", path)
    return _LEAF
  children = [_decode_node(c, value_decoder, f"{path}.children[{i}]", depth + 1)
              for i, c in enumerate(node.children)]
  cls = _BUILTIN_INV.get(node.kind)
  aux = None
  if cls is dict:
    aux = [value_decoder(k, f"{path}.keys[{i}]") for i, k in enumerate(node.keys)]
    if len(aux) != len(children):
      raise DecodeError("dict node has a different number of keys and children", path)
  elif cls is type(None):
    if children:
      raise DecodeError("a None node has children", path)
  elif cls is None:
    if node.kind not in (_K.TREE_NODE_KIND_NAMEDTUPLE, _K.TREE_NODE_KIND_CUSTOM):
      raise DecodeError(f"unknown pytree node kind {node.kind}", path)
    cls = _class_named(node.type)
    if cls is None and node.kind == _K.TREE_NODE_KIND_NAMEDTUPLE and node.keys:
      cls = _structural_namedtuple(node, value_decoder, path)
      if len(cls._fields) != len(children):
        raise DecodeError("namedtuple node has a different number of fields and children", path)
    if cls is None:
      raise DecodeError(
          f"pytree node type {node.type!r} is not registered in this process; "
          "call jaxpr_proto.register_pytree_node(cls, name) first", path)
    if node.kind == _K.TREE_NODE_KIND_CUSTOM:
      aux = value_decoder(node.aux, f"{path}.aux")
  try:
    return PyTreeDef.from_node_data_and_children(default_registry, (cls, aux), children)
  except Exception as e:
    raise DecodeError(f"bad pytree node {cls.__name__}: {e}", path) from None


for _name, _cls in compat.internal_pytree_types().items():
  register_pytree_node(_cls, _name)


# --- namedtuples without a registered name -------------------------------------

def _is_namedtuple(cls) -> bool:
  return issubclass(cls, tuple) and hasattr(cls, "_fields")


_STRUCTURAL: dict[tuple[str, tuple[str, ...]], type] = {}
_STRUCTURAL_NAMES: dict[type, str] = {}  # made class -> the file's type name


def _structural_namedtuple(node, value_decoder, path):
  """A namedtuple class with the file's type name and field names, made here
  (never imported); the same name and fields always give the same class."""
  fields = tuple(value_decoder(k, f"{path}.keys[{i}]") for i, k in enumerate(node.keys))
  if not all(isinstance(f, str) and f.isidentifier() and not f.startswith("_")
             for f in fields) or len(set(fields)) != len(fields):
    raise DecodeError(f"bad namedtuple field names {fields!r}", path)
  key = (node.type, fields)
  cls = _STRUCTURAL.get(key)
  if cls is None:
    short = node.type.rsplit(".", 1)[-1]
    if not short.isidentifier():
      short = "NamedTuple"
    cls = collections.namedtuple(short, fields)
    cls.__module__ = __name__ + ".structural"
    cls.__qualname__ = node.type
    cls = _STRUCTURAL.setdefault(key, cls)
    _STRUCTURAL_NAMES[cls] = node.type
  return cls


# --- node types of flax, equinox and optax --------------------------------------
#
# Their pytree node classes are registered by name as soon as the library is
# imported by the user: looked up lazily, when a class or a name is missing.
# jaxpr_proto never imports these libraries itself.

# Public modules scanned, in order (the first name found for a class wins),
# and the prefix of the names they give.
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
# Sentinel objects these libraries put in pytree aux data, encoded by name.
KNOWN_LIBRARY_SINGLETONS = (
    ("equinox._module._flatten", "MISSING", "equinox::MISSING"),
)
_scanned: set[str] = set()


def _jax_node_types():
  return compat.pytree_node_registry()


def preregister_known_libraries() -> None:
  """Registers the pytree node classes of flax, equinox and optax that are
  already imported (never imports them), named e.g. "optax::ScaleByAdamState",
  "flax::core.FrozenDict", "equinox::nn.Linear"."""
  import sys
  from jaxpr_proto.codec import values
  for mod_name, attr, name in KNOWN_LIBRARY_SINGLETONS:
    mod = sys.modules.get(mod_name)
    obj = getattr(mod, attr, None) if mod is not None else None
    if obj is not None and name not in values.SINGLETONS:
      values.SINGLETONS[name] = obj
      values._SINGLETON_NAMES[id(obj)] = name
  nodes = _jax_node_types()
  for mod_name, prefix in KNOWN_LIBRARY_MODULES:
    if mod_name in _scanned:
      continue
    mod = sys.modules.get(mod_name)
    if mod is None:
      continue
    _scanned.add(mod_name)
    top = mod_name.split(".", 1)[0]
    try:
      items = sorted(vars(mod).items())
    except TypeError:
      continue
    for attr, obj in items:
      if (not isinstance(obj, type) or attr.startswith("_")
          or getattr(obj, "__module__", "").split(".", 1)[0] != top
          or obj in _PYTREE_NAMES or f"{prefix}{attr}" in PYTREE_TYPES):
        continue
      if _is_namedtuple(obj) or nodes is None or obj in nodes:
        register_pytree_node(obj, f"{prefix}{attr}")


def _known_modules_pending() -> bool:
  import sys
  return any(m not in _scanned and m in sys.modules for m, _ in KNOWN_LIBRARY_MODULES)


def _name_of(cls):
  name = _PYTREE_NAMES.get(cls)
  if name is None and _known_modules_pending():
    preregister_known_libraries()
    name = _PYTREE_NAMES.get(cls)
  return name


def _class_named(name):
  cls = PYTREE_TYPES.get(name)
  if cls is None and _known_modules_pending():
    preregister_known_libraries()
    cls = PYTREE_TYPES.get(name)
  return cls


preregister_known_libraries()
