"""Versions: format major.minor gating, required features, minimum stamps,
namespace versions and the per-primitive upgraders between JAX releases."""
from __future__ import annotations

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import jaxpr_proto as jp
from jaxpr_proto import compat
from jaxpr_proto.codec import decoder
from jaxpr_proto.compat import upgrade
from jaxpr_proto.wire import versions
from jaxpr_proto.v1 import jaxpr_pb2 as pb

THIS_JAX = jax.__version__


def _program(x, y):
  c, ys = jax.lax.scan(lambda c, v: (c * v, c + v), 1.0, x)
  return jnp.sin(ys) * y + c


def _args():
  return np.arange(1, 4, dtype=np.float32), np.float32(2.0)


@pytest.fixture
def m() -> pb.Module:
  return jp.encode(jax.make_jaxpr(_program)(*_args()))


def _run(cj):
  return jax.extend.core.jaxpr_as_fun(cj)(*_args())


def _set_jax_version(m, v):
  for ns in m.namespaces:
    if ns.namespace == "jax":
      ns.version = v
  m.producer.jax_version = v


# --- the format version -----------------------------------------------------------

def test_writers_stamp_the_minimum_version(m):
  assert (m.format_version.major, m.format_version.minor) == versions.required_version(m)
  assert (m.format_version.major, m.format_version.minor) == (1, 0)


def test_required_version_picks_the_smallest_covering_minor(m, monkeypatch):
  monkeypatch.setattr(versions, "MINOR_ADDITIONS", [
      (1, "Module.symbolic_scope", lambda mod: mod.HasField("symbolic_scope")),
      (3, "Module.function", lambda mod: mod.HasField("function")),
  ])
  assert versions.required_version(m) == (1, 0)
  m.symbolic_scope.constraints.append("b >= 1")
  assert versions.required_version(m) == (1, 1)
  m.function.name = "f"
  versions.stamp(m)
  assert (m.format_version.major, m.format_version.minor) == (1, 3)


@pytest.mark.parametrize("minor", [0, 1, 7, 2**31])
def test_reader_accepts_any_minor_of_its_major(m, minor):
  m.format_version.minor = minor
  data = m.SerializeToString()
  # a newer minor may add fields: an older reader skips them
  data += pb.Module(strings=["x"]).SerializeToString().replace(b"\x3a", b"\xfa\x06", 1)
  cj = jp.loads(data)
  np.testing.assert_allclose(_run(cj)[0], _program(*_args()))


@pytest.mark.parametrize("major", [2, 3, 100])
def test_newer_major_is_refused_clearly(m, major):
  m.format_version.major = major
  m.format_version.minor = 4
  with pytest.raises(jp.VersionError) as info:
    jp.loads(m.SerializeToString())
  e = info.value
  assert e.path == "format_version"
  assert f"{major}.4" in e.message and "1.x" in e.message and "upgrade jaxpr_proto" in e.message


def test_older_major_is_refused_clearly(m):
  m.format_version.major = 0
  m.format_version.minor = 9
  with pytest.raises(jp.VersionError, match="0.9.*no longer read"):
    jp.loads(m.SerializeToString())


def test_unknown_required_features_are_refused_by_name(m):
  m.required_features.extend(["quantum_dims", "holographic_avals"])
  with pytest.raises(jp.VersionError) as info:
    jp.loads(m.SerializeToString())
  e = info.value
  assert e.path == "required_features"
  assert "holographic_avals, quantum_dims" in e.message and "1.0" in e.message


def test_known_features_are_accepted(m, monkeypatch):
  monkeypatch.setattr(versions, "SUPPORTED_FEATURES", frozenset({"quantum_dims"}))
  m.required_features.append("quantum_dims")
  jp.loads(m.SerializeToString())


# --- namespace versions -----------------------------------------------------------

def test_namespaces_carry_the_jax_release(m):
  assert versions.namespace_versions(m) == {"jax": THIS_JAX}
  assert versions.jax_version_of(m) == THIS_JAX


