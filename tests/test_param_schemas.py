"""The param schemas admit what JAX runs: JAX's own harnesses, its public
options (every sharding, precision and accuracy form), primitives that no
source binds; and still refuse a value of another kind, with its path.

The whole sweep of JAX's harnesses is tools/harnesses.py; a bounded sample
of it runs here.
"""
from __future__ import annotations

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import jaxpr_as_fun
from jax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

import jaxpr_proto as jp
from jaxpr_proto.check import param_schema

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import harnesses  # noqa: E402  (tools/harnesses.py)
import param_names  # noqa: E402  (tools/param_names.py)


def _round_trip(f, *args, grad: bool = False):
  """Saves and loads f's jaxpr; it must print as the original and give the
  same outputs bit for bit (and the same gradient, with `grad`)."""
  orig = jax.make_jaxpr(f)(*args)
  loaded = jp.loads(jp.dumps(orig))
  assert str(loaded) == str(orig)
  try:
    jax.jit(jaxpr_as_fun(orig))(*args)
  except ValueError as e:  # a program for another backend: so is the loaded one
    with pytest.raises(ValueError, match="not supported"):
      jax.jit(jaxpr_as_fun(loaded))(*args)
    assert "not supported" in str(e)
    return loaded
  want, got = jax.jit(jaxpr_as_fun(orig))(*args), jax.jit(jaxpr_as_fun(loaded))(*args)
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
  if grad:
    scalar = lambda g: lambda *a: sum(jnp.sum(o) for o in g(*a))
    gw = jax.grad(scalar(jaxpr_as_fun(orig)))(*args)
    gg = jax.grad(scalar(jaxpr_as_fun(loaded)))(*args)
    np.testing.assert_array_equal(gw, gg)
  return loaded


# --- JAX's own harnesses ----------------------------------------------------------

# Harnesses that bind a primitive without its optional params (`cbrt`
# without accuracy, `svd` without algorithm), or a primitive only they bind.
_NAMED = ("cbrt_shape_bfloat16", "svd_shape_float32_2_2", "iota_2x32_shape",
          "conj_dtypes_operand_float32_3_4_kwargs", "mul_dtypes_lhs_float32_20_20")

# Harnesses that leave out a param one of JAX's rules for the primitive needs
# (mul's transpose rule takes out_dtype, conj's input_dtype): JAX runs them
# forward, but cannot differentiate them (nor print mul's). The encoder
# completes such an eqn as lax.mul and lax.conj bind it.
_NEEDS = {"mul": "out_dtype", "conj": "input_dtype"}


def _sample():
  every = harnesses.harnesses(per_group=1)
  picked = [h for i, h in enumerate(every) if i % 6 == 0]
  picked += [h for h in harnesses.harnesses() if any(h.fullname.startswith(n) for n in _NAMED)]
  return sorted({h.fullname: h for h in picked}.values(), key=lambda h: h.fullname)


@pytest.mark.parametrize("harness", _sample(), ids=lambda h: h.fullname[:60])
def test_jax_harness_round_trips(harness):
  """Prints as the original, outputs, vmap and jvp the same bits
  (tools/harnesses.py checks all of them)."""
  verdict, message = harnesses.check(harness)
  assert verdict in ("ok", "jax_fails"), f"{verdict}: {message}"
  if harness.group_name in _NEEDS and message:
    assert message == harnesses.COMPLETED


@pytest.mark.parametrize("public, bare, args", [
    (lax.mul, lambda a, b: lax.mul_p.bind(a, b), (np.float32([1, 2, 3]), np.float32([4, 5, 6]))),
    (lax.conj, lambda a: lax.conj_p.bind(a), (np.float32([1, -2, 3]),)),
    (lax.conj, lambda a: lax.conj_p.bind(a), (np.complex64([1 + 2j, -3j]),)),
], ids=["mul", "conj_real", "conj_complex"])
def test_a_param_a_jax_rule_needs_is_completed_as_jax_binds_it(public, bare, args):
  """mul bound without out_dtype (as a harness of JAX's binds it) runs, but
  JAX can neither print nor differentiate it: the encoder writes the param
  lax.mul binds (conj's input_dtype: the operand's dtype, as lax.conj
  binds it). The loaded program is the public function's, bit for bit, and
  the same outputs as the bare one's."""
  bare_cj, public_cj = jax.make_jaxpr(bare)(*args), jax.make_jaxpr(public)(*args)
  assert _NEEDS[public.__name__] not in bare_cj.jaxpr.eqns[0].params
  loaded = jp.loads(jp.dumps(bare_cj))
  assert str(loaded) == str(public_cj)
  assert loaded.jaxpr.eqns[0].params == public_cj.jaxpr.eqns[0].params
  for a, b in zip(jaxpr_as_fun(bare_cj)(*args), jaxpr_as_fun(loaded)(*args)):
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
  scalar = lambda f: lambda *a: jnp.real(f(*a)[0]).sum()
  np.testing.assert_array_equal(jax.grad(scalar(jaxpr_as_fun(loaded)))(*args),
                                jax.grad(scalar(jaxpr_as_fun(public_cj)))(*args))


