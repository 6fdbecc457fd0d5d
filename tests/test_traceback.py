"""Tests for jaxpr_proto.codec.tracebacks: rebuilding eqn source info on load."""

import concurrent.futures
import re
import traceback as py_traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import config as jax_config
from jax._src import core as jax_core
from jax._src import source_info_util
from jax.extend import core as jex_core
from jax.interpreters import mlir

from jaxpr_proto.codec.tracebacks import (
    frames_of, make_source_info, make_traceback, make_tracebacks)

THIS_FILE = __file__


def _helper(a):
  return jnp.cos(a) + (
      a *
      2.0)


def _user_fn(x, y):
  with jax.named_scope("outer"):
    a = jnp.sin(x) * y
    with jax.named_scope("inner"):
      b = _helper(a)
  scale = lambda v: v / 3.0
  return jnp.sum(scale(b) + 1.0), b.T


def _args():
  return (np.arange(6, dtype=np.float32).reshape(2, 3),
          np.ones((2, 3), np.float32))


def _rebuild(closed_jaxpr):
  """Replaces each top-level eqn's source info by a rebuilt one."""
  jaxpr = closed_jaxpr.jaxpr
  eqns = [
      e.replace(source_info=make_source_info(
          make_traceback(frames_of(e.source_info.traceback)),
          e.source_info.name_stack))
      for e in jaxpr.eqns]
  return jax.extend.core.ClosedJaxpr(jaxpr.replace(eqns=eqns), closed_jaxpr.consts)


@pytest.fixture(scope="module")
def jaxprs():
  original = jax.make_jaxpr(_user_fn)(*_args())
  return original, _rebuild(original)


def _lower(closed_jaxpr):
  # One call site for both jaxprs, so the outer (lowering-time) frames match.
  return (jax.jit(jex_core.jaxpr_as_fun(closed_jaxpr)).lower(*_args())
          .as_text(debug_info=True))


def _file_locs(text):
  return {line.strip() for line in text.splitlines()
          if "loc(" in line and THIS_FILE in line}


def test_eqns_have_user_frames(jaxprs):
  original, _ = jaxprs
  frames = [frames_of(e.source_info.traceback) for e in original.jaxpr.eqns]
  assert all(frames), frames
  assert all(f[0][0] == THIS_FILE for f in frames)
  names = {f[0][1] for f in frames}
  assert {"_user_fn", "_helper", "_user_fn.<locals>.<lambda>"} <= names
  # A multi-line expression in _helper.
  assert any(f[0][2] != f[0][4] for f in frames)


def test_pretty_print_identical(jaxprs):
  original, rebuilt = jaxprs
  for kw in (dict(source_info=True, name_stack=True), dict(source_info=True)):
    assert rebuilt.pretty_print(**kw) == original.pretty_print(**kw)
  assert THIS_FILE in rebuilt.pretty_print(source_info=True)
  assert all(type(e.source_info.traceback) is source_info_util.Traceback
             for e in rebuilt.jaxpr.eqns)


def test_summarize_more_frames(jaxprs):
  original, rebuilt = jaxprs
  for e0, e1 in zip(original.jaxpr.eqns, rebuilt.jaxpr.eqns):
    assert (source_info_util.summarize(e1.source_info, num_frames=5) ==
            source_info_util.summarize(e0.source_info, num_frames=5))


@pytest.mark.parametrize("full", [False, True])
def test_mlir_locations(jaxprs, full):
  original, rebuilt = jaxprs
  with jax_config.include_full_tracebacks_in_locations(full):
    # Lowered from one line: the lowering-time frames are part of the locs.
    want_text, got_text = [_lower(cj) for cj in (original, rebuilt)]
  want, got = _file_locs(want_text), _file_locs(got_text)
  assert want
  lines = {int(m) for l in want for m in re.findall(r'\.py":(\d+):', l)}
  eqn_lines = {frames_of(e.source_info.traceback)[0][2]
               for e in original.jaxpr.eqns}
  assert eqn_lines <= lines
  assert got == want
  assert got_text == want_text


def test_round_trip_and_interning():
  fr = [(THIS_FILE, "f.<locals>.g", 10, 4, 12, 7),
        ("/x/other.py", "outer", 3, 0, 3, 20),
        ("/x/other.py", "outer", 70000, 4095, 70001, 0)]
  tb = make_traceback(fr)
  assert frames_of(tb) == fr
  assert make_traceback(list(fr)) is tb
  assert make_traceback(tuple(tuple(f) for f in fr)) is tb
  assert make_tracebacks([fr, fr[:1], []]) == [tb, make_traceback(fr[:1]),
                                               None]
  assert make_traceback([]) is None
  assert frames_of(None) == []
  assert hash(tb) == hash(make_traceback(fr))
  assert {tb: 1}[make_traceback(fr)] == 1
  assert source_info_util.user_frame(tb) == fr[0]
  # Real jaxlib Traceback API.
  assert [(f.file_name, f.function_name, f.line_num) for f in tb.frames] == [
      (f[0], f[1], f[2]) for f in fr]
  assert str(tb).splitlines()[0] == f"{THIS_FILE}:10 (f.<locals>.g)"
  both = tb + source_info_util.Traceback.get_traceback()
  assert frames_of(both)[:3] == fr
  assert frames_of(source_info_util.Traceback() + tb) == fr
  # Unknown positions, as CPython reports them (-1).
  odd = [("/x/a.py", "h", -1, -1, -1, -1), ("/x/a.py", "h", 5, -1, 5, -1)]
  assert frames_of(make_traceback(odd)) == odd


