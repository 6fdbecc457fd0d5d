"""A bounded run of the fuzzer (tools/fuzz.py), and the saved bad cases it
found (tests/fuzz_regressions/), judged again.

Each case is judged as the fuzzer judges it: `jp.loads` raises a
`jp.DecodeError` (not an InternalError), or `jp.loads` and `jp.check` agree
and the loaded program runs under `jax.jit` (and `jax.vjp` where its seed's
program is differentiable); nothing crashes the worker process or runs past
the time limit.

CI runs JAXPR_PROTO_FUZZ_CASES cases (default 300) over the golden files.
Long runs: `.venv/bin/python tools/fuzz.py --cases 20000 --seed 1`.
"""
from __future__ import annotations

import os
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402  (tools/fuzz.py)

CASES = int(os.environ.get("JAXPR_PROTO_FUZZ_CASES", "300"))
REGRESSIONS = sorted(fuzz.REGRESSIONS.glob("*.jaxpb"))


def test_bounded_fuzz_run():
  seed_list = fuzz.seeds(corpus=False)
  assert len(seed_list) >= 50, "the golden files are missing (tests/golden/)"
  result = fuzz.fuzz(CASES, base_seed=int(os.environ.get("JAXPR_PROTO_FUZZ_SEED", "0")),
                     seed_list=seed_list)
  print(fuzz.format_result(result))
  assert not result["failures"], fuzz.format_result(result)
  counts = result["counts"]
  # The mutations do bite, and enough cases load to test what loads runs.
  assert counts.get("refused", 0) > CASES // 4, counts
  assert counts.get("ran", 0) > CASES // 10, counts


def test_regressions_exist():
  assert len(REGRESSIONS) >= 10


@pytest.fixture(scope="module")
def runner():
  r = fuzz.Runner()
  yield r
  r.close()


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression(path, runner):
  outcome, detail, _ = runner.judge(path.read_bytes(), vjp=path.stem.endswith(fuzz.VJP_SUFFIX))
  assert outcome in fuzz.GOOD, f"{path.name}: {outcome}: {detail}"


def test_judge_finds_what_fails_in_jax():
  """The judge is not blind: a program JAX refuses to run is a finding."""
  import jax
  import jax.extend
  import jax.numpy as jnp
  import jaxpr_proto as jp
  cj = jax.make_jaxpr(lambda x: jnp.sin(x))(1.0)
  eqn = cj.jaxpr.eqns[0]
  bad = cj.jaxpr.replace(eqns=[eqn.replace(params=dict(eqn.params, out_sharding=None))])
  bad = jax.extend.core.ClosedJaxpr(bad, cj.consts)
  with pytest.raises(TypeError, match="out_sharding"):
    fuzz._run_program(bad, vjp=False)
  outcome, detail = fuzz.judge(jp.dumps(bad))
  assert outcome == "refused", detail  # the schema refuses the extra param
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\].params.out_sharding: .*sin does not take"):
    jp.loads(jp.dumps(bad))


@pytest.mark.timeout(900)  # atheris instruments every loaded module (JAX's too) first: minutes
def test_coverage_guided_run_with_atheris():
  """`tools/fuzz.py --atheris` runs the same judge under atheris's engine
  (which stops at the first bad case, exit status 1)."""
  pytest.importorskip("atheris")
  import subprocess
  r = subprocess.run([sys.executable, str(ROOT / "tools" / "fuzz.py"), "--atheris", "--golden-only",
                      "--", "-runs=40", "-seed=1"],
                     capture_output=True, text=True, timeout=600, cwd=ROOT)
  out = r.stdout + r.stderr
  assert r.returncode == 0, out[-3000:]
  assert re.search(r"Done \d+ runs", out), out[-3000:]  # the seeds, then the 40 runs


