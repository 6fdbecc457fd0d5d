"""`jp.check`: structure, params, versions and types, with all errors and paths."""
from __future__ import annotations

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import jaxpr_proto as jp
from jaxpr_proto.check import checker
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _program(x, y):
  z = jax.lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
  s = jax.lax.scan(lambda c, v: (c + v, c * v), 0.0, x)[1]
  return jnp.sin(z) + y * np.arange(3, dtype=np.float32) + s


@pytest.fixture(scope="module")
def cj():
  return jax.make_jaxpr(_program)(np.ones(3, np.float32), 2.0)


@pytest.fixture
def m(cj) -> pb.Module:
  return jp.encode(cj)


def _root(m):
  return m.jaxprs[m.closed_jaxprs[m.root].jaxpr]


def _new_aval(m, dtype=pb.DTYPE_INT32, shape=(7,)):
  m.avals.add().shaped_array.CopyFrom(
      pb.ShapedArray(dtype=dtype, shape=[pb.Dim(constant=d) for d in shape]))
  return len(m.avals) - 1


def test_accepts_every_input_form(cj, m, tmp_path):
  data = m.SerializeToString()
  path = tmp_path / "f.jaxpb"
  path.write_bytes(data)
  for x in (data, bytearray(data), memoryview(data), m, str(path), path, cj,
            jp.Function.from_closed_jaxpr(cj)):
    r = jp.check(x)
    assert r.ok, (type(x), r)
    assert r.stages == list(checker.STAGES)
    assert r.errors == [] and bool(r) and str(r).startswith("ok")
  with pytest.raises(TypeError):
    jp.check(3)


def test_report_and_check_error(m):
  _root(m).eqns[0].invars[0].var = 999
  _root(m).invars[0].aval = 10**6
  r = jp.check(m)
  assert not r.ok and not bool(r)
  assert ("eqn[0].invars[0]", "variable id 999 is used before it is defined") in r.errors
  assert ("invars[0]", "aval index 1000000 is out of range (table avals has %d)" % len(m.avals)) in r.errors
  assert r.stages == ["structure"]  # structure errors stop the check
  assert set(r.error_stages) == {"structure"}
  assert r.by_stage("structure") == r.errors
  text = r.format()
  assert "[structure] eqn[0].invars[0]" in text and "2 error(s)" in text
  with pytest.raises(jp.CheckError) as info:
    jp.check(m, raise_on_error=True)
  e = info.value
  assert isinstance(e, jp.DecodeError)
  assert e.errors == r.errors
  assert e.path == r.errors[0][0]
  assert "variable id 999" in str(e) and "aval index 1000000" in str(e)


def test_collects_all_structure_errors(m):
  j = _root(m)
  j.eqns[1].outvars[0].var.id = j.invars[0].id  # not SSA
  j.eqns[2].primitive = 77                       # out of range
  j.eqns[0].params.append(4000)                  # out of range
  m.frames[0].function = 10**5
  m.tracebacks[1].frames.append(10**5)
  j.eqns[0].context = 9
  r = jp.check(m)
  paths = [p for p, _ in r.errors]
  for want in ("eqn[1].outvars[0]", "eqn[2].primitive", "eqn[0].params[%d]" % (len(j.eqns[0].params) - 1),
               "frames[0].function", "tracebacks[1].frames[%d]" % (len(m.tracebacks[1].frames) - 1),
               "eqn[0].context"):
    assert want in paths, (want, r)


def test_operands_and_binders_of_no_kind(m):
  j = _root(m)
  k = next(k for k, e in enumerate(j.eqns) if e.invars and e.invars[0].HasField("var"))
  j.eqns[k].invars[0].Clear()
  j.eqns[-1].outvars[0].Clear()
  r = jp.check(m)
  assert (f"eqn[{k}].invars[0]", "empty operand") in r.errors
  assert (f"eqn[{len(j.eqns) - 1}].outvars[0]", "empty output binder") in r.errors
  with pytest.raises(jp.DecodeError, match="empty operand") as e:
    jp.loads(m.SerializeToString())
  assert e.value.path == f"eqn[{k}].invars[0]"


