"""checkify: a checkified program saves with its Error output (the loaded
Function returns an Error whose .get() gives the original's message), and a
program with checkify.check inside saves its check eqns (err_tree params),
so that checkify.checkify of the loaded program finds the same errors. Each
is written and read in its own process; the reader never sees the writer's
code. Hostile error metadata is refused on load."""
from __future__ import annotations

import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxpr_proto as jp
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from tests.helpers import run_json, str_values

# Inputs: good; a failed user check; an index out of bounds; a division by
# zero; a NaN from log (each is the first error its input meets).
CASES = [([1.0, 2.0, 3.0], 1, 1), ([-1.0, 2.0, 3.0], 1, 1), ([1.0, 2.0, 3.0], 5, 1),
         ([1.0, 2.0, 3.0], 1, 0), ([1.0, 2.0, 3.0], 2, 4)]

# The writer: its program lives only in this script.
WRITER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax, jax.numpy as jnp
    from jax import lax
    from jax.experimental import checkify
    import jaxpr_proto as jp

    @jax.jit
    def inner(x, i):
      checkify.check(jnp.all(x > 0), "x must be positive, got {} (index {i})", x[0], i=i)
      return x[i]

    def program(x, i, d):
      y = inner(x, i)
      z = lax.cond(d > 3, lambda v: jnp.log(v - 4.0), lambda v: v + (i * 7 // d).astype(v.dtype), y)
      lax.cond(d > 3, lambda: checkify.check(z < 100, "z too big: {}", z), lambda: None)
      return jnp.sin(x) * z, z

    errors = checkify.all_checks
    checked = checkify.checkify(program, errors=errors)
    args = (np.ones(3, np.float32), np.int32(0), np.int32(1))
    jp.save(jp.trace(checked)(*args), sys.argv[1])
    jp.save(jax.make_jaxpr(program)(*args), sys.argv[2])
    jp.save(jp.trace(checked)(*args), sys.argv[3], debug_info=False)

    def run(f, x, i, d):
      err, out = jax.jit(f)(np.asarray(x, np.float32), np.int32(i), np.int32(d))
      return [err.get(), [np.asarray(o).tolist() for o in out]]

    cases = json.loads(sys.argv[4])
    xs = np.asarray([c[0] for c in cases], np.float32)
    i, d = np.asarray([c[1] for c in cases], np.int32), np.asarray([c[2] for c in cases], np.int32)
    verr, vout = jax.jit(jax.vmap(checked))(xs, i, d)
    try:
      jax.extend.core.jaxpr_as_fun(jax.make_jaxpr(program)(*args))(
          np.asarray([-1.0, 2.0, 3.0], np.float32), np.int32(0), np.int32(1))
      eager = None
    except Exception as e:
      eager = f"{type(e).__name__}: {e}"
    print(json.dumps({"runs": [run(checked, *c) for c in cases], "vmap": verr.get(),
                      "eager": eager, "text": str(jax.make_jaxpr(program)(*args))}))
""")

READER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import checkify
    import jaxpr_proto as jp

    def run(f, x, i, d):
      err, out = jax.jit(f)(np.asarray(x, np.float32), np.int32(i), np.int32(d))
      return [err.get(), [np.asarray(o).tolist() for o in out]]

    cases = json.loads(sys.argv[4])
    saved = jp.load(sys.argv[1])
    assert isinstance(saved(*map(np.asarray, cases[0]))[0], checkify.Error)
    program = jp.load(sys.argv[2])
    flat = jax.extend.core.jaxpr_as_fun(program)
    rechecked = checkify.checkify(lambda *a: tuple(flat(*a)), errors=checkify.all_checks)
    xs = np.asarray([c[0] for c in cases], np.float32)
    i, d = np.asarray([c[1] for c in cases], np.int32), np.asarray([c[2] for c in cases], np.int32)
    verr, _ = jax.jit(jax.vmap(saved))(xs, i, d)
    try:  # a check not functionalized by checkify: as JAX's own program
      flat(np.asarray([-1.0, 2.0, 3.0], np.float32), np.int32(0), np.int32(1))
      eager = None
    except Exception as e:
      eager = f"{type(e).__name__}: {e}"
    print(json.dumps({"saved": [run(saved, *c) for c in cases],
                      "rechecked": [run(rechecked, *c) for c in cases],
                      "stripped": [run(jp.load(sys.argv[3]), *c) for c in cases],
                      "vmap": verr.get(), "eager": eager, "text": str(program)}))
""")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  d = tmp_path_factory.mktemp("checkify")
  files = [str(d / n) for n in ("checked.jaxpb", "program.jaxpb", "stripped.jaxpb")]
  cases = json.dumps(CASES)
  return files, run_json(WRITER, *files, cases), run_json(READER, *files, cases)


def test_loaded_checkified_function_returns_the_same_errors(saved):
  _, wrote, read = saved
  messages = [m for m, _ in wrote["runs"]]
  assert messages[0] is None and all(messages[1:]), messages
  assert "x must be positive, got -1.0 (index 1)" in messages[1]
  assert "out-of-bounds" in messages[2] and "division by zero" in messages[3]
  # The first error by code: the order of codes differs between JAX releases.
  assert "z too big: nan" in messages[4] or "nan generated by primitive: log" in messages[4]
  assert read["saved"] == wrote["runs"]  # messages, and outputs bit for bit (as floats)
  assert read["stripped"] == wrote["runs"]  # saved without debug info: no tracebacks
  assert read["vmap"] == wrote["vmap"] and "at mapped index 1" in wrote["vmap"]


def test_checkify_of_a_loaded_program_with_checks(saved):
  _, wrote, read = saved
  assert read["text"] == wrote["text"]  # the check eqns print as the original's
  assert read["rechecked"] == wrote["runs"]
  assert read["eager"] == wrote["eager"] and "functionalized" in wrote["eager"]


# --- hostile error metadata ------------------------------------------------------------

def _checked_module():
  def f(x):
    checkify.check(x > 0, "bad {}", x)
    return x + 1
  return jp.encode(jp.trace(checkify.checkify(f))(jnp.float32(1)))


@pytest.mark.parametrize("fmt", ["bad {0.__class__}", "bad {0[0]}", "bad {1}", "bad {secret}",
                                 "bad {0:{0}}", "bad {"])
def test_message_formats_reaching_past_their_arguments_are_refused(fmt):
  m = _checked_module()
  (s,) = [s for s in str_values(m.function.out_tree.root) if s.str == "bad {}"]
  s.str = fmt
  with pytest.raises(jp.DecodeError, match=r"function\.out_tree.*") as e:
    jp.decode(m)
  assert "format" in str(e.value) or "field" in str(e.value)


def test_error_effects_of_unknown_error_types_are_refused():
  m = _checked_module()
  (s,) = [s for s in str_values(m.function.out_tree.root) if s.str == "FailedCheckError"][:1]
  s.str = "SystemExit"
  with pytest.raises(jp.DecodeError, match="error_type"):
    jp.decode(m)


def test_a_good_module_still_loads():
  m = _checked_module()
  f = jp.decode(m)
  err, y = f(jnp.float32(-2))
  assert err.get() == "bad -2.0 (`check` failed)" and np.asarray(y) == -1
  assert f(jnp.float32(2))[0].get() is None
  assert "checkify" in m.required_features and m.format_version.minor == 3
