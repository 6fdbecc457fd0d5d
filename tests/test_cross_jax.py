"""Files across JAX releases: written under another JAX, read under this one, and back.

For each other JAX release (`OTHER_JAX`: 0.9.2, 0.10.2, 0.11.2 and
0.12.0.1, less the running one) a virtual environment `.venv-jax<major><minor>/`
inside the checkout (ignored by git) holds that JAX, with this checkout's
jaxpr_proto as an editable install, so both sides run this checkout's code.
.ci/run builds them; a missing one is built here when its Python is found
(JAX 0.11 and later need Python >= 3.12), else its tests skip. Then:

1. under the other JAX, tools/make_golden.py traces the programs of
   `PROGRAMS` from the test corpus, writes them and records their outputs;
   under this JAX, each file must load (through the upgraders), pass the
   checker and reproduce the recorded outputs, or be refused with a clear
   error naming what this JAX lacks;
2. the reverse: under the other JAX, the golden files that this JAX's format
   version wrote (tests/golden/) must load, check and reproduce their
   outputs, or be refused clearly.

`JAXPR_PROTO_CROSS_JAX=0` skips all; `JAXPR_PROTO_CROSS_JAX=0.11.2,0.12.0.1`
pairs this JAX with those only.
"""
from __future__ import annotations

import fcntl
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"

sys.path.insert(0, str(ROOT / "tools"))
import make_golden  # noqa: E402

# The releases files move between, with the Python each needs.
RELEASES = {"0.9.2": (3, 11), "0.10.2": (3, 11), "0.11.2": (3, 12), "0.12.0.1": (3, 12)}
_CHOSEN = os.environ.get("JAXPR_PROTO_CROSS_JAX", "1")
OTHER_JAX = [v for v in RELEASES
             if v.split(".")[:2] != jax.__version__.split(".")[:2]
             and (_CHOSEN in ("1", "") or v in _CHOSEN.split(","))]

# Programs that cover what changed between the releases (mul's out_dtype,
# scan's params and FlatTrees, eig, tridiagonal_solve, remat policies, PRNG
# implementations, shard_map, closed and open jaxprs, eqn contexts) and the
# rest of the format (control flow, custom rules, dtypes).
PROGRAMS = (
    "lax_binary_float", "cond_switch", "while_loop_newton", "fori_loop_dynamic",
    "scan_variants", "nested_control_flow", "nested_jit", "user_custom_jvp",
    "user_custom_vjp", "custom_vjp_grad_traced", "random_key_arg", "random_sampling",
    "lowbit_int_roundtrip", "float8_roundtrip", "float0_traced_grad", "named_scopes",
    "checkpoint_policies", "linalg_cpu_only", "traced_grad_of_scan", "mlp_train_step",
    "shard_map_collectives", "gather_scatter_ops", "integer_programs", "tokens_and_barrier",
    "lstm_scan", "sorting_ops", "lax_reductions", "transformer_block_grad", "checkpoint_scan_grad",
)

pytestmark = pytest.mark.skipif(_CHOSEN == "0", reason="JAXPR_PROTO_CROSS_JAX=0")


def _venv(version: str) -> pathlib.Path:
  own = ROOT / (".venv-jax" + "".join(version.split(".")[:2]))
  # The README's .venv holds JAX 0.10 on Python 3.11: reused when it is that.
  if not own.exists() and version == "0.10.2" and (ROOT / ".venv").exists():
    return ROOT / ".venv"
  return own


def _python(version: str) -> pathlib.Path:
  return _venv(version) / "bin" / "python"


def _base_python(version: str) -> str | None:
  """An interpreter of the Python minor that `version` needs."""
  want = RELEASES[version]
  if sys.version_info[:2] == want:
    return sys.executable
  name = f"python{want[0]}.{want[1]}"
  found = shutil.which(name)
  if found:
    return found
  pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{want[0]}.{want[1]}.*/bin/python")))
  return pyenv[-1] if pyenv else None


def _works(version: str) -> bool:
  py = _python(version)
  if not py.exists():
    return False
  probe = subprocess.run(
      [str(py), "-c", f"import jax, jaxpr_proto; assert jax.__version__ == {version!r}, jax.__version__;"
                      "print(jaxpr_proto.__file__)"],
      capture_output=True, text=True, timeout=300, cwd=ROOT)
  return probe.returncode == 0 and str(ROOT) in probe.stdout


