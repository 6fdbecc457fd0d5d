"""The warm-up that runs as jaxpr_proto is imported (jaxpr_proto/warmup.py):
it loads its program under this JAX, starts no backend, keeps no verdict and
writes nothing to the verdict cache folder."""
import os
import subprocess
import sys

import jax
import numpy as np

import jaxpr_proto as jp
from jaxpr_proto import warmup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_warmup  # noqa: E402


def _python(code, **env):
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                     env={**os.environ, "PYTHONPATH": ROOT, **env}, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  return r.stdout.strip()


def test_the_warmup_program_loads_with_every_check_and_runs():
  with open(warmup.PATH, "rb") as f:
    cj = jp.loads(f.read())
  step, args = make_warmup.function()
  want = step(*args)
  got = jax.core.eval_jaxpr(cj.jaxpr, cj.consts, *jax.tree.leaves(args))
  assert len(jax.tree.leaves(want)) == len(got) == 4
  for a, b in zip(jax.tree.leaves(want), got):
    np.testing.assert_array_equal(a, b)


def test_import_warms_without_a_backend_or_a_verdict(tmp_path):
  # JAX_PLATFORMS=bogus: starting any backend raises, so a warm-up that
  # made a device array would leave `warmed` False.
  out = _python("import jaxpr_proto, jaxpr_proto.warmup as w\n"
                "from jaxpr_proto.compat import memo\n"
                "print(w.warmed, sum(map(len, memo._MEMOS)), jaxpr_proto.config.verdict_cache_dir)",
                JAX_PLATFORMS="bogus", JAXPR_PROTO_VERDICT_CACHE_DIR=str(tmp_path / "v"))
  assert out == f"True 0 {tmp_path / 'v'}"
  assert not (tmp_path / "v").exists() or not any((tmp_path / "v").iterdir())


def test_a_warmup_that_cannot_run_leaves_the_import_whole(monkeypatch, tmp_path):
  monkeypatch.setattr(warmup, "PATH", str(tmp_path / "missing.jaxpb"))
  assert warmup.warm() is False
  monkeypatch.undo()
  assert warmup.warm() is True


def test_the_warmup_program_is_package_data():
  import tomllib
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["jaxpr_proto"]
  assert os.path.basename(warmup.PATH) in data


def test_import_leaves_no_thread_of_its_own():
  out = _python("import os, time, jax\n"
                "before = len(os.listdir('/proc/self/task'))\n"
                "import jaxpr_proto\n"
                "for _ in range(200):  # (the worker ends as soon as it runs again)\n"
                "  if len(os.listdir('/proc/self/task')) == before: break\n"
                "  time.sleep(0.01)\n"
                "print(len(os.listdir('/proc/self/task')) - before)")
  assert out == "0"
