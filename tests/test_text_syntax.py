"""The jaxpr text (.jaxpr, issue 33): a Module printed as JAX prints a
jaxpr, with what the printout lacks in forms that parse back.

* Exact: every corpus program and golden file reads back as the same
  Module, byte for byte (text -> parse -> bytes), in the body's own order
  (no `seed` lines) but for a hand-made future file.
* It reads as JAX's printout where JAX prints an eqn in full.
* A hand edit (a primitive, a constant, a literal, a param) loads as the
  program traced with that change, output for output.
* Hostile text: errors with line and column, the same checks as a .jaxpb
  after parsing, bounded size, nesting and time, and a bounded fuzzer
  (tools/fuzz_text.py runs longer).
"""
from __future__ import annotations

import pathlib
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto.wire import jaxpr_text as jt
from jaxpr_proto.wire.jaxpr_text import printer, syntax
from tests import corpus

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*/*.jaxpb"))
sys.path.insert(0, str(ROOT / "tools"))
import fuzz_text  # noqa: E402


def _bytes(m) -> bytes:
  return m.SerializeToString(deterministic=True)


# --- exact --------------------------------------------------------------------

@pytest.mark.parametrize("p", corpus.PROGRAMS, ids=lambda p: p.name)
def test_corpus_reads_back_byte_for_byte(p):
  cj = corpus.trace(p)
  for debug_info in (True, False):
    m = jp.encode(cj, debug_info=debug_info)
    back = jp.parse(printer.print_module(m))  # (no table given as a seed)
    assert _bytes(back) == _bytes(m), jt.first_difference(m, back)


@pytest.mark.main_jax_only  # (text <-> Module only: no JAX in it, so once is enough)
@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_golden_files_read_back_byte_for_byte(path):
  m = jp.parse(path.read_bytes())
  back = jp.parse(printer.print_module(m))
  if path.parent.name == "future" and _bytes(back) != _bytes(m):
    # A hand-made file of a future JAX holds a param nothing before it
    # interned: its text gives the params table outright.
    text = jp.format(m)
    assert [line.split()[1] for line in text.splitlines() if line.startswith("seed ")] == ["params"]
    back = jp.parse(text)
  assert _bytes(back) == _bytes(m), jt.first_difference(m, back)


def test_format_checks_its_text_and_seeds_what_the_body_cannot_order():
  m = jp.encode(jax.make_jaxpr(lambda x: jnp.sum(jnp.sin(x) ** 2))(np.ones(3, np.float32)))
  assert len(m.params) > 2
  m.params.reverse()  # (a table in another order than a writer's)
  for e in m.jaxprs[0].eqns:
    e.params[:] = [len(m.params) - 1 - i for i in e.params]
  text = jp.format(m)
  assert "seed params '" in text
  assert _bytes(jp.parse(text)) == _bytes(m)
  m.jaxprs[0].eqns[0].primitive = 99  # no text names a primitive out of range
  with pytest.raises(jp.EncodeError, match="primitive 99 is out of range"):
    jp.format(m)


def test_the_text_is_deterministic_and_a_fixed_point():
  m = jp.encode(corpus.trace(corpus.get("user_custom_vjp")))
  text = jp.format(m)
  assert jp.format(m) == text
  assert jp.format(jp.parse(text)) == text


def test_a_future_file_keeps_the_fields_this_reader_does_not_know():
  m = jp.parse((ROOT / "tests/golden/future/v1.99_future_minor.jaxpb").read_bytes())
  text = jp.format(m)
  assert "unknown_fields base64(" in text
  assert _bytes(jp.parse(text)) == _bytes(m)
  assert str(jp.decode(jp.parse(text))) == str(jp.loads(_bytes(m)))  # (a minor's files load)


# --- as JAX prints it -----------------------------------------------------------

def test_eqn_lines_read_as_jax_prints_them():
  def f(x):
    return jnp.sum(x ** 3, axis=0) + jnp.arange(3.0)
  cj = jax.make_jaxpr(f)(np.ones((4, 3), np.float32))
  ours = jp.format(cj, debug_info=False).splitlines()
  theirs = [line.rstrip() for line in str(cj).splitlines()]
  for line in ("{ lambda ; a:f32[4,3]. let",
               "    b:f32[4,3] = integer_pow[y=3] a",
               "    c:f32[3] = reduce_sum[axes=(0,) out_sharding=None] b",
               "    d:f32[3] = iota[dimension=0 dtype=float32 shape=(3,) sharding=None]",
               "    e:f32[3] = add c d",
               "  in (e,) }"):
    assert line in theirs and line in ours, line


def test_what_the_printout_lacks_is_there():
  def f(x):
    return jnp.sin(x) + jnp.array([1.0, 2.0, 3.0], np.float32)
  text = jp.format(jax.make_jaxpr(f)(np.ones(3, np.float32)))
  assert re.search(r"\{ lambda a:f32\[3\] = \[1\.0, 2\.0, 3\.0\]; b:f32\[3\]\. let", text)
  assert re.search(r"sin\[accuracy=None\] b loc\(#loc1\)", text)
  assert re.search(r"^#loc1 = loc\('.*test_text_syntax.py':\d+:\d+ to \d+:\d+ in '[^']*\bf'\)$", text, re.M)
  assert "loc(" not in jp.format(jax.make_jaxpr(f)(np.ones(3, np.float32)), debug_info=False)


def test_big_constants_are_references_to_the_data_file(tmp_path):
  big = np.arange(1 << 18, dtype=np.float32)
  cj = jax.make_jaxpr(lambda x: x + big)(np.float32(1))
  jp.save(cj, tmp_path / "f.jaxpr")
  text = (tmp_path / "f.jaxpr").read_text()
  assert re.search(r"a:f32\[262144\] = external\('f\.jaxpr\.data', offset=0, length=1048576, "
                   r"sha256='[0-9a-f]{64}'\)", text)
  assert jp.check(tmp_path / "f.jaxpr").ok
  out = jax.jit(jaxpr_as_fun(jp.load(tmp_path / "f.jaxpr")))(np.float32(2))[0]
  np.testing.assert_array_equal(out, big + 2)
  # Edited to name another range of the file, it is refused by its checksum.
  (tmp_path / "g.jaxpr").write_text(text.replace("length=1048576", "length=1048572"))
  with pytest.raises(jp.DecodeError, match="consts"):
    jp.load(tmp_path / "g.jaxpr")


# --- hand edits load as the edited program ----------------------------------------

def _program(prim=jnp.sin, const=(1.0, 2.0, 3.0), scale=2.0, power=2):
  c = np.array(const, np.float32)

  def f(x):
    y = prim(x) * scale + jnp.asarray(c)
    return jnp.sum(y ** power, axis=0)
  return f


X = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
EDITS = {
    "primitive": (("= sin[", "= cos["), dict(prim=jnp.cos)),
    "constant": (("[1.0, 2.0, 3.0]", "[0.5, -4.0, 1e-05]"), dict(const=(0.5, -4.0, 1e-05))),
    "literal": (("2.0:f32[]", "3.0:f32[]"), dict(scale=3.0)),
    "param": (("integer_pow[y=2]", "integer_pow[y=3]"), dict(power=3)),
}


@pytest.mark.parametrize("what", sorted(EDITS))
def test_a_hand_edit_loads_as_the_edited_program(what):
  (old, new), change = EDITS[what]
  text = jp.format(jax.make_jaxpr(_program())(X), debug_info=False)
  assert text.count(old) == 1, (old, text)
  edited = text.replace(old, new)
  loaded = jp.decode(jp.parse(edited))
  want_cj = jax.make_jaxpr(_program(**change))(X)
  assert jp.format(want_cj, debug_info=False) == edited
  got = jax.jit(jaxpr_as_fun(loaded))(X)
  want = jax.jit(_program(**change))(X)
  np.testing.assert_array_equal(got[0], want)


# --- hostile text -------------------------------------------------------------------

BASE = f"""format 1.0
namespace jax '{jax.__version__}'
{{ lambda ; a:f32[3]. let
    b:f32[3] = sin[accuracy=None] a
  in (b,) }}
"""


def _at(text: str, needle: str) -> tuple[int, int]:
  i = text.index(needle)
  return text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)


ERRORS = {
    "a stray character": (("] a\n", "] a $\n"), "$", "unexpected character '$'"),
    "an undefined variable": (("] a\n", "] z\n"), "z\n", "z is not defined before it is used"),
    "a variable defined twice": (("b:f32[3] =", "a:f32[3] ="), "a:f32[3] =", "a is defined twice"),
    "an unknown dtype": (("b:f32[3]", "b:q32[3]"), "q32", "unknown dtype q32"),
    "a call the syntax lacks": (("accuracy=None", "accuracy=bar(1)"), "bar", "bar(...): not a call"),
    "a location not listed": (("] a\n", "] a loc(#loc4)\n"), "#loc4", "#loc4 is not given"),
    "too few elements": (("lambda ;", "lambda c:f32[2] = [1.0];"), "1.0]", "1 elements for shape [2]"),
    "a variable id too big": (("] a\n", "] %4294967295\n"), "%4294967295", "below 2**32 - 1"),
    "a mesh axis too big": (("accuracy=None", "accuracy=Mesh(('x', 9223372036854775808))"),
                            "9223372036854775808", "expected an int from"),
    "a bad escape": (("accuracy=None", "accuracy='\\x4'"), "'\\x4'", "a bad string"),
    "a lone surrogate": (("accuracy=None", "accuracy='\\ud800'"), "'\\ud800'", "a bad string"),
    "an int of 5000 digits": (("accuracy=None", "accuracy=" + "9" * 5000), "9999", "does not read"),
    "a second =": (("] a\n", "] a = a\n"), "= a\n", "unexpected '='"),
}


@pytest.mark.parametrize("what", sorted(ERRORS))
def test_a_bad_text_is_refused_with_line_and_column(what):
  (old, new), where, message = ERRORS[what]
  text = BASE.replace(old, new, 1)
  with pytest.raises(jp.TextError) as e:
    jp.parse(text)
  assert message in e.value.message
  assert (e.value.line, e.value.column) == _at(text, where)
  assert str(e.value).startswith(f"line {e.value.line}, column {e.value.column}: ")


def test_the_base_text_loads():
  cj = jp.decode(jp.parse(BASE))
  x = np.ones(3, np.float32)
  np.testing.assert_array_equal(jax.jit(jaxpr_as_fun(cj))(x)[0], jax.jit(jnp.sin)(x))


def test_a_text_that_ends_early_says_where():
  with pytest.raises(jp.TextError, match="the text ends early") as e:
    jp.parse(BASE[:-4])
  assert e.value.line == 5


@pytest.mark.parametrize("edit, error, path", [
    (("] a\n", "] a a\n"), jp.DecodeError, "eqn[0]"),  # sin of two operands
    (("b:f32[3] =", "b:f32[4] ="), jp.DecodeError, "eqn[0]"),  # a wrong result type
    (("= sin[accuracy=None] a", "= mylib::sin a"), jp.UnknownPrimitiveError, "eqn[0]"),
])
def test_what_parses_goes_through_the_checks_of_a_jaxpb(edit, error, path):
  m = jp.parse(BASE.replace(*edit))
  with pytest.raises(error) as e:
    jp.decode(m)
  assert path in e.value.path
  assert not jp.check(m).ok


def test_size_is_bounded(monkeypatch):
  monkeypatch.setattr(syntax, "MAX_TEXT_BYTES", 64)
  with pytest.raises(jp.TextError, match="more than a .jaxpr may have"):
    jp.parse(BASE)


def test_nesting_is_bounded_before_lark_builds_a_tree():
  deep = BASE.replace("accuracy=None", "accuracy=" + "(" * (syntax.MAX_NESTING + 5))
  t0 = time.perf_counter()
  with pytest.raises(jp.TextError, match="nested deeper than") as e:
    jp.parse(deep)
  assert time.perf_counter() - t0 < 1
  assert e.value.line == 4
  # Within the bound, a deep value parses (and is then the checker's to judge).
  ok = BASE.replace("accuracy=None", "accuracy=" + "(" * 150 + "1," + ",)" * 150)
  with pytest.raises(jp.DecodeError):
    jp.decode(jp.parse(ok))


def _chain(n: int) -> str:
  eqns = "\n".join(f"    %{k + 1}:f32[3] = sin[accuracy=None] %{k}" for k in range(n))
  return f"format 1.0\nnamespace jax '{jax.__version__}'\n{{ lambda ; %0:f32[3]. let\n{eqns}\n  in (%{n},) }}\n"


def test_parsing_time_is_linear_in_the_text():
  small, big = _chain(500), _chain(4000)
  jp.parse(small)
  t0 = time.perf_counter()
  jp.parse(small)
  t1 = time.perf_counter()
  m = jp.parse(big)
  t2 = time.perf_counter()
  assert m.jaxprs[0].HasField("columns") and len(m.jaxprs[0].columns.primitive) == 4000
  assert (t2 - t1) < 8 * 3 * (t1 - t0) + 0.5, (t1 - t0, t2 - t1)


def test_text_fuzz_bounded():
  sources = fuzz_text.texts(["cond_switch", "user_custom_vjp", "scan_variants", "random_key_arg"])
  findings = fuzz_text.run(sources, seed=0, cases=200, case_seconds=20)
  assert not findings, findings[0][2]


# --- the file forms and the checker (wire.files, check.checker) -------------------

def test_files_read_and_write_jaxpr(tmp_path):
  """`.jaxpr` is one of wire.files' forms: written as jp.format's text, read
  back as the same Module; a text that does not parse is a TextError."""
  from jaxpr_proto.wire import files
  m = jp.parse(BASE)
  assert files.form_of("f.JAXPR") == files.JAXPR == jt.FORM
  assert files.write_module(m, tmp_path / "f.jaxpr") == len(jp.format(m).encode())
  assert (tmp_path / "f.jaxpr").read_text() == jp.format(m)
  assert _bytes(files.read_module(tmp_path / "f.jaxpr")) == _bytes(m)
  bad = BASE.replace("] a\n", "] a $\n", 1)
  (tmp_path / "bad.jaxpr").write_text(bad)
  with pytest.raises(jp.TextError) as e:
    files.read_module(tmp_path / "bad.jaxpr")
  assert (e.value.line, e.value.column) == _at(bad, "$")


def test_the_checker_reads_a_jaxpr_path(tmp_path):
  """checker.check(path) reads a .jaxpr as its text (as jp.check does), a
  text that does not parse a structure error at its line and column."""
  from jaxpr_proto.check import checker
  (tmp_path / "f.jaxpr").write_text(BASE)
  assert checker.check(tmp_path / "f.jaxpr").ok and jp.check(tmp_path / "f.jaxpr").ok
  edited = BASE.replace("b:f32[3] =", "b:f32[4] =")  # parses, and does not type-check
  (tmp_path / "edited.jaxpr").write_text(edited)
  report = checker.check(str(tmp_path / "edited.jaxpr"))
  assert not report.ok and report.errors == jp.check(jp.parse(edited)).errors
  bad = BASE.replace("] a\n", "] a $\n", 1)
  (tmp_path / "bad.jaxpr").write_text(bad)
  report = checker.check(tmp_path / "bad.jaxpr")
  line, column = _at(bad, "$")
  assert report.errors == [(f"line {line}, column {column}", "unexpected character '$'")]
  assert report.error_stages == ["structure"]