def test_a_file_that_leaves_out_such_a_param_is_refused(monkeypatch):
  """A file whose writer did not complete the eqn is refused, naming the
  param (the loader does not guess); cbrt's accuracy, which every rule of
  JAX's defaults, may be left out."""
  from jaxpr_proto.compat import public_defaults
  x = np.ones(3, np.float32)
  cj = jax.make_jaxpr(lambda a: lax.mul_p.bind(a, a))(x)
  monkeypatch.setattr(public_defaults, "completed", lambda eqn: None)
  data = jp.dumps(cj)
  monkeypatch.undo()
  with pytest.raises(jp.DecodeError, match="primitive mul lacks the param 'out_dtype'") as e:
    jp.loads(data)
  assert e.value.path == "eqn[0]"
  _round_trip(lambda a: lax.cbrt_p.bind(a), x, grad=True)


# --- JAX's public options, each family whole --------------------------------------

def test_sharded_jit_loads():
  """jit with NamedSharding and SingleDeviceSharding in and out shardings."""
  x = np.arange(8, dtype=np.float32)
  mesh = jax.make_mesh((1,), ("x",))
  for s in (NamedSharding(mesh, P("x")), SingleDeviceSharding(jax.devices()[0])):
    _round_trip(lambda y, s=s: jax.jit(lambda z: z * 2, in_shardings=s, out_shardings=s)(y), x,
                grad=True)


@pytest.mark.parametrize("precision", [
    lax.DotAlgorithmPreset.F32_F32_F32, lax.DotAlgorithmPreset.BF16_BF16_F32,
    lax.DotAlgorithmPreset.DEFAULT, lax.DotAlgorithm(np.float32, np.float32, np.float32),
    (lax.Precision.HIGHEST, lax.Precision.DEFAULT), "bfloat16"], ids=str)
def test_every_precision_form_loads(precision):
  a = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
  _round_trip(lambda x: lax.dot(x, x, precision=precision), a, grad=True)


@pytest.mark.parametrize("accuracy", [lax.Tolerance(atol=1e-5, rtol=1e-5, ulps=0),
                                      lax.Tolerance(ulps=2), lax.AccuracyMode.HIGHEST],
                         ids=lambda a: type(a).__name__)
def test_every_accuracy_form_loads(accuracy):
  x = np.linspace(0.1, 1, 4, dtype=np.float32)
  loaded = _round_trip(lambda y: lax.exp(y, accuracy=accuracy), x)
  got = loaded.jaxpr.eqns[0].params["accuracy"]
  assert type(got) is type(accuracy) and vars(got) == vars(accuracy) if isinstance(
      accuracy, lax.Tolerance) else got is accuracy


def test_a_bad_tolerance_is_refused():
  x = np.float32(1.0)
  data = jp.dumps(jax.make_jaxpr(lambda y: lax.exp(y, accuracy=lax.Tolerance(ulps=2)))(x))
  bad = data.replace(b"ulps", b"ulpz")
  with pytest.raises(jp.DecodeError, match="tolerance needs the fields atol, rtol and ulps") as e:
    jp.loads(bad)
  assert e.value.path.startswith("eqn[0].params.accuracy")


def test_params_are_judged_alike_in_a_process_s_later_programs():
  """What params alone show is memoized across programs by the params'
  values: the same bad params are refused again, and good ones that differ
  from them by a bit are not judged by them."""
  x = np.zeros((2, 3), np.float32)
  good = jp.dumps(jax.make_jaxpr(lambda y: lax.transpose(y, (1, 0)))(x))
  m = jp.proto.Module.FromString(good)
  (perm,) = [p.value for p in m.params if p.name == "permutation"]
  perm.tuple.items[1].int = 1  # (1, 1)
  bad = m.SerializeToString()
  for _ in range(2):
    with pytest.raises(jp.DecodeError, match="names an axis twice") as e:
      jp.loads(bad)
    assert e.value.path == "eqn[0].params.permutation"
    assert str(jp.loads(good)) == str(jax.make_jaxpr(lambda y: lax.transpose(y, (1, 0)))(x))


