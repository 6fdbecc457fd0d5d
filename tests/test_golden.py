"""Golden files: the corpus as written by every released format version.

`tests/golden/v<major>.<minor>/` holds the .jaxpb files of the test corpus
that that version wrote (tools/make_golden.py), with the inputs and the
outputs they gave (`<name>.npz`) and a MANIFEST.json. Every file must still
load, pass the checker, and reproduce its outputs. A released version's
directory is frozen: never regenerated, only added to.

Running every program compiles it, which takes minutes; CI runs the
programs in `RUN_IN_CI` (chosen to cover control flow, custom derivatives,
PRNG keys, low-precision types, effects and state) and
`JAXPR_PROTO_GOLDEN_RUN=all` runs them all. Loading and checking always
covers every file.

`tests/golden/future/` holds files of versions after this one: a reader
must refuse them, or accept them, with the clear behavior docs/compatibility.md
("The promise") promises.
"""
from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

import jaxpr_proto as jp
from jaxpr_proto import compat
from jaxpr_proto.wire import versions

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN.parent.parent / "tools"))
import make_golden  # noqa: E402

RUN_IN_CI = (
    "cond_switch", "while_loop_newton", "scan_variants", "nested_jit",
    "user_custom_jvp", "user_custom_vjp", "random_key_arg", "lowbit_int_roundtrip",
    "float8_roundtrip", "float0_traced_grad", "named_scopes", "tokens_and_barrier",
    "checkpoint_policies", "lax_gather_scatter_direct", "integer_programs",
    "library_custom_derivs",
)
RUN_ALL = os.environ.get("JAXPR_PROTO_GOLDEN_RUN", "") == "all"


def _version_dirs():
  return sorted(d for d in GOLDEN.glob("v*.*") if (d / "MANIFEST.json").is_file())


def _entries():
  out = []
  for d in _version_dirs():
    manifest = json.loads((d / "MANIFEST.json").read_text())
    for name in sorted(manifest["programs"]):
      out.append(pytest.param(d, name, manifest["programs"][name], id=f"{d.name}-{name}"))
  return out


def test_every_released_version_has_golden_files():
  dirs = [d.name for d in _version_dirs()]
  assert f"v{versions.FORMAT_MAJOR}.{versions.FORMAT_MINOR}" in dirs, dirs
  for d in _version_dirs():
    manifest = json.loads((d / "MANIFEST.json").read_text())
    assert manifest["format_version"] == d.name[1:]
    assert len(manifest["programs"]) >= 50, (d, len(manifest["programs"]))


# Programs whose files a JAX older than the writer refuses, clearly, because
# they use what that JAX lacks: {program: (first JAX minor that has it, what)}.
NEEDS_NEWER_JAX = {
    "sorting_ops": ((0, 12), "jnp.searchsorted is a HiJAX primitive"),
    "complex_sort_search": ((0, 12), "jnp.searchsorted is a HiJAX primitive"),
    "scipy_linalg": ((0, 12), "jnp.searchsorted is a HiJAX primitive"),
    "unique_histogram": ((0, 12), "jnp.nonzero is a HiJAX primitive"),
    "jnp_misc": ((0, 12), "HiJAX ldexp/frexp"),
    "custom_root_sqrt": ((0, 11), "custom_root is a HiJAX primitive"),
}


def _clearly_refused(result: str) -> bool:
  return result.startswith(("load: PrimitiveVersionError", "load: VersionError"))


# Programs whose outputs legitimately differ when another JAX release (another
# XLA) runs them: compared only under the JAX minor that wrote them.
SAME_XLA_ONLY = {
    "scipy_optimize_bfgs": "BFGS's iteration count (an int output) follows float "
                           "rounding, which differs between XLA releases",
}


@pytest.mark.parametrize("d,name,entry", _entries())
def test_golden_file(d, name, entry):
  writer = compat.parse_version(json.loads((d / "MANIFEST.json").read_text())["jax_version"])[:2]
  run = (RUN_ALL or name in RUN_IN_CI) and not (
      name in SAME_XLA_ONLY and writer != compat.JAX_VERSION[:2])
  result = make_golden._verify_one(d, name, entry, run)
  needs = NEEDS_NEWER_JAX.get(name)
  if needs and writer >= needs[0] > compat.JAX_VERSION[:2]:
    # written by a JAX that has it, read by one that lacks it: a clear refusal
    assert _clearly_refused(result), result
    return
  assert result == "ok", result


def test_ci_programs_exist():
  names = set()
  for d in _version_dirs():
    names |= set(json.loads((d / "MANIFEST.json").read_text())["programs"])
  missing = [n for n in RUN_IN_CI if n not in names]
  assert len(missing) <= 2, missing


# --- files of later versions -----------------------------------------------------

def test_future_major_is_refused_clearly():
  with pytest.raises(jp.VersionError) as info:
    jp.load(GOLDEN / "future" / "v2.0_future_major.jaxpb")
  e = info.value
  assert e.path == "format_version"
  assert "format version 2.0" in e.message and "reads 1.x" in e.message
  assert "upgrade jaxpr_proto" in e.message
  r = jp.check(GOLDEN / "future" / "v2.0_future_major.jaxpb")
  assert r.errors == [(e.path, e.message)]


def test_future_minor_loads():
  cj = jp.load(GOLDEN / "future" / "v1.99_future_minor.jaxpb")
  assert [e.primitive.name for e in cj.jaxpr.eqns] == ["sin", "mul"]
  assert jp.check(GOLDEN / "future" / "v1.99_future_minor.jaxpb").ok


def test_future_feature_is_refused_by_name():
  with pytest.raises(jp.VersionError, match="needs features this reader lacks: future_feature"):
    jp.load(GOLDEN / "future" / "v1.0_future_feature.jaxpb")


def test_newer_jax_param_is_refused_naming_primitive_and_param():
  with pytest.raises(jp.VersionError) as info:
    jp.load(GOLDEN / "future" / "jax_future_param.jaxpb")
  e = info.value
  assert "primitive sin has param 'approximation'" in e.message
  assert "JAX 0.99.0" in e.message
  assert e.path == "eqn[0].params.approximation"