def test_structure_paths_reach_into_sub_jaxprs(m):
  branch = next(p for p in m.params if p.name == "branches")
  sub = m.jaxprs[m.closed_jaxprs[branch.value.tuple.items[1].closed_jaxpr].jaxpr]
  sub.outvars[0].var = 4242
  body = next(p for p in m.params if p.name == "jaxpr" and p.value.WhichOneof("kind") == "closed_jaxpr")
  scan_body = m.jaxprs[m.closed_jaxprs[body.value.closed_jaxpr].jaxpr]
  scan_body.eqns[0].invars[0].var = 4343
  r = jp.check(m)
  got = dict(r.errors)
  cond_k = [k for k, e in enumerate(_root(m).eqns) if m.primitives[e.primitive].name == "cond"][0]
  scan_k = [k for k, e in enumerate(_root(m).eqns) if m.primitives[e.primitive].name == "scan"][0]
  assert got[f"eqn[{cond_k}].params.branches[1].outvars[0]"] == "variable id 4242 is used before it is defined"
  assert got[f"eqn[{scan_k}].params.jaxpr.eqn[0].invars[0]"] == "variable id 4343 is used before it is defined"


def test_unreached_table_entries_are_checked_too(m):
  j = m.jaxprs.add()
  j.outvars.add(var=5)
  m.avals.add().ref.inner = 10**4
  r = jp.check(m)
  paths = dict(r.errors)
  assert paths[f"jaxprs[{len(m.jaxprs) - 1}].outvars[0]"] == "variable id 5 is used before it is defined"
  assert f"avals[{len(m.avals) - 1}].ref.inner" in paths
  # Loading refuses them too: loads and check agree on every file.
  with pytest.raises(jp.DecodeError) as info:
    jp.loads(m.SerializeToString())
  assert (info.value.path, info.value.message) in r.errors


def test_reference_cycle(m):
  branch = next(p for p in m.params if p.name == "branches")
  branch.value.tuple.items[0].closed_jaxpr = m.root
  r = jp.check(m)
  assert any("contains itself" in msg and "jaxpr" in msg for _, msg in r.errors), r


def test_params_stage_collects_all_param_errors(m):
  # Two bad params on two eqns, and a bad aval: all reported in one run.
  for p in m.params:
    if p.name == "axes":
      p.value.Clear()
      p.value.enum.type = "os.system"
    if p.name == "new_dtype":
      p.value.dtype.dtype = 4321
  m.avals[_new_aval(m)].shaped_array.dtype = 999
  r = jp.check(m)
  assert r.stages == ["structure", "params", "versions"]
  msgs = [msg for _, msg in r.by_stage("params")]
  assert any("'os.system' is not allow-listed" in x for x in msgs), r
  assert any("dtype 4321" in x for x in msgs), r
  paths = [p for p, _ in r.by_stage("params")]
  assert any(p.endswith(".params.axes") for p in paths), paths


def test_params_stage_unknown_primitive(m):
  m.primitives[0].name = "no_such_primitive"
  r = jp.check(m)
  assert any("unknown primitive jax::no_such_primitive" in msg for _, msg in r.errors), r
  assert r.error_stages[0] == "params"


def test_param_codec_schema():
  @jax.custom_jvp
  def f(x):
    return jnp.sin(x)
  f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * t[0]))
  m = jp.encode(jax.make_jaxpr(f)(1.0))
  p = next(p for p in m.params if p.name == "jvp_jaxpr_fun")
  p.value.Clear()
  p.value.str = "lambda: os.system('x')"
  r = jp.check(m)
  assert ("eqn[0].params.jvp_jaxpr_fun", "expected a custom rule reference") in r.errors


def test_versions_stage(m):
  m.required_features.append("quantum_dims")
  m.namespaces.add(namespace="jax", version="0.1.0")  # a second, different version
  r = jp.check(m)
  assert r.stages == ["structure", "params", "versions"]
  msgs = [msg for _, msg in r.by_stage("versions")]
  assert any("quantum_dims" in x for x in msgs), r
  assert any("has two versions" in x for x in msgs), r


def test_future_major_reports_only_the_version(m):
  m.format_version.major = 2
  _root(m).eqns[0].invars[0].var = 999  # not reported: v2's structure is not ours
  r = jp.check(m)
  assert r.stages == ["versions"]
  assert len(r.errors) == 1 and r.errors[0][0] == "format_version"
  assert "2.0" in r.errors[0][1] and "1.x" in r.errors[0][1]