def test_reshard_over_an_explicit_mesh_loads():
  mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
  x = np.arange(4, dtype=np.float32)
  _round_trip(lambda y: jax.sharding.reshard(y, NamedSharding(mesh, P("x"))) * 2, x)


def test_run_state_loads():
  from jaxpr_proto.compat import common  # noqa: F401  (run_state is JAX-internal API)
  from jax._src.state.discharge import run_state

  def bump(ref):
    ref[...] = ref[...] * 2.0 + 1.0
  _round_trip(run_state(bump), np.arange(3, dtype=np.float32))


def test_a_value_of_an_unknown_family_is_refused_with_its_path():
  """A jit's in_shardings admits every Sharding, not a Precision."""
  x = np.float32(1.0)
  cj = jax.make_jaxpr(lambda y: jax.jit(lambda z: z + 1)(y))(x)
  e = cj.jaxpr.eqns[0]
  bad = cj.replace(jaxpr=cj.jaxpr.replace(
      eqns=[e.replace(params={**e.params, "in_shardings": (lax.Precision.HIGH,)})]))
  with pytest.raises(jp.DecodeError, match="jit's in_shardings is element 0: a Precision where "
                                           "it takes .*NamedSharding") as err:
    jp.loads(jp.dumps(bad))
  assert err.value.path == "eqn[0].params.in_shardings"


# --- how the generator widens, and primitives no source binds -----------------------

def test_widen_admits_each_family_whole():
  families = {"precision": {"None": None, "tuple": {"enum:Precision": None},
                            "enum:DotAlgorithmPreset": None},
              "sharding": {"obj:NamedSharding": None, "obj:SingleDeviceSharding": None}}
  schemas = {
      "dot_general": {"precision": {"None": None, "tuple": {"enum:Precision": None}},
                      "dimension_numbers": {"tuple": {"tuple": {"int": None}}}},
      "jit": {"in_shardings": {"tuple": {"obj:UnspecifiedValue": None, "obj:NamedSharding": None}},
              "out_shardings": {"tuple": {"obj:UnspecifiedValue": None}}},
      "sharding_constraint": {"sharding": {"obj:NamedSharding": None}},
      "broadcast_in_dim": {"sharding": {"None": None}, "shape": {"tuple": {"int": None}}},
      "reduce_sum": {"axes": {"tuple": {"int": None}}, "out_sharding": {"None": None}},
  }
  param_names.widen(schemas, families)
  assert "enum:DotAlgorithmPreset" in schemas["dot_general"]["precision"]
  assert schemas["dot_general"]["dimension_numbers"] == {"tuple": {"tuple": {"int": None}}}
  assert "obj:SingleDeviceSharding" in schemas["jit"]["in_shardings"]["tuple"]
  # UNSPECIFIED stands for no value: alone, it makes no family
  assert schemas["jit"]["out_shardings"] == {"tuple": {"obj:UnspecifiedValue": None}}
  assert "obj:UnspecifiedValue" not in schemas["sharding_constraint"]["sharding"]
  # by name: broadcast_in_dim's sharding, as sharding_constraint's
  assert "obj:NamedSharding" in schemas["broadcast_in_dim"]["sharding"]
  # a param of another name, left None, stays so
  assert schemas["reduce_sum"]["out_sharding"] == {"None": None}
  assert schemas["reduce_sum"]["axes"] == {"tuple": {"int": None}}


def test_a_primitive_no_source_binds_is_checked_by_its_params_names():
  """A JAX primitive without a recorded schema: a param that other
  primitives have admits what it admits there, and nothing else."""
  from jaxpr_proto.codec.names import REGISTRY
  unbound = sorted(n for (ns, n) in REGISTRY.all()
                   if ns == "jax" and param_schema.schema(n) is None)
  if not unbound:
    pytest.skip("every JAX primitive of this process has a recorded schema")
  name = unbound[0]
  assert list(param_schema.errors(name, {"axis_name": ("i",), "unheard_of": 3})) == []
  errs = list(param_schema.errors(name, {"axis_name": 1.5}))
  assert errs and errs[0][0] == "axis_name" and "a float where it takes" in errs[0][1]
  # a user's primitive is the reader's to trust
  assert list(param_schema.errors(name, {"axis_name": 1.5}, by_name=False)) == []