def test_same_minor_other_patch_is_not_gated(m):
  _set_jax_version(m, "%d.%d.0" % compat.JAX_VERSION[:2])
  assert decoder.Decoder(m).upgrader is None  # no change between x.y.0 and this JAX
  jp.loads(m.SerializeToString())


def test_newer_jax_with_nothing_new_loads(m):
  _set_jax_version(m, "0.99.0")
  cj = jp.loads(m.SerializeToString())
  np.testing.assert_allclose(_run(cj)[0], _program(*_args()))


def test_newer_jax_param_this_jax_lacks_fails_naming_primitive_and_param(m):
  _set_jax_version(m, "0.99.0")
  sin = next(k for k, p in enumerate(m.primitives) if p.name == "sin")
  eqn = next(e for e in m.jaxprs[m.closed_jaxprs[m.root].jaxpr].eqns if e.primitive == sin)
  m.params.add(name="approximation_order", value=pb.Value(int=3))
  eqn.params.append(len(m.params) - 1)
  with pytest.raises(jp.VersionError) as info:
    jp.loads(m.SerializeToString())
  e = info.value
  assert "primitive sin has param 'approximation_order'" in e.message
  assert "JAX 0.99.0" in e.message and THIS_JAX in e.message
  assert e.path.endswith(".params.approximation_order")
  r = jp.check(m)
  assert any("approximation_order" in msg for _, msg in r.by_stage("versions")), r


def test_newer_jax_primitive_this_jax_lacks(m):
  _set_jax_version(m, "0.99.0")
  m.primitives[0].name = "hyperbolic_teleport"
  with pytest.raises(jp.UnknownPrimitiveError) as info:
    jp.loads(m.SerializeToString())
  assert isinstance(info.value, jp.VersionError)  # a newer JAX's primitive
  assert "jax::hyperbolic_teleport" in info.value.message
  assert "written by JAX 0.99.0" in info.value.message


def test_unparsable_jax_version_is_reported_by_the_checker(m):
  _set_jax_version(m, "banana")
  with pytest.raises(jp.DecodeError, match="namespace jax has no JAX version"):
    jp.loads(m.SerializeToString())
  r = jp.check(m)
  assert any("no JAX version" in msg for _, msg in r.errors), r


# --- upgraders ----------------------------------------------------------------------

def _scan_eqns(m):
  return [(j, e) for j in m.jaxprs for e in j.eqns if m.primitives[e.primitive].name == "scan"]


def _as_written_by_jax_0_9(m):
  """Rewrites a file of JAX 0.10 as JAX 0.9 would have written it."""
  _set_jax_version(m, "0.9.2")
  mul = {k for k, p in enumerate(m.primitives) if p.name == "mul"}
  out_dtype = {k for k, p in enumerate(m.params) if p.name == "out_dtype"}
  for j in m.jaxprs:
    for e in j.eqns:
      if e.primitive in mul:
        keep = [p for p in e.params if p not in out_dtype]
        del e.params[:]
        e.params.extend(keep)
  m.params.add(name="_split_transpose", value=pb.Value(bool=False))
  split = len(m.params) - 1
  for _, e in _scan_eqns(m):
    lin = pb.Value()
    lin.tuple.SetInParent()
    for _ in range(4):
      lin.tuple.items.add(bool=False)
    m.params.add(name="linear", value=lin)
    e.params.extend([len(m.params) - 1, split])
  return m


def test_file_of_older_jax_is_upgraded(m):
  cj_new = jp.loads(m.SerializeToString())
  old = _as_written_by_jax_0_9(m)
  dec = decoder.Decoder(old)
  assert dec.upgrader is not None and not dec.upgrader.newer
  cj = jp.loads(old.SerializeToString())
  assert str(cj) == str(cj_new)
  muls = [e for e in cj.jaxpr.eqns if e.primitive.name == "mul"]
  assert muls and all(e.params == {"out_dtype": None} for e in muls)
  scan = next(e for e in cj.jaxpr.eqns if e.primitive.name == "scan")
  assert "linear" not in scan.params and "_split_transpose" not in scan.params
  np.testing.assert_allclose(_run(cj)[0], _program(*_args()))
  assert jp.check(old).ok


