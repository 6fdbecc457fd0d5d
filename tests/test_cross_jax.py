"""Files across JAX releases: written under an older JAX, read under this one, and back.

A second virtual environment with an older JAX (`JAXPR_PROTO_OLD_JAX`,
default 0.9.2) is built once in `.venv-jax<version>/` inside the checkout
(ignored by git) and reused. It gets jaxpr_proto itself as an editable
install, so both sides run this checkout's code. Then:

1. under the older JAX, tools/make_golden.py traces the programs of
   `PROGRAMS` from the test corpus, writes them and records their outputs;
2. under this JAX, each file must load (through the upgraders), pass the
   checker and reproduce the recorded outputs;
3. the reverse: under the older JAX, the golden files that this JAX wrote
   (tests/golden/v1.0) must load, check and reproduce their outputs, except
   where a program uses what the older JAX lacks, which must fail with a
   clear error naming it.

Set `JAXPR_PROTO_CROSS_JAX=0` to skip (the venv needs PyPI on first use).
"""
from __future__ import annotations

import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
OLD_JAX = os.environ.get("JAXPR_PROTO_OLD_JAX", "0.9.2")
VENV = ROOT / f".venv-jax{OLD_JAX.replace('.', '')}"
GOLDEN = ROOT / "tests" / "golden" / "v1.0"

sys.path.insert(0, str(ROOT / "tools"))
import make_golden  # noqa: E402

# Programs that cover what changed between JAX 0.9 and 0.10 (mul's out_dtype,
# scan's params, eig, tridiagonal_solve, remat policies, PRNG implementations,
# shard_map) and the rest of the format (control flow, custom rules, dtypes).
PROGRAMS = (
    "lax_binary_float", "cond_switch", "while_loop_newton", "fori_loop_dynamic",
    "scan_variants", "nested_control_flow", "nested_jit", "user_custom_jvp",
    "user_custom_vjp", "custom_vjp_grad_traced", "random_key_arg", "random_sampling",
    "lowbit_int_roundtrip", "float8_roundtrip", "float0_traced_grad", "named_scopes",
    "checkpoint_policies", "linalg_cpu_only", "traced_grad_of_scan", "mlp_train_step",
    "shard_map_collectives", "gather_scatter_ops", "integer_programs", "tokens_and_barrier",
)

pytestmark = pytest.mark.skipif(os.environ.get("JAXPR_PROTO_CROSS_JAX", "1") == "0",
                                reason="JAXPR_PROTO_CROSS_JAX=0")


def _python() -> pathlib.Path:
  return VENV / "bin" / "python"


def _works() -> bool:
  py = _python()
  if not py.exists():
    return False
  probe = subprocess.run(
      [str(py), "-c", f"import jax, jaxpr_proto; assert jax.__version__ == {OLD_JAX!r}, jax.__version__;"
                      "print(jaxpr_proto.__file__)"],
      capture_output=True, text=True, timeout=300, cwd=ROOT)
  return probe.returncode == 0 and str(ROOT) in probe.stdout


def _build() -> None:
  shutil.rmtree(VENV, ignore_errors=True)
  subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=600)
  pip = [str(_python()), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
  done = subprocess.run(pip + [f"jax=={OLD_JAX}", f"jaxlib=={OLD_JAX}", "protobuf>=7.35.1",
                               "numpy", "ml_dtypes"], capture_output=True, text=True, timeout=1200)
  if done.returncode != 0:
    shutil.rmtree(VENV, ignore_errors=True)
    pytest.skip(f"cannot install jax=={OLD_JAX} from PyPI: {done.stderr[-1000:]}")
  subprocess.run(pip + ["--no-deps", "-e", str(ROOT)], check=True, timeout=600,
                 capture_output=True)


@pytest.fixture(scope="session")
def old_python() -> pathlib.Path:
  """The older JAX's interpreter, built on first use (under a lock: pytest-xdist workers share it)."""
  lock = ROOT / f".venv-jax{OLD_JAX.replace('.', '')}.lock"
  with open(lock, "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      if not _works():
        _build()
        assert _works(), f"the venv at {VENV} does not import jax {OLD_JAX} and this checkout"
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)
  return _python()


def _run_old(py, *args, timeout=900) -> subprocess.CompletedProcess:
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([str(py), str(ROOT / "tools" / "make_golden.py"), *args],
                        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def _clear_failure(result: str) -> bool:
  """A failure that names what the reading JAX lacks."""
  return result.startswith("load: UnknownPrimitiveError") or result.startswith("load: VersionError")


def test_older_jax_files_load_check_and_run_here(old_python, tmp_path):
  import jax
  out = tmp_path / "old"
  done = _run_old(old_python, "--out", str(out), "--programs", ",".join(PROGRAMS), "--quiet")
  assert done.returncode == 0, done.stderr[-3000:]
  manifest = json.loads((out / "MANIFEST.json").read_text())
  assert manifest["jax_version"] == OLD_JAX
  written = set(manifest["programs"])
  # The older JAX traces and writes most of them (some use APIs it lacks).
  assert len(written) >= len(PROGRAMS) - 6, manifest["skipped"]
  results = make_golden.verify_dir(out)
  meta = results.pop("_meta")
  assert meta == {"jax_version": jax.__version__, "written_by": OLD_JAX}
  bad = {k: v for k, v in results.items() if v != "ok"}
  print(f"JAX {OLD_JAX} -> {jax.__version__}: {len(results) - len(bad)} of {len(results)} ok; "
        f"not written by {OLD_JAX}: {manifest['skipped']}")
  assert not bad, bad


def test_this_jax_files_load_check_and_run_under_older_jax(old_python, tmp_path):
  import jax
  out = tmp_path / "results.json"
  done = _run_old(old_python, "--verify", str(GOLDEN), "--programs", ",".join(PROGRAMS),
                  "--json", str(out))
  assert out.exists(), done.stderr[-3000:]
  results = json.loads(out.read_text())
  meta = results.pop("_meta")
  assert meta["jax_version"] == OLD_JAX
  ok = [k for k, v in results.items() if v == "ok"]
  clear = {k: v for k, v in results.items() if v != "ok" and _clear_failure(v)}
  bad = {k: v for k, v in results.items() if v != "ok" and not _clear_failure(v)}
  print(f"JAX {meta['written_by']} -> {OLD_JAX}: {len(ok)} of {len(results)} ok; "
        f"refused clearly: {clear}")
  assert not bad, bad
  assert len(ok) >= len(results) - 4, clear
