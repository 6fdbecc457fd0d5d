"""Jaxprs of many eqns are written in columns (Jaxpr.columns): every corpus
program round-trips in that form too, to the same program; a hostile file's
columns are refused with the path of the eqn at fault, by `jp.loads` and
`jp.check` alike; other readers (info, the JavaScript reader) see the same
eqns in either form."""
import gc
import json
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns, info
from tests import corpus, helpers
from tests.test_roundtrip import NUMERIC_SAMPLE, _text, assert_same


@pytest.fixture
def all_in_columns(monkeypatch):
  monkeypatch.setattr(columns, "COLUMNS_FROM", 0)


def _columns_of(m: pb.Module) -> list[int]:
  return [i for i, j in enumerate(m.jaxprs) if j.HasField("columns")]


@pytest.mark.parametrize("p", corpus.PROGRAMS, ids=lambda p: p.name)
def test_corpus_round_trips_in_columns(p, monkeypatch):
  cj = corpus.trace(p)
  monkeypatch.setattr(columns, "COLUMNS_FROM", 1 << 30)
  by_messages = jp.dumps(cj)
  monkeypatch.setattr(columns, "COLUMNS_FROM", 0)
  data = jp.dumps(cj)
  m = pb.Module.FromString(data)
  assert all(j.HasField("columns") and not j.eqns for j in m.jaxprs if columns.eqn_count(j))
  if any(columns.eqn_count(j) for j in m.jaxprs):
    assert "eqn_columns" in m.required_features
  cj2 = jp.loads(data)
  kw = dict(source_info=True, name_stack=True)
  assert _text(cj2.jaxpr.pretty_print(**kw)) == _text(cj.jaxpr.pretty_print(**kw))
  assert jp.dumps(cj2) == data
  monkeypatch.setattr(columns, "COLUMNS_FROM", 1 << 30)
  assert jp.dumps(cj2) == by_messages  # the columns held all the eqns held
  if p.name in NUMERIC_SAMPLE and not p.symbolic:
    args = jax.tree.leaves(p.args)
    assert_same(jax.jit(jaxpr_as_fun(cj2))(*args), jax.jit(jaxpr_as_fun(cj))(*args), "outputs")


def _chain(n):
  def f(x):
    for k in range(n):
      x = jnp.sin(x) if k % 2 else x * 2.0
    return x
  return jax.make_jaxpr(f)(np.float32(0.5))


def test_big_jaxprs_are_written_in_columns():
  cj = _chain(columns.COLUMNS_FROM)
  m = pb.Module.FromString(jp.dumps(cj))
  assert _columns_of(m) == [m.closed_jaxprs[m.root].jaxpr]
  assert list(m.required_features) == ["eqn_columns"]
  small = pb.Module.FromString(jp.dumps(_chain(columns.COLUMNS_FROM - 1)))
  assert not _columns_of(small) and "eqn_columns" not in small.required_features
  cj2 = jp.loads(m.SerializeToString())
  assert str(cj2) == str(cj)
  x = np.float32(0.25)
  assert_same(jax.jit(jaxpr_as_fun(cj2))(x), jax.jit(jaxpr_as_fun(cj))(x), "outputs")
  g = lambda c: jax.grad(lambda x: jaxpr_as_fun(c)(x)[0])(x)
  assert_same(g(cj2), g(cj), "gradients")


def _effects_program():
  def f(x):
    r = jax.new_ref(x)
    jax.debug.print("x={}", x)
    r[...] = r[...] * 2
    return r[...]
  return jax.make_jaxpr(f)(jnp.ones(3))


def test_effects_in_columns(all_in_columns):
  cj = _effects_program()
  m = pb.Module.FromString(jp.dumps(cj))
  j = m.jaxprs[m.closed_jaxprs[m.root].jaxpr]
  assert j.columns.effects, "the program's eqns have effects"
  assert str(jp.loads(m.SerializeToString())) == str(cj)


def _module(n=300):
  """A Module of a chain of n eqns (x * 2.0, sin, in turn) in columns."""
  return pb.Module.FromString(jp.dumps(_chain(n)))


def _root(m):
  return m.jaxprs[m.closed_jaxprs[m.root].jaxpr]


def _first_operand(c, k):
  return sum(c.operand_count[:k])