def test_upgrader_unknown_param_of_older_jax(m):
  old = _as_written_by_jax_0_9(m)
  sin = next(k for k, p in enumerate(old.primitives) if p.name == "sin")
  eqn = next(e for j in old.jaxprs for e in j.eqns if e.primitive == sin)
  old.params.add(name="legacy_flag", value=pb.Value(bool=True))
  eqn.params.append(len(old.params) - 1)
  with pytest.raises(jp.VersionError, match="sin has param 'legacy_flag'.*no upgrader knows it"):
    jp.loads(old.SerializeToString())


def test_upgrader_directions():
  V = compat.parse_version
  up = upgrade.Upgrader(V("0.9.2"), V("0.10.2"))
  down = upgrade.Upgrader(V("0.10.2"), V("0.9.2"))
  assert not up.newer and down.newer
  # added params: a default when upgrading; dropped when it holds the default
  assert up.params("mul", {}, "e") == {"out_dtype": None}
  assert up.params("eig", {"compute_left_eigenvectors": True}, "e")["enable_eigvec_derivs"] is False
  assert down.params("mul", {"out_dtype": None}, "e") == {}
  with pytest.raises(jp.VersionError) as info:
    down.params("mul", {"out_dtype": np.dtype("float32")}, "eqn[3]")
  e = info.value
  assert "primitive mul has param out_dtype=" in e.message and "needs JAX >= 0.10.0" in e.message
  assert "JAX 0.10.2" in e.message and "JAX 0.9.2" in e.message
  assert e.path == "eqn[3].params.out_dtype"
  # removed params: dropped when upgrading, restored when downgrading
  assert up.params("scan", {"linear": (False,), "_split_transpose": False, "reverse": False}, "e") == {"reverse": False}
  restored = down.params("scan", {"reverse": False}, "e")
  assert restored["_split_transpose"] is False and restored["linear"] == ()
  # renamed params (with a conversion)
  mesh = jax.sharding.AbstractMesh((2,), ("x",))
  assert up.params("shard_map", {"manual_axes": frozenset({"x"}), "mesh": mesh}, "e") == \
      {"newly_manual_axes": frozenset({"x"}), "mesh": mesh}
  assert down.params("shard_map", {"newly_manual_axes": frozenset({"x"}), "mesh": mesh}, "e") == \
      {"manual_axes": frozenset({"x"}), "mesh": mesh}
  # renamed primitives
  assert up.primitive_name("ag_start") == "all_gather_start"
  assert down.primitive_name("all_gather_start") == "ag_start"
  assert up.primitive_name("sin") == "sin"
  # no changes between releases of one minor
  assert not upgrade.Upgrader(V("0.10.0"), V("0.10.2"))


def _param_table_pairs():
  """(older minor, newer minor) of consecutive JAX minors with param tables."""
  minors = list(compat.MINORS)
  return list(zip(minors, minors[1:]))


@pytest.mark.parametrize("old_minor,new_minor", _param_table_pairs(),
                         ids=lambda m: ".".join(map(str, m)))
