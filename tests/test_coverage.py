"""Every primitive JAX exports (jax.extend.core.primitives) is either
exercised by the round-trip corpus or listed, with a reason, in SKIP."""
import os
import time

import jax.extend.core.primitives as jex_prims
import pytest
from jax.extend.core import Primitive

from jaxpr_proto.codec.names import REGISTRY

if not os.path.exists(os.path.join(os.path.dirname(__file__), "primitive_coverage.py")):
  # Skipped (not a collection error, which would stop the whole suite) until
  # tests/primitive_coverage.py exists; when it exists, it is imported for real.
  pytest.skip("tests/primitive_coverage.py is missing", allow_module_level=True)

from tests import primitive_coverage as cov  # noqa: E402

_CACHE = {}


def _names(xs):
  """Primitive names from names, Primitive objects or (namespace, name) keys."""
  out = set()
  for x in xs:
    if isinstance(x, Primitive):
      out.add(x.name)
    elif isinstance(x, tuple) and len(x) == 2 and all(isinstance(s, str) for s in x):
      out.add(x[1])
    elif isinstance(x, str):
      out.add(x.split("::", 1)[-1])
    else:
      raise TypeError(f"unexpected entry {x!r} in exercised_primitives()")
  return out


@pytest.fixture(scope="session")
def exercised():
  # Tracing the whole corpus is the slow part: done once per session.
  if "names" not in _CACHE:
    t0 = time.perf_counter()
    _CACHE["names"] = _names(cov.exercised_primitives())
    _CACHE["seconds"] = time.perf_counter() - t0
  return _CACHE["names"]


def _skip_table():
  skip = cov.SKIP
  if isinstance(skip, dict):
    return {(_names([k]).pop()): v for k, v in skip.items()}
  raise TypeError(f"SKIP should map primitive names to reasons, got {type(skip).__name__}")


def _exported():
  return {v.name: v for v in vars(jex_prims).values() if isinstance(v, Primitive)}


def test_every_primitive_is_exercised_or_skipped(exercised):
  skip = _skip_table()
  report, missing = [], []
  for name in sorted(_exported()):
    if name in exercised:
      report.append(f"{name:32s} exercised")
    elif name in skip:
      report.append(f"{name:32s} skipped: {skip[name]}")
    else:
      report.append(f"{name:32s} MISSING")
      missing.append(name)
  print("\n".join(report))
  print(f"{len(exercised)} primitives exercised by the corpus "
        f"(in {_CACHE.get('seconds', 0):.1f} s), {len(skip)} on SKIP")
  assert not missing, f"neither exercised by the corpus nor on SKIP: {missing}"


def test_skip_entries_are_real_and_explained(exercised):
  skip = _skip_table()
  real = set(_exported()) | {n for _, n in REGISTRY.all()}
  for name, reason in skip.items():
    assert isinstance(reason, str) and reason.strip(), f"SKIP[{name!r}] has no reason"
    assert name in real, f"SKIP names {name!r}, which is not a primitive"


def test_skipped_primitives_are_not_exercised(exercised):
  # A skipped primitive that the corpus does exercise should come off SKIP.
  both = sorted(set(_skip_table()) & exercised)
  assert not both, f"on SKIP but exercised by the corpus: {both}"


def test_exercised_are_real_primitives(exercised):
  real = set(_exported()) | {n for _, n in REGISTRY.all()}
  assert exercised, "the corpus exercises no primitive?"
  unknown = sorted(exercised - real)
  assert not unknown, f"exercised_primitives() names unknown primitives: {unknown}"
