"""Counting the eqns of a jaxpr, those of its sub-jaxprs included."""
from __future__ import annotations

from collections import Counter


def eqn_counts(jaxpr) -> tuple[int, int, Counter]:
  """-> (top-level eqns, eqns including those of sub-jaxprs, count by primitive
  name including sub-jaxprs). Each occurrence of a sub-jaxpr is counted."""
  import jax.extend.core as jex_core
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # a ClosedJaxpr or a Jaxpr
  counts: Counter = Counter()

  def walk(j) -> int:
    n = 0
    for e in j.eqns:
      counts[e.primitive.name] += 1
      n += 1
      for sub in jex_core.jaxprs_in_params(e.params):
        n += walk(sub)
    return n

  total = walk(jaxpr)
  return len(jaxpr.eqns), total, counts