def _build(version: str) -> None:
  base = _base_python(version)
  if base is None:
    pytest.skip(f"JAX {version} needs Python {'.'.join(map(str, RELEASES[version]))}, not found")
  venv = _venv(version)
  shutil.rmtree(venv, ignore_errors=True)
  subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=600)
  pip = [str(_python(version)), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
  done = subprocess.run(pip + [f"jax=={version}", f"jaxlib=={version}", "protobuf>=7.35.1",
                               "numpy", "ml_dtypes"], capture_output=True, text=True, timeout=1200)
  if done.returncode != 0:
    shutil.rmtree(venv, ignore_errors=True)
    pytest.skip(f"cannot install jax=={version} from PyPI: {done.stderr[-1000:]}")
  subprocess.run(pip + ["--no-deps", "-e", str(ROOT)], check=True, timeout=600,
                 capture_output=True)


@pytest.fixture(scope="session", params=OTHER_JAX)
def other(request) -> tuple[str, pathlib.Path]:
  """(version, interpreter) of another JAX, built on first use (under a lock:
  pytest-xdist workers share it)."""
  version = request.param
  lock = ROOT / f"{_venv(version).name}.lock"
  with open(lock, "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      if not _works(version):
        _build(version)
        assert _works(version), f"the venv at {_venv(version)} does not import jax {version} and this checkout"
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)
  return version, _python(version)


def _run_other(py, *args, timeout=900) -> subprocess.CompletedProcess:
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([str(py), str(ROOT / "tools" / "make_golden.py"), *args],
                        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def _clear_failure(result: str) -> bool:
  """A failure that names what the reading JAX lacks."""
  return result.startswith(("load: PrimitiveVersionError", "load: VersionError"))


def _minor(v: str) -> tuple[int, int]:
  a, b = v.split(".")[:2]
  return int(a), int(b)


def test_other_jax_files_load_check_and_run_here(other, tmp_path):
  version, py = other
  out = tmp_path / "other"
  done = _run_other(py, "--out", str(out), "--programs", ",".join(PROGRAMS), "--quiet")
  assert done.returncode == 0, done.stderr[-3000:]
  manifest = json.loads((out / "MANIFEST.json").read_text())
  assert manifest["jax_version"] == version
  written = set(manifest["programs"])
  # The other JAX traces and writes most of them (some use APIs it lacks).
  assert len(written) >= len(PROGRAMS) - 6, manifest["skipped"]
  # Named remat policies are closures in JAX 0.9 and 0.12, records in 0.10/0.11:
  # every release writes them (as the records).
  assert "checkpoint_policies" in written, manifest["skipped"]
  results = make_golden.verify_dir(out)
  meta = results.pop("_meta")
  assert meta == {"jax_version": jax.__version__, "written_by": version}
  ok = [k for k, v in results.items() if v == "ok"]
  clear = {k: v for k, v in results.items() if v != "ok" and _clear_failure(v)}
  bad = {k: v for k, v in results.items() if v != "ok" and not _clear_failure(v)}
  print(f"JAX {version} -> {jax.__version__}: {len(ok)} of {len(results)} ok; "
        f"refused clearly: {clear}; not written by {version}: {manifest['skipped']}")
  assert not bad, bad
  if _minor(version) < _minor(jax.__version__):
    assert not clear, clear  # an older JAX's files always load
  else:
    # a newer JAX's files: most load; the rest use what this JAX lacks
    assert len(ok) >= 0.75 * len(results), clear


def test_this_jax_files_load_check_and_run_under_other_jax(other, tmp_path):
  """The golden files of this JAX's own release line (the newest golden
  directory written by this JAX minor, else by the newest JAX)."""
  version, py = other
  d = _golden_dir_for_reverse()
  out = tmp_path / "results.json"
  done = _run_other(py, "--verify", str(d), "--programs", ",".join(PROGRAMS),
                    "--json", str(out))
  assert out.exists(), done.stderr[-3000:]
  results = json.loads(out.read_text())
  meta = results.pop("_meta")
  assert meta["jax_version"] == version
  ok = [k for k, v in results.items() if v == "ok"]
  clear = {k: v for k, v in results.items() if v != "ok" and _clear_failure(v)}
  bad = {k: v for k, v in results.items() if v != "ok" and not _clear_failure(v)}
  print(f"JAX {meta['written_by']} -> {version}: {len(ok)} of {len(results)} ok; "
        f"refused clearly: {clear}")
  assert not bad, bad
  if _minor(meta["written_by"]) < _minor(version):
    assert not clear, clear
  else:
    # a newer JAX's files: most load; the rest use what this JAX lacks
    assert len(ok) >= 0.75 * len(results), clear


def _golden_dir_for_reverse() -> pathlib.Path:
  dirs = sorted(d for d in GOLDEN.glob("v*.*") if (d / "MANIFEST.json").is_file())
  mine = [d for d in dirs if _minor(json.loads((d / "MANIFEST.json").read_text())["jax_version"])
          == _minor(jax.__version__)]
  return (mine or dirs)[-1]


def test_programs_exist():
  from tests import corpus
  names = {p.name for p in corpus.PROGRAMS}
  assert set(PROGRAMS) <= names, set(PROGRAMS) - names
