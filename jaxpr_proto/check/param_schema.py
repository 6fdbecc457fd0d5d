"""Per-primitive param schemas: which params each primitive takes, and of
which types, like the op schemas `onnx.checker` enforces.

A schema is generated per JAX minor by tools/param_names.py (compat/v0_<minor>/
params.py, PARAM_SCHEMAS) from JAX's own harnesses, its public options
enumerated (each tree widened to the whole family of options it holds: every
Sharding, every precision form, every accuracy) and the test corpus: for
each primitive, each param's *type tree*. A type tree maps the kind of a
value (`kind`) to what is inside it: the element tree of a tuple, the field
trees of a record, nothing for a leaf:

    {"None": None, "tuple": {"int": None}}      # None or a tuple of ints
    {"rec:GatherDimensionNumbers": {"offset_dims": {"tuple": {"int": None}}, ...}}
    {"absent": None, "tuple": {"str": None}}   # left out, or a tuple of strs

A decoded eqn must have exactly the params of its primitive's schema, each a
value the tree admits (`errors`). A JAX primitive that none of those sources
binds (a GPU kernel's, a sparse format's) is checked by its params' names:
a param that other primitives have too admits what it admits in any of them
(JAX names a param by its meaning: `axis_name`, `jaxpr`, `sharding`), and
one of a name no primitive recorded admits any value the codec reads; JAX's
own type rule then checks the names and types it takes. The relations
between params that a type cannot say (counts against sub-jaxprs, axes
against ranks) are in `param_rules`.
"""
from __future__ import annotations

import enum

import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.compat import param_tables

# Sequences whose elements are checked against one element tree.
_SEQUENCES = {tuple: "tuple", list: "list", frozenset: "frozenset"}
_SCALARS = {type(None): "None", bool: "bool", int: "int", float: "float", str: "str",
            complex: "complex", bytes: "bytes"}


# The kind of a param that some eqns of its primitive leave out.
ABSENT = param_tables.ABSENT


def kind(v) -> str:
  """The kind of a param value: a scalar's or sequence's type name, `dtype`,
  `type` (a NumPy scalar type), `enum:`/`rec:` and a class name, `prim:` and
  a primitive's name, `ClosedJaxpr` or `Jaxpr`, else `obj:` and the class
  name (`obj:NamedSharding@AbstractMesh` for one over an abstract mesh)."""
  t = type(v)
  k = _SCALARS.get(t) or _SEQUENCES.get(t)
  if k:
    return k
  if isinstance(v, np.dtype):
    return "dtype"
  if isinstance(v, type):
    return "type"
  if isinstance(v, enum.Enum):
    return f"enum:{t.__qualname__}"
  if isinstance(v, compat.Primitive):  # select_prim: ge or le, never another primitive
    return f"prim:{v.name}"
  if isinstance(v, compat.ClosedJaxpr):
    return "ClosedJaxpr"
  if isinstance(v, compat.Jaxpr):
    return "Jaxpr"
  if _record_fields(v) is not None:
    return f"rec:{t.__qualname__}"
  if t is compat.NamedSharding and isinstance(v.mesh, compat.AbstractMesh):
    # a type's sharding (under an explicit mesh), never a placement: jit and
    # sharding_constraint fail to lower one
    return "obj:NamedSharding@AbstractMesh"
  return f"obj:{t.__qualname__}"


def _record_fields(v):
  """The fields of a NamedTuple (by name), or None."""
  fields = getattr(type(v), "_fields", None)
  if isinstance(v, tuple) and isinstance(fields, tuple):
    return dict(zip(fields, v))
  return None


def observe(tree: dict, v) -> None:
  """Widens `tree` to admit `v` (for the generator)."""
  k = kind(v)
  if k in ("tuple", "list", "frozenset"):
    sub = tree.setdefault(k, {})
    for x in v:
      observe(sub, x)
  elif k.startswith("rec:"):
    sub = tree.setdefault(k, {})
    for f, x in _record_fields(v).items():
      observe(sub.setdefault(f, {}), x)
  else:
    tree.setdefault(k, None)


