"""Pytree structures (PyTreeDef) <-> TreeDef messages.

Built-in containers and None are encoded structurally. Namedtuples and custom
node types are encoded by a registered name (`register_pytree_node`); decoding
looks the name up here and never imports anything.
"""
from __future__ import annotations

import collections

import jax
from jax.tree_util import PyTreeDef, default_registry, treedef_children

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
  elif cls in _PYTREE_NAMES or issubclass(cls, tuple) and hasattr(cls, "_fields"):
    name = _PYTREE_NAMES.get(cls)
    if name is None:
      raise EncodeError(
          f"pytree node type {cls.__module__}.{cls.__qualname__} is not "
          "registered; call jaxpr_proto.register_pytree_node(cls, name)", path)
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
    cls = PYTREE_TYPES.get(node.type)
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


def _register_builtin_namedtuples():
  # Namedtuples that JAX itself uses in pytrees.
  try:
    from jax._src.lax.control_flow.solves import _LinearSolveTuple
    register_pytree_node(_LinearSolveTuple, "jax::_LinearSolveTuple")
  except ImportError:  # pragma: no cover
    pass


_register_builtin_namedtuples()