def test_a_kernel_on_many_simulated_cores_may_run_past_the_limit():
  """Seed 671: an interpreted kernel on 255 simulated cores (each a thread)
  ran 26 s. It may run past the time limit, as a long loop may; the alarm,
  raised in the host callback that runs the kernel, comes back from XLA as
  its own error and still counts as the time limit (its worker is replaced)."""
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import tpu as pltpu

  def program(cores):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    call = pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., jnp.tanh(x_ref[...])),
                          out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), grid=(2,),
                          in_specs=[spec], out_specs=spec,
                          interpret=pltpu.InterpretParams(num_cores_or_threads=cores))
    return jax.make_jaxpr(call)(jnp.ones((16, 128), jnp.float32))

  assert fuzz._any_eqn(program(fuzz.MANY_CORES + 1).jaxpr, fuzz._loops_on)
  assert not fuzz._any_eqn(program(1).jaxpr, fuzz._loops_on)
  error = RuntimeError("INTERNAL: CpuCallback error calling callback: ... _Timeout")
  fuzz._alarmed[0] = False
  assert not fuzz._timed_out(error)
  fuzz._alarmed[0] = True
  try:
    assert fuzz._timed_out(error) and not fuzz._timed_out(RuntimeError("INTERNAL: other"))
  finally:
    fuzz._alarmed[0] = False


def test_a_program_for_other_platforms_only_is_not_a_finding():
  """Seed 701: a platform_dependent with a branch for another platform only
  (and no default) fails in JAX's lowering on this CPU, as the original
  does: a program for another platform, not a file that fails in JAX."""
  import jax
  import jax.numpy as jnp

  def platform_index(**branches):
    cj = jax.make_jaxpr(lambda x: jax.lax.platform_dependent(x, **branches))(1.0)
    return fuzz._any_eqn(cj.jaxpr, fuzz._for_other_platforms)

  assert platform_index(tpu=jnp.sin)
  assert not platform_index(tpu=jnp.sin, default=jnp.cos)
  assert not platform_index(cpu=jnp.sin, tpu=jnp.cos)


def test_a_solve_jax_cannot_differentiate_is_not_a_finding():
  """Seed 761: custom_linear_solve's jvp rule fails where its matvec's consts
  and its right-hand side have zero tangents and its solve's consts do not;
  JAX fails so on a program a user wrote too. Another failure of a program
  with a custom_linear_solve is still a finding."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  m, b = np.eye(3, dtype=np.float32) * 2, np.ones(3, np.float32)

  def f(a):
    return jax.lax.custom_linear_solve(lambda x: m @ x, b,
                                       solve=lambda mv, r: jnp.linalg.solve(a, r)).sum()
  with pytest.raises(TypeError, match="custom_linear_solve") as e:
    jax.grad(f)(np.eye(3, dtype=np.float32))
  cj = jax.make_jaxpr(f)(np.eye(3, dtype=np.float32))
  assert fuzz._zero_tangent_solve(e.value, cj)
  assert not fuzz._zero_tangent_solve(TypeError("another"), cj)
  assert not fuzz._zero_tangent_solve(e.value, jax.make_jaxpr(jnp.sin)(1.0))


def test_a_chain_past_what_xla_compiles_is_judged_not_compiled(runner):
  """Loading refuses no chain of dependent eqns, and a few-KB file can
  describe a long one through shared calls; XLA's CPU compiler crashes on
  one past check.bounds.XLA_CPU_CHAIN ops (docs/limits.md), on an original
  program too: the fuzzer judges it `past_compile_limit`, not compiled."""
  import jax
  import jax.numpy as jnp
  import jaxpr_proto as jp
  from jaxpr_proto.check import bounds
  f = jnp.sin
  for _ in range((bounds.XLA_CPU_CHAIN + 1).bit_length()):  # 2**n sins, past the limit
    f = (lambda g: jax.jit(lambda x: g(g(x))))(f)
  outcome, _, _ = runner.judge(jp.dumps(jax.make_jaxpr(f)(1.0)), vjp=False)
  assert outcome == "past_compile_limit"
  assert outcome in fuzz.GOOD
