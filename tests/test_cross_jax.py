"""Files across JAX releases: written under another JAX, read under this one, and back.

The releases are those of jaxpr_proto/compat/releases.py (`RELEASES`, read
as a plain file, without importing jaxpr_proto): for each one whose minor is
not the running JAX's (`OTHER_JAX`) a virtual environment
`.venv-jax<major><minor>/` inside the checkout (ignored by git) holds that
JAX, with this checkout's jaxpr_proto as an editable install, so both sides
run this checkout's code (the README's .venv stands in for its own JAX's).
.ci/run builds the newer releases' venvs; a missing one is built here, once,
saying so on the terminal, when a working interpreter of the Python it needs
is found (`_python_needed`; a pyenv shim that cannot run it does not count),
else its tests skip, saying why. Then:

1. under the other JAX, tools/make_golden.py traces the programs of
   `PROGRAMS` from the test corpus, writes them and records their outputs;
   under this JAX, each file must load (through the upgraders), pass the
   checker and reproduce the recorded outputs, or be refused with a clear
   error naming what this JAX lacks;
2. the reverse: under the other JAX, the golden files that this JAX's format
   version wrote (tests/golden/) must load, check and reproduce their
   outputs, or be refused clearly.

`JAXPR_PROTO_CROSS_JAX=0` skips all; `JAXPR_PROTO_CROSS_JAX=<release>,...`
(releases as in `RELEASES`) pairs this JAX with those only.
"""
from __future__ import annotations

import fcntl
import functools
import glob
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import jax
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"

sys.path.insert(0, str(ROOT / "tools"))
import make_golden  # noqa: E402