def test_concurrent_builds():
  lists = [[(THIS_FILE, f"fn{i}", 1000 + i, 1, 1000 + i, 5)] * (1 + i % 3)
           for i in range(200)]
  with concurrent.futures.ThreadPoolExecutor(8) as pool:
    tbs = list(pool.map(make_traceback, lists))
  assert [frames_of(tb) for tb in tbs] == lists
  assert make_tracebacks(lists) == tbs


def test_as_python_traceback():
  fr = [(THIS_FILE, "inner_fn", 40, 2, 40, 9),
        (THIS_FILE, "outer_fn", 30, 4, 31, 1)]
  ptb = make_traceback(fr).as_python_traceback()
  summary = py_traceback.extract_tb(ptb)
  assert [(s.filename, s.name, s.lineno) for s in summary] == [
      (THIS_FILE, "outer_fn", 30), (THIS_FILE, "inner_fn", 40)]


def test_user_context_error():
  fr = [(THIS_FILE, "inner_fn", 40, 2, 40, 9)]
  with pytest.raises(ValueError) as info:
    with source_info_util.user_context(make_traceback(fr)):
      raise ValueError("boom")
  cause = info.value.__cause__
  assert isinstance(cause, source_info_util.JaxStackTraceBeforeTransformation)
  assert [(s.filename, s.lineno) for s in
          py_traceback.extract_tb(cause.__traceback__)] == [(THIS_FILE, 40)]
  py_traceback.format_exception(info.value)  # formats without crashing


boom_p = jex_core.Primitive("jaxpr_proto_test_boom")
boom_p.def_abstract_eval(lambda x: x)


def _boom_lowering(ctx, x):
  raise ValueError("boom during lowering")


mlir.register_lowering(boom_p, _boom_lowering)


def _boom_fn(x):
  return boom_p.bind(jnp.sin(x))


def test_error_during_lowering():
  original = jax.make_jaxpr(_boom_fn)(np.float32(1.0))
  rebuilt = _rebuild(original)
  boom_eqn = rebuilt.jaxpr.eqns[-1]
  line = frames_of(boom_eqn.source_info.traceback)[0][2]
  for cj in (original, rebuilt):
    with pytest.raises(ValueError, match="boom during lowering") as info:
      _lower_one(cj)
    cause = info.value.__cause__
    assert isinstance(cause,
                      source_info_util.JaxStackTraceBeforeTransformation)
    frames = py_traceback.extract_tb(cause.__traceback__)
    assert (THIS_FILE, line) in [(f.filename, f.lineno) for f in frames]
    py_traceback.format_exception(info.value)


def _lower_one(cj):
  return jax.jit(jex_core.jaxpr_as_fun(cj)).lower(np.float32(1.0))


def test_eval_and_retrace(jaxprs):
  original, rebuilt = jaxprs
  out0 = jex_core.jaxpr_as_fun(original)(*_args())
  out1 = jex_core.jaxpr_as_fun(rebuilt)(*_args())
  for a, b in zip(out0, out1):
    np.testing.assert_allclose(a, b)
  # Retracing a rebuilt jaxpr propagates the rebuilt source info.
  again = jax.make_jaxpr(jex_core.jaxpr_as_fun(rebuilt))(*_args())
  assert (again.pretty_print(source_info=True, name_stack=True) ==
          jax.make_jaxpr(jex_core.jaxpr_as_fun(original))(*_args())
          .pretty_print(source_info=True, name_stack=True))


def test_user_frames_follow_jaxs_exclusions():
  """A traceback's user frames are kept per process, keyed with what decides
  which frames are the user's: a path JAX is told to exclude later is left
  out from then on, as JAX's own printer leaves it out."""
  tb = jax.make_jaxpr(lambda x: jnp.sin(x))(1.0).jaxpr.eqns[0].source_info.traceback
  before = frames_of(tb)
  assert before[0][0] == __file__
  source_info_util.register_exclusion(__file__)
  try:
    assert all(f[0] != __file__ for f in frames_of(tb))
  finally:  # (JAX has no way to undo it)
    source_info_util._exclude_paths.remove(__file__)
    source_info_util._exclude_path_regex.cache_clear()
    source_info_util.is_user_filename.cache_clear()
  assert frames_of(tb) == before
