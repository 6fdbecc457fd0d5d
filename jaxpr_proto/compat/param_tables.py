"""Generated tables of each JAX minor's primitives, one module per minor
(compat/v0_<minor>/params.py, written by tools/param_names.py under that JAX)."""
from __future__ import annotations

import functools
import importlib

from jaxpr_proto.compat.releases import folder

# The kind in a param's type tree of a param some eqns of the primitive
# leave out (see check.param_schema).
ABSENT = "absent"


@functools.cache
def _table(minor: tuple[int, int]):
  try:
    return importlib.import_module(f"jaxpr_proto.compat.{folder(minor)}.params")
  except ModuleNotFoundError:
    return None


def param_names(version) -> dict[str, frozenset]:
  """{primitive: param names} of a JAX minor, or {} for a minor without a table."""
  t = _table(tuple(version[:2]))
  return {k: frozenset(v) for k, v in getattr(t, "PARAM_NAMES", {}).items()}


def open_jaxpr_params(version) -> dict[str, frozenset]:
  """{primitive: params that hold an open Jaxpr} of a JAX minor before 0.11."""
  t = _table(tuple(version[:2]))
  return {k: frozenset(v) for k, v in getattr(t, "OPEN_JAXPR_PARAMS", {}).items()}


def param_schemas(version) -> dict[str, dict]:
  """{primitive: {param: type tree}} of a JAX minor (see check.param_schema),
  or {} for a minor without a table."""
  return getattr(_table(tuple(version[:2])), "PARAM_SCHEMAS", {})


def unbound_primitives(version) -> frozenset:
  """The primitives a JAX minor defines that no source of its table binds
  (their params are checked by name), or {} for a minor without a table."""
  return frozenset(getattr(_table(tuple(version[:2])), "UNBOUND_PRIMITIVES", ()))


def required_params(version, name: str) -> frozenset:
  """The params of primitive `name` that no eqn may lack under a JAX minor
  (those its schema does not mark ABSENT)."""
  schema = param_schemas(version).get(name) or {}
  return frozenset(k for k, tree in schema.items() if ABSENT not in tree)
