import os

# Compiles dominate the suite's time; XLA's optimizations don't change what the
# tests compare (the original and decoded programs run under the same flags).
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

import pytest

# Test modules whose subject does not depend on the JAX release (the schema,
# readers in other languages, atomic saves) or is the test corpus itself:
# .ci/run runs them under the main JAX only (`-m "not main_jax_only"` for the
# other releases), to keep CI within its time.
MAIN_JAX_ONLY = {"test_schema", "test_cross_language", "test_atomic_save", "test_corpus_sanity"}


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "main_jax_only: checks that do not depend on the JAX release; "
                 "CI runs them under the main JAX only")


def pytest_collection_modifyitems(config, items):
  for item in items:
    if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in MAIN_JAX_ONLY:
      item.add_marker(pytest.mark.main_jax_only)


@pytest.fixture
def runs(monkeypatch):
  """How many times the checker's stages ran (checker.run), from a fresh
  start: the process's memos of checking cleared before and after."""
  import importlib

  import jaxpr_proto as jp
  checker = importlib.import_module("jaxpr_proto.check.checker")  # (jp.check shadows the package)
  jp.clear_caches()
  count = [0]
  run = checker.run

  def counted(*a, **k):
    count[0] += 1
    return run(*a, **k)
  monkeypatch.setattr(checker, "run", counted)
  yield count
  jp.clear_caches()
