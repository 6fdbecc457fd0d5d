"""Symbolic dims: their sizes, and the constraints of their scope."""
from __future__ import annotations

from jax._src import core


def evaluate_dim(d, env: dict) -> int:
  """The size of symbolic dim `d` where its dim vars have the sizes `env`."""
  return int(d._evaluate(env))


def is_symbolic_dim(d) -> bool:
  return core.is_symbolic_dim(d)


def symbolic_constraints(scope) -> list[str]:
  return [c.debug_str for c in scope._explicit_constraints]