# An element tree seen only empty: the elements of the tuples JAX leaves
# empty in the corpus (dims, axes) are ints.
_UNSEEN_ELEMENTS = {"int": None}


def _describe(tree: dict) -> str:
  def one(k, sub):
    if k in ("tuple", "list", "frozenset"):
      return f"{k}[{_describe(sub or _UNSEEN_ELEMENTS)}]"
    return k.split(":", 1)[-1]
  return " | ".join(one(k, s) for k, s in tree.items() if k != ABSENT)


def mismatch(tree: dict, v, depth: int = 0) -> str | None:
  """Why `v` is not a value of `tree`, or None when it is."""
  k = kind(v)
  if k not in tree:
    return f"a {k.split(':', 1)[-1]} where it takes {_describe(tree)}"
  sub = tree[k]
  if k in ("tuple", "list", "frozenset"):
    sub = sub or _UNSEEN_ELEMENTS
    for i, x in enumerate(v):
      why = mismatch(sub, x, depth + 1)
      if why:
        return f"element {i}: {why}"
  elif k.startswith("rec:"):
    for f, x in _record_fields(v).items():
      if f in sub:
        why = mismatch(sub[f], x, depth + 1)
        if why:
          return f"field {f}: {why}"
  return None


def schema(prim_name: str, version=None) -> dict | None:
  """{param: type tree} of a primitive under a JAX minor (this one by
  default), or None for a primitive that no source of the tables binds."""
  return (_SCHEMAS if version is None else param_tables.param_schemas(version)).get(prim_name)


_SCHEMAS = param_tables.param_schemas(compat.JAX_VERSION)  # read on import, not in a load
_BY_NAME: dict[str, dict] | None = None  # param name -> the union of its trees


def merge(tree: dict, other: dict) -> None:
  """Widens `tree` to admit what `other` admits (copying, never sharing)."""
  for k, sub in other.items():
    if sub is None:
      tree.setdefault(k, None)
    else:
      merge(tree.setdefault(k, {}), sub)


def tree_by_name(param: str) -> dict | None:
  """The tree of every value `param` holds in any recorded primitive (absent
  aside), or None for a name none has."""
  global _BY_NAME
  if _BY_NAME is None:
    out: dict[str, dict] = {}
    for s in _SCHEMAS.values():
      for name, tree in s.items():
        merge(out.setdefault(name, {}), {k: v for k, v in tree.items() if k != ABSENT})
    _BY_NAME = out
  return _BY_NAME.get(param)


def has_schemas() -> bool:
  """Whether this JAX minor has recorded schemas (JAX 0.9, kept for reading
  and writing files across releases, has none)."""
  return bool(_SCHEMAS)


def errors(prim_name: str, params: dict, by_name: bool = True):
  """(param name or None, message) for each way `params` differs from the
  primitive's schema: a param missing, one it does not take, a value of
  another type. A primitive without a schema is checked by its params' names
  where `by_name` (JAX's own primitives; a user's is the reader's to trust)."""
  s = schema(prim_name)
  if s is None:
    if by_name and has_schemas():
      yield from _errors_by_name(prim_name, params)
    return
  for name in sorted(set(s) - set(params)):
    if ABSENT in s[name]:
      continue
    yield None, f"primitive {prim_name} lacks the param {name!r}"
  for name, v in params.items():
    tree = s.get(name)
    if tree is None:
      yield name, f"primitive {prim_name} does not take a param {name!r}"
      continue
    why = mismatch(tree, v)
    if why:
      yield name, f"{prim_name}'s {name} is {why}"


def _errors_by_name(prim_name: str, params: dict):
  """The errors of a primitive without a schema: each param against what its
  name holds in the recorded primitives."""
  for name, v in params.items():
    tree = tree_by_name(name)
    if tree is None:
      continue
    why = mismatch(tree, v)
    if why:
      yield name, f"{prim_name}'s {name} is {why} (as {name} is in the primitives that have it)"