# (mutation of the root jaxpr's columns, the path of the error, a fragment of its message)
HOSTILE = {
    "use_before_define": (lambda c: c.operands.__setitem__(_first_operand(c, 3), c.results[9]),
                          "eqn[3].invars[0]", "used before it is defined"),
    "undefined_var": (lambda c: c.operands.__setitem__(_first_operand(c, 4), 99999),
                      "eqn[4].invars[0]", "used before it is defined"),
    "defined_twice": (lambda c: c.results.__setitem__(6, c.results[2]),
                      "eqn[6].outvars[0]", "defined twice"),
    "primitive_out_of_range": (lambda c: c.primitive.__setitem__(8, 77),
                               "eqn[8].primitive", "out of range"),
    "aval_out_of_range": (lambda c: c.result_avals.__setitem__(10, 500),
                          "eqn[10].outvars[0]", "out of range"),
    "param_out_of_range": (lambda c: c.params.__setitem__(0, 1000),
                           "eqn[", "out of range"),
    "context_out_of_range": (lambda c: c.context.__setitem__(12, 9),
                             "eqn[12].context", "out of range"),
    "short_column": (lambda c: c.name_stack.pop(),
                     "columns.name_stack", "entries in name_stack"),
    "operands_miscounted": (lambda c: c.operand_count.__setitem__(2, 3),
                            "columns.operands", "operand_count adds up to"),
    "literals_miscounted": (lambda c: c.literals.add().CopyFrom(c.literals[0]),
                            "columns.literals", "literal operands"),
    "param_given_twice": (lambda c: (c.params.insert(5, c.params[5]), c.param_count.__setitem__(5, 2)),
                          "eqn[5].params", "params given twice"),
    "effects_out_of_order": (lambda c: (c.effects.add(eqn=5), c.effects.add(eqn=3)),
                             "columns.effects[1]", "not an eqn after 5"),
    # (the 4th literal, of eqn 6: x * 2.0 and sin in turn)
    "literal_value_refers_out_of_range": (
        lambda c: c.literals[3].value.CopyFrom(
            pb.Value(tuple=pb.ValueList(items=[pb.Value(int=1), pb.Value(aval=999)]))),
        "eqn[6].invars[1]", "aval index 999 is out of range"),
    "literal_value_empty": (lambda c: c.literals[3].value.CopyFrom(pb.Value()),
                            "eqn[6].invars[1]", "empty value"),
}


@pytest.mark.parametrize("n", [300, 600])  # (checked in Python, and as NumPy arrays from 512)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_columns_are_refused_with_their_path(name, n):
  mutate, path, fragment = HOSTILE[name]
  m = _module(n)
  mutate(_root(m).columns)
  data = m.SerializeToString()
  with pytest.raises(jp.DecodeError) as e:
    jp.loads(data)
  assert e.value.path.startswith(path), (e.value.path, e.value.message)
  assert fragment in e.value.message, e.value.message
  report = jp.check(data)
  assert not report.ok
  assert report.errors[0] == (e.value.path, e.value.message)


def test_eqns_and_columns_both_are_refused():
  m = _module()
  j = _root(m)
  j.eqns.add(primitive=0)
  with pytest.raises(jp.DecodeError, match="columns too") as e:
    jp.loads(m.SerializeToString())
  assert e.value.path == "columns"


def test_info_counts_either_form_alike(monkeypatch):
  cj = corpus.trace(corpus.get("mlp_train_step"))
  by_messages = info.module_info(pb.Module.FromString(jp.dumps(cj)))
  monkeypatch.setattr(columns, "COLUMNS_FROM", 0)
  by_columns = info.module_info(pb.Module.FromString(jp.dumps(cj)))
  for key in ("eqns", "by_primitive", "sharing", "out_avals"):
    assert by_columns[key] == by_messages[key], key
  assert by_columns["bytes"]["eqns"] < by_messages["bytes"]["eqns"]


def test_javascript_reader_reads_columns(tmp_path, monkeypatch):
  node = helpers.js_node("the JavaScript reader's tests")
  cj = corpus.trace(corpus.get("mlp_train_step"))
  (tmp_path / "messages.jaxpb").write_bytes(jp.dumps(cj))
  monkeypatch.setattr(columns, "COLUMNS_FROM", 0)
  (tmp_path / "columns.jaxpb").write_bytes(jp.dumps(cj))
  out = {}
  for form in ("messages", "columns"):
    r = subprocess.run([node, str(helpers.JS_DIR / "read_jaxpb.mjs"), str(tmp_path / f"{form}.jaxpb")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out[form] = r.stdout
  # (the first line names the format version: 1.3 for columns)
  assert out["columns"].split("\n", 1)[1] == out["messages"].split("\n", 1)[1]
  r = subprocess.run([node, str(helpers.JS_DIR / "read_jaxpb.mjs"), "--json", str(tmp_path / "columns.jaxpb")],
                     capture_output=True, text=True, timeout=120)
  assert json.loads(r.stdout)["eqns"]["stored"] == info.module_info(
      pb.Module.FromString((tmp_path / "columns.jaxpb").read_bytes()))["eqns"]["stored"]


@pytest.mark.parametrize("long_lived", [0, 1 << 40], ids=["moved_to_the_oldest_generation", "left"])
def test_the_cycle_collector_is_left_as_it_was(monkeypatch, long_lived):
  from jaxpr_proto.codec import state
  monkeypatch.setattr(state, "_LONG_LIVED", long_lived)
  cj = _chain(300)
  frozen = gc.get_freeze_count()  # (what the process froze itself stays frozen)
  assert gc.isenabled()
  data = jp.dumps(cj)
  assert str(jp.loads(data)) == str(cj)
  assert gc.isenabled() and gc.get_freeze_count() == frozen
  gc.disable()
  try:
    jp.loads(jp.dumps(cj))
    assert not gc.isenabled() and gc.get_freeze_count() == frozen
  finally:
    gc.enable()


def test_objects_the_process_froze_stay_frozen(monkeypatch):
  from jaxpr_proto.codec import state
  monkeypatch.setattr(state, "_LONG_LIVED", 0)
  gc.freeze()
  try:
    frozen = gc.get_freeze_count()
    assert frozen
    jp.loads(jp.dumps(_chain(300)))
    assert gc.get_freeze_count() == frozen
  finally:
    gc.unfreeze()
