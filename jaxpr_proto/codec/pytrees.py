"""Pytree structures (PyTreeDef) <-> TreeDef messages.

Built-in containers and None are encoded structurally. Namedtuples and custom
node types are encoded by a registered name (`names.PYTREE_NODES`,
`register_pytree_node`); decoding looks the name up there and never imports
anything.
"""
from __future__ import annotations

import collections

import jax
from jax.tree_util import PyTreeDef, default_registry, treedef_children

from jaxpr_proto.codec import names
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

_K = pb.TreeNodeKind
# Node class -> check(aux, children, path) of a decoded custom node: None, or
# why the class's own code would fail on it (registered by the codecs of
# such classes, such as codec.checkify).
AUX_CHECKS: dict[type, object] = {}
_BUILTIN = {tuple: _K.TREE_NODE_KIND_TUPLE, list: _K.TREE_NODE_KIND_LIST,
            dict: _K.TREE_NODE_KIND_DICT, type(None): _K.TREE_NODE_KIND_NONE}
_BUILTIN_INV = {v: k for k, v in _BUILTIN.items()}


def node_type(t: PyTreeDef):
  """The class of a structure's root node; None for a leaf."""
  data = t.node_data()
  return None if data is None else data[0]


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
  elif _is_namedtuple(cls) and aux is None and names.PYTREE_NODES.name(cls) is None:
    # An unregistered namedtuple: by its name and field names (structurally).
    node.kind = _K.TREE_NODE_KIND_NAMEDTUPLE
    node.type = _STRUCTURAL_NAMES.get(cls) or f"{cls.__module__}.{cls.__qualname__}"
    for i, f in enumerate(cls._fields):
      node.keys.append(value_encoder(f, f"{path}.keys[{i}]"))
  elif names.PYTREE_NODES.name(cls) is not None:
    node.type = names.PYTREE_NODES.name(cls)
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
    cls = names.PYTREE_NODES.get(node.type)
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
      check = AUX_CHECKS.get(cls)
      problem = check and check(aux, children, path)
      if problem:
        raise DecodeError(problem, path)
  try:
    return PyTreeDef.from_node_data_and_children(default_registry, (cls, aux), children)
  except Exception as e:
    raise DecodeError(f"bad pytree node {cls.__name__}: {e}", path) from None


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