def test_every_jax_primitive_is_in_the_table():
  """Every primitive JAX's public and optional modules define has a recorded
  schema or is listed as bound by no source (checked by its params' names):
  a newer JAX's new primitive shows up here, as a difference of the table
  (tools/param_names.py writes it), not as refusals."""
  from jaxpr_proto import compat
  from jaxpr_proto.compat import param_tables
  table = (set(param_tables.param_schemas(compat.JAX_VERSION))
           | param_tables.unbound_primitives(compat.JAX_VERSION))
  missing = sorted(param_names.jax_primitives() - table)
  assert not missing, f"not in compat's table (run tools/param_names.py): {missing}"


# --- remat policies: every factory of jax.checkpoint_policies -----------------------

def _offloading_grad_program():
  from jax.ad_checkpoint import checkpoint_name
  policy = jax.checkpoint_policies.save_and_offload_only_these_names(
      names_which_can_be_saved=["kept"], names_which_can_be_offloaded=["moved"],
      offload_src="device", offload_dst="pinned_host")

  def f(x):
    y = checkpoint_name(jnp.sin(x) * 2, "moved")
    return (checkpoint_name(jnp.cos(y), "kept") * y).sum()
  return jax.checkpoint(f, policy=policy)


def test_an_offloading_remat_policy_saves_and_loads():
  """The policy for offloading activations to host memory (a closure of
  save_and_offload_only_these_names, as every factory of
  jax.checkpoint_policies is written: by its arguments)."""
  x = np.linspace(-1, 1, 6, dtype=np.float32)
  f = _offloading_grad_program()
  loaded = _round_trip(f, x)
  np.testing.assert_array_equal(jax.grad(lambda a: jaxpr_as_fun(loaded)(a)[0])(x), jax.grad(f)(x))
  _round_trip(jax.grad(f), x)


def test_an_offloading_policy_to_an_unknown_memory_kind_is_refused():
  x = np.linspace(-1, 1, 6, dtype=np.float32)
  m = jp.encode(jax.make_jaxpr(_offloading_grad_program())(x))
  # (an extension of the factory's arguments, checked by field, in JAX 0.10 and
  # 0.12; JAX 0.11's record SaveAndOffloadOnlyTheseNames, checked as a whole)
  v = next(p.value for p in m.params if p.name == "policy")
  fields = v.extension.fields if v.HasField("extension") else v.record.fields
  next(f for f in fields if f.name == "offload_dst").value.str = "nowhere"
  with pytest.raises(jp.DecodeError, match="offload_dst must be one of the memory kinds") as e:
    jp.loads(m.SerializeToString())
  assert e.value.path.endswith("params.policy.offload_dst" if v.HasField("extension") else "params.policy")


# --- placements that fit, and only where JAX takes them -----------------------------

def _with_params(cj, **params):
  e = cj.jaxpr.eqns[0]
  return cj.replace(jaxpr=cj.jaxpr.replace(
      eqns=[e.replace(params={**e.params, **params}), *cj.jaxpr.eqns[1:]]))


def test_a_placement_must_fit_its_value_and_be_one_jax_takes_there():
  """A jit's in_shardings of a spec past its operand's rank (device fuzz seed
  811: JAX's lowering failed), a sharding_constraint to UNSPECIFIED (only jit
  takes it) or over an abstract mesh (a type's sharding, not a placement):
  each loaded and then failed inside JAX; each is refused with its path."""
  from jax._src import sharding_impls  # (UNSPECIFIED has no public name)
  mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
  x = np.ones(4, np.float32)
  named = NamedSharding(mesh, P("x"))
  jit = jax.make_jaxpr(lambda v: jax.jit(lambda y: y * 2, in_shardings=named)(v))(x)
  constraint = jax.make_jaxpr(lambda v: jax.lax.with_sharding_constraint(v, named))(x)
  cases = [
      (_with_params(jit, in_shardings=(NamedSharding(mesh, P("x", None)),)),
       "eqn[0].params.in_shardings", r"in_shardings\[0\] does not fit float32\[4\]"),
      (_with_params(jit, in_shardings=(NamedSharding(mesh.abstract_mesh, P("x")),)),
       "eqn[0].params.in_shardings", "a NamedSharding@AbstractMesh where it takes"),
      (_with_params(constraint, sharding=sharding_impls.UNSPECIFIED),
       "eqn[0].params.sharding", "a UnspecifiedValue where it takes"),
      (_with_params(constraint, sharding=NamedSharding(mesh.abstract_mesh, P("x"))),
       "eqn[0].params.sharding", "a NamedSharding@AbstractMesh where it takes"),
  ]
  for bad, path, match in cases:
    with pytest.raises(jp.DecodeError, match=match) as e:
      jp.loads(jp.dumps(bad))
    assert e.value.path == path
  # the same eqns with placements that fit load and run
  for good in (_with_params(jit, in_shardings=(SingleDeviceSharding(jax.devices()[0]),)),
               _with_params(constraint, sharding=SingleDeviceSharding(jax.devices()[0]))):
    np.testing.assert_array_equal(jax.jit(jaxpr_as_fun(jp.loads(jp.dumps(good))))(x),
                                  jax.jit(jaxpr_as_fun(good))(x))