def test_every_change_is_sound(old_minor, new_minor):
  """Each change of a JAX minor names a primitive of one of the two minors, and
  its params agree with the recorded param tables of the two; every
  difference of the two tables is covered by a change."""
  from jaxpr_proto.compat import param_tables
  old, new = param_tables.param_names(old_minor), param_tables.param_names(new_minor)
  assert old and new, "tools/param_names.py writes a table per JAX minor"
  changes = [c for c in upgrade.CHANGES if c.since[:2] == new_minor]
  for c in changes:
    if c.kind in ("rename_primitive", "rewrite"):
      continue
    if c.kind == "add_param":
      assert c.param in new.get(c.primitive, [c.param]) and c.param not in old.get(c.primitive, []), c
    elif c.kind == "remove_param":
      assert c.param in old.get(c.primitive, [c.param]) and c.param not in new.get(c.primitive, []), c
    elif c.kind == "rename_param":
      assert c.param in old.get(c.primitive, [c.param]) and c.new in new.get(c.primitive, [c.new]), c
  covered = {(c.primitive, c.param) for c in changes} | {(c.primitive, c.new) for c in changes}
  rewritten = {c.primitive for c in changes if c.kind == "rewrite"}
  # A param that a table records as optional (some eqns of JAX's own
  # harnesses leave it out) is no change when the other table never saw it.
  optional = {(prim, p) for schemas in (param_tables.param_schemas(old_minor),
                                        param_tables.param_schemas(new_minor))
              for prim, s in schemas.items() for p, tree in s.items() if "absent" in tree}
  for prim in set(old) & set(new):
    if prim in rewritten:
      continue
    for p in set(old[prim]) ^ set(new[prim]):
      assert (prim, p) in covered or (prim, p) in optional, (prim, p)


def test_renamed_types_are_aliased():
  assert upgrade.type_alias("jax::memory.Space") == "jax::core.MemorySpace"
  assert upgrade.type_alias("jax::core.MemorySpace") == "jax::memory.Space"
  assert upgrade.type_alias("jax::lax.slicing.GatherScatterMode") is None
  dec = decoder.Decoder(pb.Module())
  v = dec.value(pb.Value(enum=pb.EnumValue(type="jax::memory.Space", member="Host")), "p")
  assert v is compat.MemorySpace.Host


def test_parse_version():
  P = compat.parse_version
  assert P("0.10.2") == (0, 10, 2)
  assert P("0.10.3.dev20260101") == (0, 10, 3)
  assert P("0.9.0rc1") == (0, 9, 0)
  assert P("") == () and P("banana") == ()
  assert P("1" * 5000) == ()


@pytest.mark.parametrize("policy,record", [
    ("dots_saveable", ("jax::ad_checkpoint.DotsSaveable", {"only_if_no_batch_dims": False})),
    ("dots_with_no_batch_dims_saveable",
     ("jax::ad_checkpoint.DotsSaveable", {"only_if_no_batch_dims": True})),
    ("save_only_these_names", ("jax::ad_checkpoint.SaveOnlyTheseNames", {"saveable_names": {"h"}})),
    ("save_any_names_but_these", ("jax::ad_checkpoint.SaveAnyNamesButThese", {"names": {"h"}})),
])
def test_named_remat_policies_are_written_as_records(policy, record):
  """JAX 0.9 and 0.12 build these policies as closures, 0.10 and 0.11 as
  records: files always carry the records, so that they move between releases."""
  from jax.ad_checkpoint import checkpoint_name
  pol = getattr(jax.checkpoint_policies, policy)
  if policy.startswith("save_"):
    pol = pol("h")

  def f(w, x):
    h = checkpoint_name(jnp.tanh(x @ w), "h")
    return jnp.sum(jnp.sin(h @ w))
  g = jax.grad(jax.checkpoint(f, policy=pol))
  w, x = jnp.ones((3, 3)) * 0.1, jnp.arange(6.0).reshape(2, 3)
  cj = jax.make_jaxpr(g)(w, x)
  m = jp.encode(cj)
  recs = [p.value.record for p in m.params if p.name == "policy"]
  assert [r.type for r in recs] == [record[0]]
  fields = {f.name: f.value for f in recs[0].fields}
  for name, want in record[1].items():
    v = fields[name]
    got = v.bool if v.WhichOneof("kind") == "bool" else {i.str for i in v.frozenset.items}
    assert got == want
  cj2 = jp.decode(m)
  assert jp.dumps(cj2) == m.SerializeToString()
  from jax.extend.core import jaxpr_as_fun
  np.testing.assert_array_equal(jax.jit(jaxpr_as_fun(cj2))(w, x)[0], jax.jit(g)(w, x))
