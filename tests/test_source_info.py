"""Source locations and name stacks survive .jaxpb end to end: in the printed
jaxpr, and in the locations of the StableHLO the decoded program lowers to."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp

THIS_FILE = "test_source_info.py"


def _inner(x):
  with jax.named_scope("inner_scope"):
    return jnp.sin(x) * 2.0                      # LINE_INNER


def _program(x, y):
  with jax.named_scope("outer"):
    z = jax.vmap(_inner)(x)                      # LINE_VMAP
    with jax.named_scope("mid"):
      w = jax.jvp(jnp.cos, (y,), (y,))[1]        # LINE_JVP
  return z.sum() + w.sum()                       # LINE_SUM


def _line(marker):
  with open(__file__) as f:
    for i, text in enumerate(f, 1):
      if text.rstrip().endswith(f"# {marker}"):
        return i
  raise AssertionError(marker)


ARGS = (jnp.arange(6.0, dtype=jnp.float32).reshape(3, 2) / 7,
        jnp.array([0.25, -1.5], jnp.float32))


@pytest.fixture(scope="module")
def programs():
  cj = jax.make_jaxpr(_program)(*ARGS)
  data = jp.dumps(cj)
  return cj, jp.loads(data), data


def test_pretty_print_with_source_info(programs):
  cj, cj2, _ = programs
  kw = dict(source_info=True, name_stack=True)
  text = cj2.jaxpr.pretty_print(**kw)
  assert text == cj.jaxpr.pretty_print(**kw)
  for marker in ("LINE_INNER", "LINE_JVP", "LINE_SUM"):
    assert f"{THIS_FILE}:{_line(marker)}" in text, marker
  assert "(_inner)" in text and "(_program)" in text
  assert "[outer/vmap(inner_scope)]" in text
  assert "[outer/mid/jvp()]" in text
  # The plain text is unaffected by debug info, of course.
  assert str(cj2) == str(cj)


def _lower(cj):
  return jax.jit(jaxpr_as_fun(cj)).lower(*ARGS).as_text(debug_info=True)


_LOC = re.compile(r'loc\("([^"]*' + re.escape(THIS_FILE) + r')":(\d+):(\d+)')
_NAMED_LOC = re.compile(r'loc\("([^"]+)"\(#loc')


def test_lowering_locations(programs):
  cj, cj2, _ = programs
  texts = [_lower(c) for c in (cj, cj2)]  # one call site: same caller frame
  want, got = texts
  locs_want = {(int(l), int(c)) for _, l, c in _LOC.findall(want)}
  locs_got = {(int(l), int(c)) for _, l, c in _LOC.findall(got)}
  assert locs_got == locs_want
  lines = {l for l, _ in locs_got}
  for marker in ("LINE_INNER", "LINE_VMAP", "LINE_JVP", "LINE_SUM"):
    assert _line(marker) in lines, (marker, sorted(lines))
  names = set(_NAMED_LOC.findall(got))
  assert names == set(_NAMED_LOC.findall(want))
  assert any("outer/vmap(inner_scope)/sin" in n for n in names), names
  assert any("outer/mid/jvp()/" in n for n in names), names
  assert "_inner" in names and "_program" in names
  assert got == want


def test_without_debug_info(programs):
  cj, cj2, data = programs
  m = jp.encode(cj2, debug_info=False)
  assert len(m.frames) == 0
  assert len(jp.encode(cj2).frames) > 0
  small = jp.dumps(cj2, debug_info=False)
  assert small == m.SerializeToString(deterministic=True)
  assert len(small) < len(data)
  cj3 = jp.loads(small)
  assert str(cj3) == str(cj)
  outs = [np.asarray(jax.jit(jaxpr_as_fun(c))(*ARGS)[0]) for c in (cj, cj3)]
  np.testing.assert_array_equal(outs[1], outs[0])
  text = cj3.jaxpr.pretty_print(source_info=True, name_stack=True)
  assert THIS_FILE not in text
  assert "outer" not in text
  # No source location of the program itself is left in the lowering.
  lines = {int(l) for _, l, _ in _LOC.findall(_lower(cj3))}
  for marker in ("LINE_INNER", "LINE_VMAP", "LINE_JVP", "LINE_SUM"):
    assert _line(marker) not in lines


def test_save_load_file_keeps_source_info(programs, tmp_path):
  cj, _, _ = programs
  path = tmp_path / "prog.jaxpb"
  jp.save(cj, path)
  cj2 = jp.load(path)
  kw = dict(source_info=True, name_stack=True)
  assert cj2.jaxpr.pretty_print(**kw) == cj.jaxpr.pretty_print(**kw)