def test_types_stage(m):
  j = _root(m)
  sin = [e for e in j.eqns if m.primitives[e.primitive].name == "sin"][0]
  sin.outvars[0].var.aval = _new_aval(m)
  r = jp.check(m)
  assert r.stages == list(checker.STAGES)
  k = list(j.eqns).index(sin)
  assert [p for p, _ in r.errors] == [f"eqn[{k}]"]
  assert "inconsistently typed" in r.errors[0][1] and r.error_stages == ["types"]


def test_types_stage_in_sub_jaxprs_and_rules():
  """Errors inside sub-jaxprs are reported there, not again at the eqn that holds them."""
  @jax.custom_vjp
  def g(x):
    return jnp.sin(x)
  g.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, t: (jnp.abs(c * t),))

  def f(x):
    return jax.lax.cond(x > 0, lambda a: jnp.cos(a), lambda a: g(a), x)
  m = jp.encode(jax.make_jaxpr(f)(1.0))
  assert jp.check(m).ok
  branch = next(p for p in m.params if p.name == "branches")
  sub = m.jaxprs[m.closed_jaxprs[branch.value.tuple.items[0].closed_jaxpr].jaxpr]
  sub.eqns[0].outvars[0].var.aval = _new_aval(m)
  # inside the custom_vjp rule's bwd jaxpr (its signature still fits)
  rule = next(r for r in m.rules if r.WhichOneof("kind") == "vjp")
  bwd = m.jaxprs[m.closed_jaxprs[rule.vjp.bwd].jaxpr]
  bwd.eqns[0].outvars[0].var.aval = _new_aval(m, pb.DTYPE_INT8, (2, 2))
  r = jp.check(m)
  paths = [p for p, _ in r.errors]
  cond_k = [k for k, e in enumerate(_root(m).eqns) if m.primitives[e.primitive].name == "cond"][0]
  assert f"eqn[{cond_k}].params.branches[0].eqn[0]" in paths, r
  assert f"eqn[{cond_k}]" not in paths, r
  assert any(p.startswith("rules[") and ".bwd" in p for p in paths), r


def test_params_stage_wrong_operand_count_of_custom_call():
  """JAX's custom_jvp_call type rule leaves the call's inputs unchecked; the params stage does not."""
  @jax.custom_jvp
  def f(x):
    return jnp.sin(x)
  f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * t[0]))
  m = jp.encode(jax.make_jaxpr(f)(1.0))
  e = _root(m).eqns[0]
  e.invars.append(e.invars[0])
  r = jp.check(m)
  assert r.errors == [("eqn[0].params.call_jaxpr", "call_jaxpr takes 1 inputs where the eqn gives it 2")], r
  assert r.error_stages == ["params"]
  with pytest.raises(jp.DecodeError, match="call_jaxpr takes 1 inputs where the eqn gives it 2"):
    jp.loads(m.SerializeToString())


def test_types_stage_collects_errors_of_several_jaxprs(m):
  j = _root(m)
  branch = next(p for p in m.params if p.name == "branches")
  for item in branch.value.tuple.items:
    sub = m.jaxprs[m.closed_jaxprs[item.closed_jaxpr].jaxpr]
    sub.eqns[0].outvars[0].var.aval = _new_aval(m)
  r = jp.check(m)
  assert len(r.errors) == 2, r


def test_types_in_shard_map_bodies_use_the_mesh_axes():
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))

  def f(x):
    return jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh,
                         in_specs=jax.sharding.PartitionSpec("x"),
                         out_specs=jax.sharding.PartitionSpec())(x)
  r = jp.check(jax.make_jaxpr(f)(np.ones(4, np.float32)))
  assert r.ok, r


def test_checks_function_signature(cj):
  fn = jp.Function.from_closed_jaxpr(cj)
  m = jp.encode(fn)
  assert jp.check(m).ok
  m.function.out_avals[0] = m.function.in_avals[0] if m.function.in_avals[0] != m.function.out_avals[0] \
      else _new_aval(m)
  if m.function.out_avals[0] == m.function.in_avals[0]:
    m.function.out_avals[0] = _new_aval(m)
  r = jp.check(m)
  assert any(p == "function.out_avals" for p, _ in r.errors), r