@pytest.mark.parametrize("policy, record", [
    (jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host"),
     "jax::ad_checkpoint.OffloadDotWithNoBatchDims"),
    (jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=["kept"], names_which_can_be_offloaded=["moved"],
        offload_src="device", offload_dst="pinned_host"),
     "jax::ad_checkpoint.SaveAndOffloadOnlyTheseNames"),
], ids=["offload_dot", "save_and_offload"])
def test_offloading_policy_records_of_jax_0_11_load_under_every_jax(policy, record):
  """JAX 0.11 writes the offloading policies as records, which 0.10 and 0.12
  build as closures: a file of either form loads under each release, and
  differentiates as the original."""
  from jaxpr_proto.v1 import jaxpr_pb2 as pb
  f = jax.checkpoint(lambda x: jnp.sin(x @ x) @ x, policy=policy)
  x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(2, 2)
  m = jp.encode(jax.make_jaxpr(f)(x))
  v = next(p.value for p in m.params if p.name == "policy")
  if v.HasField("extension"):  # JAX 0.10, 0.12: the factory's arguments; as 0.11 writes it
    fields = list(v.extension.fields)
    v.Clear()
    v.record.type = record
    for fld in fields:
      v.record.fields.add().CopyFrom(fld)
  assert v.record.type == record
  loaded = jaxpr_as_fun(jp.loads(m.SerializeToString()))
  np.testing.assert_allclose(jax.grad(lambda a: loaded(a)[0].sum())(x),
                             jax.grad(lambda a: f(a).sum())(x), rtol=1e-6)
  bad = next(f for f in v.record.fields if f.name == "offload_src")
  bad.value.str = "pinned_host"
  with pytest.raises(jp.DecodeError, match="offload_src must be one of the memory kinds") as e:
    jp.loads(m.SerializeToString())
  assert e.value.path.startswith(f"eqn[0].params.policy")


_UINT64_GATHER = """
import json, jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, jaxpr_proto as jp
from jax.extend.core import jaxpr_as_fun
x, i = jnp.arange(10, dtype=jnp.uint64), np.array([1, 12])
f = lambda x, i: x.at[i].get(mode="fill")  # out of bounds: uint64's largest, 2**64-1
cj = jax.make_jaxpr(f)(x, i)
c2 = jp.loads(jp.dumps(cj))
bad = cj.jaxpr.eqns[-1].replace(params={**cj.jaxpr.eqns[-1].params, "fill_value": 1 << 64})
refused = None
try:
  jp.loads(jp.dumps(jax.extend.core.ClosedJaxpr(cj.jaxpr.replace(eqns=[*cj.jaxpr.eqns[:-1], bad]), cj.consts)))
except jp.DecodeError as e:
  refused = [e.path, e.message]
print(json.dumps({"same": str(c2) == str(cj), "out": np.asarray(jaxpr_as_fun(c2)(x, i)[0]).tolist(),
                  "want": np.asarray(f(x, i)).tolist(), "refused": refused}))
"""


def test_a_uint64_gather_fill_value_loads():
  """JAX's x64 harness gather_dtypes_shape_uint64: a fill_value of 2**64-1
  (it was refused as an int past int64); one past uint64 is still refused."""
  from tests.helpers import run_json
  got = run_json(_UINT64_GATHER)
  assert got["same"] and got["out"] == got["want"] == [1, (1 << 64) - 1]
  assert got["refused"] and "fill_value" in got["refused"][0] + got["refused"][1], got["refused"]