def _read_releases() -> dict[str, str]:
  """compat/releases.py's RELEASES (JAX minor -> the release tests install),
  loaded as a plain file: it imports nothing."""
  spec = importlib.util.spec_from_file_location(
      "_jaxpr_proto_releases", ROOT / "jaxpr_proto" / "compat" / "releases.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return dict(module.RELEASES)


def _minor(v: str) -> tuple[int, int]:
  a, b = v.split(".")[:2]
  return int(a), int(b)


RELEASES = _read_releases()
_CHOSEN = os.environ.get("JAXPR_PROTO_CROSS_JAX", "1")
OTHER_JAX = [v for v in RELEASES.values()
             if _minor(v) != _minor(jax.__version__)
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

pytestmark = [
    pytest.mark.skipif(_CHOSEN == "0", reason="JAXPR_PROTO_CROSS_JAX=0"),
    # The first test of each release may build its venv (pip downloads jaxlib)
    # or wait for the other xdist worker building it.
    pytest.mark.timeout(1800),
]


def _python_needed(version: str) -> tuple[int, int]:
  """The Python minor a release's venv is built on: 3.12 for jax and jaxlib
  0.11 and later (their Requires-Python is >= 3.12), else 3.11 (they require
  >= 3.11; python3 here, and the README's .venv)."""
  return (3, 12) if _minor(version) >= (0, 11) else (3, 11)


def _own_venv(version: str) -> pathlib.Path:
  return ROOT / (".venv-jax" + "".join(version.split(".")[:2]))


def _dependencies() -> list[str]:
  """pyproject's dependencies other than JAX's own (pinned per release here)."""
  deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
  return [d for d in deps if _dist_name(d) not in ("jax", "jaxlib")]


def _dist_name(requirement: str) -> str:
  return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]


def _probe(venv: pathlib.Path, version: str) -> bool:
  """`venv` imports JAX `version` and this checkout's jaxpr_proto, and has
  every dependency of pyproject's (a venv built before one was added lacks it)."""
  py = venv / "bin" / "python"
  if not py.exists():
    return False
  names = [_dist_name(d) for d in _dependencies()]
  try:
    probe = subprocess.run(
        [str(py), "-c", f"import jax, jaxpr_proto; assert jax.__version__ == {version!r}, jax.__version__;"
                        f"import importlib.metadata as m; [m.version(n) for n in {names!r}];"
                        "print(jaxpr_proto.__file__)"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
  except (OSError, subprocess.SubprocessError):
    return False
  return probe.returncode == 0 and str(ROOT) in probe.stdout


def _venv(version: str) -> pathlib.Path:
  """The venv of `version`: its own, or the README's .venv when that holds
  this release and there is no own one. .venv is never rebuilt here."""
  own = _own_venv(version)
  if not own.exists() and _probe(ROOT / ".venv", version):
    return ROOT / ".venv"
  return own


def _runs(candidate: str, want: tuple[int, int]) -> bool:
  """`candidate` is an interpreter of Python `want` with venv (a pyenv shim
  of a version pyenv has not selected exits with an error, and does not count)."""
  try:
    done = subprocess.run(
        [candidate, "-c", f"import sys, venv; assert sys.version_info[:2] == {want!r}"],
        capture_output=True, timeout=120)
  except (OSError, subprocess.SubprocessError):
    return False
  return done.returncode == 0


def _pyenv_pythons(want: tuple[int, int]) -> list[str]:
  name = f"python{want[0]}.{want[1]}"
  found = set()
  for home in dict.fromkeys([os.path.expanduser("~"), "/root"]):
    found.update(glob.glob(os.path.join(home, ".pyenv", "versions", f"{want[0]}.{want[1]}.*", "bin", name)))

  def patch(path):  # newest first: .../3.12.10/... before .../3.12.9/...
    tail = pathlib.Path(path).parent.parent.name.split(".")[2]
    return int(tail) if tail.isdigit() else -1
  return sorted(found, key=patch, reverse=True)


@functools.lru_cache(maxsize=None)
def _base_python(want: tuple[int, int]) -> str | None:
  """A working interpreter of Python `want`: this one, pythonX.Y or python3 on
  PATH, or one that pyenv installed."""
  candidates = [sys.executable] if sys.version_info[:2] == want else []
  for name in (f"python{want[0]}.{want[1]}", "python3"):
    if (found := shutil.which(name)):
      candidates.append(found)
  candidates += _pyenv_pythons(want)
  return next((c for c in dict.fromkeys(candidates) if _runs(c, want)), None)


def _announce(config, line: str) -> None:
  """A line on the terminal, past pytest's output capture (xdist workers too)."""
  capman = config.pluginmanager.getplugin("capturemanager")
  with capman.global_and_fixture_disabled():
    sys.stderr.write(f"\njaxpr-proto tests: {line}\n")
    sys.stderr.flush()


def _build(version: str, venv: pathlib.Path, config) -> None:
  want = _python_needed(version)
  py_name = f"Python {want[0]}.{want[1]}"
  base = _base_python(want)
  if base is None:
    pytest.skip(f"JAX {version} needs {py_name}, and no working python{want[0]}.{want[1]} was "
                f"found (on PATH, or in ~/.pyenv/versions/{want[0]}.{want[1]}.*/bin/); "
                f"install {py_name} to run the cross-release tests with JAX {version}")
  _announce(config, f"building a venv with JAX {version} ({venv.name}, {py_name}) "
                    "for the cross-release tests (once, ~1 min)")
  shutil.rmtree(venv, ignore_errors=True)
  made = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=600)
  if made.returncode != 0:
    shutil.rmtree(venv, ignore_errors=True)
    pytest.skip(f"cannot create a venv with {base} ({py_name}) for JAX {version}: "
                f"{(made.stderr or made.stdout)[-1000:]}")
  pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
  done = subprocess.run(pip + [f"jax=={version}", f"jaxlib=={version}", *_dependencies()],
                        capture_output=True, text=True, timeout=1200)
  if done.returncode != 0:
    shutil.rmtree(venv, ignore_errors=True)
    pytest.skip(f"cannot install jax=={version} from PyPI (no network?): {done.stderr[-1000:]}")
  subprocess.run(pip + ["--no-deps", "-e", str(ROOT)], check=True, timeout=600,
                 capture_output=True)


@pytest.fixture(scope="session", params=OTHER_JAX)
def other(request) -> tuple[str, pathlib.Path]:
  """(version, interpreter) of another JAX, built on first use (under a lock:
  pytest-xdist workers share it)."""
  version = request.param
  lock = ROOT / f"{_own_venv(version).name}.lock"
  with open(lock, "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      venv = _venv(version)
      if not _probe(venv, version):
        _build(version, venv, request.config)
        assert _probe(venv, version), f"the venv at {venv} does not import jax {version} and this checkout"
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)
  return version, venv / "bin" / "python"


def _run_other(py, *args, timeout=900) -> subprocess.CompletedProcess:
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([str(py), str(ROOT / "tools" / "make_golden.py"), *args],
                        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def _clear_failure(result: str) -> bool:
  """A failure that names what the reading JAX lacks."""
  return result.startswith(("load: PrimitiveVersionError", "load: VersionError"))


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