def test_bad_bytes():
  r = jp.check(b"\xff\xff\xff garbage")
  assert not r.ok and r.errors[0][1].startswith("not a valid .jaxpb file")


def test_max_errors(m):
  j = _root(m)
  for e in j.eqns:
    e.primitive = 1000
  r = jp.check(m, max_errors=2)
  assert len(r.errors) == 2 and r.truncated == len(j.eqns) - 2
  assert f"and {len(j.eqns) - 2} more" in r.format()


def test_cli_check(tmp_path, m, capsys):
  """`jaxpr-proto check FILE` (wired to checker.check by the CLI) exits 0 or 1."""
  from jaxpr_proto.cli import commands as cli
  good = tmp_path / "good.jaxpb"
  good.write_bytes(m.SerializeToString())
  _root(m).eqns[0].invars[0].var = 999
  bad = tmp_path / "bad.jaxpb"
  bad.write_bytes(m.SerializeToString())
  assert cli.main(["check", str(good)]) == 0
  capsys.readouterr()
  assert cli.main(["check", str(bad)]) == 1
  out = capsys.readouterr()
  assert "eqn[0].invars[0]" in out.out + out.err


def _with_params(cj, k, **params):
  """cj with its eqn k's params updated (as a file could declare them)."""
  eqns = list(cj.jaxpr.eqns)
  eqns[k] = eqns[k].replace(params={**eqns[k].params, **params})
  return jax.extend.core.ClosedJaxpr(cj.jaxpr.replace(eqns=eqns), cj.consts)


def test_fill_or_drop_gather_needs_a_fill_value():
  dnums = jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                         start_index_map=(0,))
  for dtype in (np.float32, np.int32, np.uint8):
    for mode in ("fill", "clip"):
      cj = jax.make_jaxpr(lambda x, i: jax.lax.gather(x, i, dnums, (1, 4), mode=mode))(
          np.zeros((6, 4), dtype), np.zeros((3, 1), np.int32))
      k = next(k for k, e in enumerate(cj.jaxpr.eqns) if e.primitive.name == "gather")
      assert jp.check(cj).ok
      r = jp.check(_with_params(cj, k, fill_value=None))
      if mode == "clip":  # only FILL_OR_DROP fills
        assert r.ok, r
      else:
        assert r.errors == [(f"eqn[{k}].params.fill_value",
                             "a FILL_OR_DROP gather needs a fill_value, not None")]


def test_ref_slices_fit_the_ref():
  from jax._src.state import indexing

  def f(x):
    r = jax.ref.new_ref(x)
    r[1:3] = jnp.zeros(2)
    return jax.ref.freeze(r)

  cj = jax.make_jaxpr(f)(np.ones(4, np.float32))
  k = next(k for k, e in enumerate(cj.jaxpr.eqns) if e.primitive.name == "swap")
  tree = cj.jaxpr.eqns[k].params["tree"]
  (idx,) = jax.tree_util.tree_unflatten(tree, [None] * tree.num_leaves)
  assert jp.check(cj).ok

  def with_indexer(shape=(4,), **slice_fields):
    s = indexing.Slice(**{"start": 1, "size": 2, "stride": 1, **slice_fields})
    t = indexing.NDIndexer((s,), shape, idx.int_indexer_shape)
    return jp.check(_with_params(cj, k, tree=jax.tree_util.tree_structure((t,))))

  where = f"eqn[{k}].params.tree"
  assert with_indexer(stride=2).ok  # 1, 3
  assert where not in dict(with_indexer(start=4, size=0).errors)  # (the types stage refuses it)
  for fields, message in [
      (dict(stride=2**62), "a slice of 2 at stride 4611686018427387904 from 1 overruns its dim of size 4"),
      (dict(start=3), "a slice of 2 at stride 1 from 3 overruns its dim of size 4"),
      (dict(start=-1), "a slice's start -1 is outside its dim of size 4"),
      (dict(size=1, stride=2**40), "a slice's stride 1099511627776 is over int32's range"),
      (dict(shape=(2,)), "an indexer of shape (2,) indexes a ref of shape (4,)")]:
    r = with_indexer(**fields)
    assert (where, message) in r.errors, (fields, r)
