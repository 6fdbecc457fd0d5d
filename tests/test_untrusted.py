"""Decoding untrusted .jaxpb files: what decoding never does.

Decoding never executes code or imports anything, never crashes the
interpreter (segfault, RecursionError, MemoryError), never hangs, and keeps
its memory bounded by a small multiple of the file's size. A malformed file
raises `jp.DecodeError` (or a subclass) and nothing else, with the path of
the bad part. Each case below is one of the malformed files the issue lists;
tests/test_fuzz.py covers random ones.
"""
from __future__ import annotations

import sys
import time
import tracemalloc

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import jaxpr_proto as jp
from jaxpr_proto import compat
from jaxpr_proto.codec import state
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _program(x, y):
  z = jax.lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
  return jnp.sin(z) + y * np.arange(3, dtype=np.float32)


@pytest.fixture(scope="module")
def base() -> pb.Module:
  return jp.encode(jax.make_jaxpr(_program)(np.ones(3, np.float32), 2.0))


def _copy(m: pb.Module) -> pb.Module:
  out = pb.Module()
  out.CopyFrom(m)
  return out


def _root(m):
  return m.jaxprs[m.closed_jaxprs[m.root].jaxpr]


def _eqn_of(m, jaxpr, prim_name):
  for e in jaxpr.eqns:
    if m.primitives[e.primitive].name == prim_name:
      return e
  raise AssertionError(f"no {prim_name} eqn")


def _fails(data, *, match=None, path=None, cls=jp.DecodeError, max_s=5.0, max_bytes=None,
           trace_memory=True):
  """Loads `data` (bytes or Module): it must raise `cls`; returns the error.
  Its time is measured under tracemalloc (several times slower) unless not
  `trace_memory`."""
  if isinstance(data, pb.Module):
    data = data.SerializeToString()
  mods = set(sys.modules)
  if trace_memory:
    tracemalloc.start()
  t = time.perf_counter()
  try:
    with pytest.raises(cls) as info:
      jp.loads(data)
  finally:
    elapsed = time.perf_counter() - t
    if trace_memory:
      peak = tracemalloc.get_traced_memory()[1]
      tracemalloc.stop()
  e = info.value
  assert type(e).__module__ == "jaxpr_proto.errors", type(e)
  if match is not None:
    assert match in e.message, e
  if path is not None:
    assert e.path == path, e
  assert elapsed < max_s, f"took {elapsed:.1f}s"
  if trace_memory:
    limit = max_bytes if max_bytes is not None else 4_000_000 + 200 * len(data)
    assert peak < limit, f"peak memory {peak} bytes for a {len(data)}-byte file"
  assert set(sys.modules) == mods, f"decoding imported {set(sys.modules) - mods}"
  report = jp.check(data)  # the checker agrees, and raises nothing
  assert not report.ok, report
  return e


def test_base_program_loads(base):
  cj = jp.loads(base.SerializeToString())
  assert jp.check(base).ok
  x = np.ones(3, np.float32)
  np.testing.assert_allclose(jax.extend.core.jaxpr_as_fun(cj)(x, 2.0)[0], _program(x, 2.0))


# --- no code, no imports ------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("enum", pb.EnumValue(type="os.system", member="x")),
    ("record", pb.Record(type="subprocess.Popen", fields=[pb.RecordField(name="args", value=pb.Value(str="true"))])),
    ("extension", pb.Extension(codec="builtins.eval", fields=[pb.RecordField(name="name", value=pb.Value(str="1"))])),
    ("singleton", "builtins.exec"),
])
def test_names_from_the_file_are_never_imported_or_called(base, field, value):
  m = _copy(base)
  p = next(p for p in m.params if p.value.WhichOneof("kind") == "tuple")
  if isinstance(value, str):
    setattr(p.value, field, value)
  else:
    getattr(p.value, field).CopyFrom(value)
  _fails(m, match="")


def test_pytree_type_names_are_never_imported(base):
  m = _copy(base)
  p = next(p for p in m.params if p.value.WhichOneof("kind") == "tuple")
  node = p.value.treedef.root
  node.kind = pb.TREE_NODE_KIND_CUSTOM
  node.type = "collections.OrderedDict"
  _fails(m, match="is not registered")


def test_unknown_primitive_is_not_looked_up_in_modules(base):
  m = _copy(base)
  m.primitives[0].namespace, m.primitives[0].name = "os", "system"
  e = _fails(m, cls=jp.UnknownPrimitiveError)
  assert "os::system" in e.message and e.path


# --- size and depth ---------------------------------------------------------------------

def test_huge_shape_without_bytes_fails_fast_without_allocating(base):
  m = _copy(base)
  arr = m.closed_jaxprs[m.root].consts[0].array
  del arr.shape[:]
  arr.shape.extend([1 << 20, 1 << 20])  # 2**40 elements
  arr.data = b"\0" * 8
  e = _fails(m, match="expected 4398046511104", path="consts[0]", max_s=1.0, max_bytes=1_000_000)


@pytest.mark.parametrize("dtype", [pb.DTYPE_FLOAT0, pb.DTYPE_INT4, pb.DTYPE_BOOL])
def test_huge_shapes_of_other_kinds_fail_fast(base, dtype):
  m = _copy(base)
  arr = m.closed_jaxprs[m.root].consts[0].array
  arr.dtype = dtype
  del arr.shape[:]
  arr.shape.extend([1 << 20, 1 << 20])
  arr.data = b""
  _fails(m, max_s=1.0, max_bytes=1_000_000)


def test_huge_dims_overflowing_int64_products(base):
  m = _copy(base)
  arr = m.closed_jaxprs[m.root].consts[0].array
  del arr.shape[:]
  arr.shape.extend([2**62, 2**62, 0])
  arr.data = b""
  _fails(m, match="too large", max_s=1.0)


def test_huge_aval_shape_is_only_a_type(base):
  # An aval may declare any size: it is a type, nothing is allocated for it.
  m = _copy(base)
  sa = m.avals[_root(m).invars[0].aval].shaped_array
  sa.shape[0].constant = 2**40
  _fails(m, match="float32[1099511627776]", max_s=2.0, max_bytes=2_000_000)


def _deep_module(n: int) -> pb.Module:
  """jaxprs[i] holds a call eqn whose call_jaxpr is closed_jaxprs[i+1] (JAX
  0.11 has no closed_call: its eval_jaxpr takes the same param)."""
  m = pb.Module(format_version=pb.FormatVersion(major=1))
  call = "closed_call" if compat.JAX_VERSION[:2] < (0, 11) else "eval_jaxpr"
  m.primitives.add(namespace="jax", name=call)
  m.namespaces.add(namespace="jax", version=jax.__version__)
  m.tracebacks.add(), m.name_stacks.add(), m.contexts.add()
  for i in range(n):
    m.closed_jaxprs.add(jaxpr=i)
    j = m.jaxprs.add()
    if i + 1 < n:
      m.params.add(name="call_jaxpr", value=pb.Value(closed_jaxpr=i + 1))
      j.eqns.add(primitive=0, params=[i])
  return m


def test_sub_jaxprs_nested_100k_deep():
  m = _deep_module(100_000)
  # A hang guard, not a speed measure: about 5 s alone, more beside other
  # test workers on 2 cores; a walk quadratic in the depth takes hours.
  e = _fails(m, match=f"sub-jaxprs nested 99999 deep, deeper than {state.MAX_DEPTH}",
             max_s=60.0, trace_memory=False)
  assert e.path == ""  # the root's nesting


def test_checker_reports_deep_nesting():
  r = jp.check(_deep_module(5_000))
  assert [msg for _, msg in r.errors] == [f"sub-jaxprs nested 4999 deep, deeper than {state.MAX_DEPTH}"]


def test_nesting_within_the_limit_loads():
  cj = jp.loads(_deep_module(state.MAX_DEPTH).SerializeToString())
  assert jp.check(_deep_module(state.MAX_DEPTH)).ok
  assert len(cj.jaxpr.eqns) == 1
  assert not jp.check(_deep_module(state.MAX_DEPTH + 1)).ok  # (its innermost jaxpr empty)


def _nested_calls(n: int, *, chained: bool):
  """n levels of jit, each calling the level below twice: one after the
  other (a chain of 2**n sins), or side by side (2**n sins, chains of n)."""
  f = jnp.sin
  for _ in range(n):
    f = (lambda g: jax.jit((lambda x: g(g(x))) if chained else (lambda x: g(x) * g(x))))(f)
  return jp.dumps(jax.make_jaxpr(f)(1.0))


def test_shared_calls_make_a_chain_past_the_size_bound():
  # A 5 KB file of a 2**30-eqn chain (JAX's type check took minutes): no chain
  # is refused on load (docs/limits.md), but 2**30 eqns are past the size bound.
  from jaxpr_proto.check import bounds
  data = _nested_calls(30, chained=True)
  assert len(data) < 10_000
  path = ".".join(["eqn[0].params.jaxpr"] * 7)
  e = _fails(data, match=f"more than {bounds.MAX_INLINED_EQNS} eqns once each use of a "
                         "sub-jaxpr is counted", path=path)
  assert jp.check(data).errors == [(e.path, e.message)]


def test_shared_calls_inline_to_too_many_eqns():
  from jaxpr_proto.check import bounds
  _fails(_nested_calls(30, chained=False),
         match=f"more than {bounds.MAX_INLINED_EQNS} eqns once each use of a sub-jaxpr is counted")


def test_shared_calls_within_the_bounds_check_fast_and_run():
  # 2**20 sins inlined, in a chain of 21: each shared jaxpr is type-checked once.
  data = _nested_calls(20, chained=False)
  t = time.perf_counter()
  jp.loads(data)
  assert time.perf_counter() - t < 2.0
  assert jp.check(data).ok
  cj13 = jp.loads(_nested_calls(13, chained=True))  # a chain of 8192 sins
  x = np.float32(0.5)
  want = x
  for _ in range(2 ** 13):
    want = np.sin(want, dtype=np.float32)
  np.testing.assert_allclose(jax.jit(jax.extend.core.jaxpr_as_fun(cj13))(x)[0], want, rtol=1e-4)


def test_bad_eqn_in_a_shared_call_is_found(base):
  m = jp.encode(jax.make_jaxpr(lambda x: jax.jit(jnp.sin)(jax.jit(jnp.sin)(x)))(1.0))
  inner = m.jaxprs[m.closed_jaxprs[_eqn_param(m, _root(m).eqns[0], "jaxpr").closed_jaxpr].jaxpr]
  assert len(_root(m).eqns) == 2 and _eqn_param(m, _root(m).eqns[1], "jaxpr") == _eqn_param(
      m, _root(m).eqns[0], "jaxpr")  # one jaxpr, called twice
  sin = _eqn_of(m, inner, "sin")
  m.primitives.add().CopyFrom(m.primitives[sin.primitive])
  m.primitives[-1].name = "not"  # takes no floats, nor sin's accuracy
  sin.primitive = len(m.primitives) - 1
  _fails(m, match="primitive not does not take a param 'accuracy'",
         path="eqn[0].params.jaxpr.eqn[0].params.accuracy")


def _eqn_param(m, eqn, name):
  return next(m.params[q].value for q in eqn.params if m.params[q].name == name)


def test_own_jaxpr_anywhere_loads_the_same_program(base):
  """ClosedJaxpr.own_jaxpr only asks for a jaxpr object of its own: set on
  every entry (the root, cond's branches), the program is the same."""
  m = _copy(base)
  for c in m.closed_jaxprs:
    c.own_jaxpr = True
  cj, cj2 = jp.decode(base), jp.decode(m)
  assert str(cj2) == str(cj)
  args = (np.array([1.0, -2.0, 0.5], np.float32), np.float32(2.0))
  for a, b in zip(jax.extend.core.jaxpr_as_fun(cj2)(*args), jax.extend.core.jaxpr_as_fun(cj)(*args)):
    np.testing.assert_array_equal(a, b)


def test_bad_eqn_in_a_jaxpr_of_its_own_is_found(base):
  m = _copy(base)
  branches = next(p for p in m.params if p.name == "branches").value.tuple.items
  first, second = (m.closed_jaxprs[b.closed_jaxpr] for b in branches)
  second.jaxpr, second.own_jaxpr = first.jaxpr, True  # both branches: the first's jaxpr
  jp.decode(m)
  j = m.jaxprs[first.jaxpr]
  j.eqns[0].invars[0].var = j.eqns[0].outvars[0].var.id
  _fails(m, match="used before it is defined", path="eqn[3].params.branches[0].eqn[0].invars[0]")


def test_sub_jaxpr_that_refers_to_itself(base):
  m = _copy(base)
  p = next(p for p in m.params if p.name == "branches")
  p.value.tuple.items[0].closed_jaxpr = m.root
  _fails(m, match="jaxpr 0 contains itself (param 6 -> closed jaxpr 0", path="")
  errors = jp.check(m).errors
  assert any("contains itself" in msg for _, msg in errors), errors


def test_aval_that_refers_to_itself(base):
  m = _copy(base)
  ref = m.avals.add().ref
  ref.inner = len(m.avals) - 1
  ref.memory_space.none.SetInParent()
  ref.kind.none.SetInParent()
  _root(m).invars[0].aval = len(m.avals) - 1
  _fails(m, match=f"aval {len(m.avals) - 1} contains itself", path=f"avals[{len(m.avals) - 1}]")


def _deep_value(n: int) -> pb.Value:
  v = pb.Value()
  x = v
  for _ in range(n):
    x = x.tuple.items.add()
  x.int = 1
  return v


def _deep_tree(n: int) -> pb.Value:
  v = pb.Value()
  node = v.treedef.root
  for _ in range(n):
    node.kind = pb.TREE_NODE_KIND_TUPLE
    node = node.children.add()
  return v


@pytest.mark.parametrize("make", [_deep_value, _deep_tree], ids=["value", "pytree"])
def test_deeply_nested_messages(base, make):
  m = _copy(base)
  p = next(p for p in m.params if p.name == "axes")
  p.value.CopyFrom(make(3000))
  data = m.SerializeToString()
  e = _fails(data, match="not a valid .jaxpb file")  # protobuf's own depth limit
  assert "MaxDepth" in e.message or "depth" in e.message.lower()
  # A message built in memory has no such limit: the decoder's own limits hold.
  with pytest.raises(jp.DecodeError, match="nested too deeply"):
    jp.decode(m)
  assert not jp.check(m).ok


@pytest.mark.parametrize("leaf", ["int", "none"])
def test_a_leaf_just_past_the_depth_bound_is_refused_as_too_deep(base, leaf):
  """The walker skips leaves (no references in them) only within the
  bound: one nested a level deeper is still refused for its depth."""
  from jaxpr_proto.wire import walk
  for n, deep in ((walk.MAX_VALUE_DEPTH, False), (walk.MAX_VALUE_DEPTH + 1, True)):
    m = _copy(base)
    p = next(p for p in m.params if p.name == "axes")
    node = p.value
    node.Clear()
    for _ in range(n):
      node = node.tuple.items.add()
    if leaf == "int":
      node.int = 0
    else:
      node.none.SetInParent()
    errors = jp.check(m).errors
    assert errors and any("nested too deeply" in msg for _, msg in errors) == deep, errors[:1]


# --- references ----------------------------------------------------------------------

def _set_root(m, f):
  f(_root(m))
  return m


@pytest.mark.parametrize("edit,match,path", [
    (lambda m: setattr(_root(m).eqns[0].invars[0], "var", 999),
     "variable id 999 is used before it is defined", "eqn[0].invars[0]"),
    (lambda m: setattr(_root(m).invars[0], "aval", 10**6),
     "aval index 1000000 is out of range", "invars[0]"),
    (lambda m: setattr(_root(m).eqns[0], "primitive", 500),
     "primitive index 500 is out of range", "eqn[0].primitive"),
    (lambda m: _root(m).eqns[0].params.append(10**5),
     "param index 100000 is out of range", "eqn[0].params[2]"),
    (lambda m: setattr(_root(m).eqns[0], "traceback", 7777),
     "traceback index 7777 is out of range", "eqn[0].traceback"),
    (lambda m: setattr(_root(m).eqns[0], "name_stack", 7777),
     "name stack index 7777 is out of range", "eqn[0].name_stack"),
    (lambda m: setattr(_root(m).eqns[0], "context", 7777),
     "context index 7777 is out of range", "eqn[0].context"),
    (lambda m: setattr(m, "root", 55), "closed jaxpr index 55 is out of range", "root"),
    (lambda m: setattr(m.closed_jaxprs[m.root], "jaxpr", 55), "jaxpr index 55 is out of range",
     "closed_jaxprs[0].jaxpr"),
    (lambda m: setattr(next(p for p in m.params if p.name == "branches").value.tuple.items[1],
                       "closed_jaxpr", 4096),
     "closed jaxpr index 4096 is out of range", "eqn[3].params.branches[1]"),
    (lambda m: setattr(m.frames[0], "file", 10**6), "string index 1000000 is out of range",
     "frames[0].file"),
    (lambda m: m.tracebacks[1].frames.append(10**6), "frame index 1000000 is out of range",
     "tracebacks[1].frames[1]"),
    (lambda m: _root(m).eqns[0].effects.add(name="jax::ref_read", input_var=77),
     "refers to an undefined variable", "eqn[0].effects[0]"),
])
def test_references_out_of_range(base, edit, match, path):
  m = _copy(base)
  edit(m)
  _fails(m, match=match, path=path)


def test_variable_defined_twice(base):
  m = _copy(base)
  j = _root(m)
  j.eqns[1].outvars[0].var.id = j.invars[0].id
  _fails(m, match="defined twice (not SSA)", path="eqn[1].outvars[0]")


def test_variable_used_before_defined(base):
  m = _copy(base)
  j = _root(m)
  j.eqns[0].invars[0].var = j.eqns[2].outvars[0].var.id
  _fails(m, match="used before it is defined", path="eqn[0].invars[0]")


def test_outvar_used_before_defined_in_sub_jaxpr(base):
  m = _copy(base)
  branch = m.params[next(i for i, p in enumerate(m.params) if p.name == "branches")]
  sub = m.jaxprs[m.closed_jaxprs[branch.value.tuple.items[1].closed_jaxpr].jaxpr]
  sub.outvars[0].var = 4242
  _fails(m, match="variable id 4242", path="eqn[3].params.branches[1].outvars[0]")


# --- types -----------------------------------------------------------------------------

def test_wrong_number_of_operands(base):
  m = _copy(base)
  e = _eqn_of(m, _root(m), "sin")
  e.invars.append(e.invars[0])
  _fails(m, match="sin", path="eqn[4]")


def test_missing_operand(base):
  m = _copy(base)
  e = _eqn_of(m, _root(m), "add")
  del e.invars[1]
  _fails(m, match="add", path="eqn[7]")


def test_mismatched_output_aval(base):
  m = _copy(base)
  m.avals.add().shaped_array.CopyFrom(pb.ShapedArray(dtype=pb.DTYPE_INT32, shape=[pb.Dim(constant=7)]))
  _eqn_of(m, _root(m), "sin").outvars[0].var.aval = len(m.avals) - 1
  _fails(m, match="inconsistently typed", path="eqn[4]")


def test_mismatched_operand_aval(base):
  m = _copy(base)
  j = _root(m)
  m.avals.add().shaped_array.CopyFrom(pb.ShapedArray(dtype=pb.DTYPE_INT8, shape=[pb.Dim(constant=3)]))
  j.invars[1].aval = len(m.avals) - 1  # c: f32[] -> i8[3]
  _fails(m, match="inconsistently typed", path="eqn[5]")


def test_mismatched_type_in_sub_jaxpr(base):
  m = _copy(base)
  branch = next(p for p in m.params if p.name == "branches")
  sub = m.jaxprs[m.closed_jaxprs[branch.value.tuple.items[0].closed_jaxpr].jaxpr]
  m.avals.add().shaped_array.CopyFrom(pb.ShapedArray(dtype=pb.DTYPE_FLOAT32, shape=[pb.Dim(constant=5)]))
  sub.eqns[0].outvars[0].var.aval = len(m.avals) - 1
  _fails(m, match="inconsistently typed", path="eqn[3].params.branches[0].eqn[0]")


def test_literal_that_does_not_match_its_type(base):
  m = _copy(base)
  e = _eqn_of(m, _root(m), "gt")
  lit = next(a for a in e.invars if a.WhichOneof("kind") == "literal")
  m.avals.add().shaped_array.CopyFrom(pb.ShapedArray(dtype=pb.DTYPE_INT32, shape=[pb.Dim(constant=2)]))
  lit.literal.aval = len(m.avals) - 1
  _fails(m, match="is not of its type int32[2]", path=f"eqn[1].invars[{list(e.invars).index(lit)}]")


@pytest.mark.parametrize("kind, value, error", [
    # a TypedFloat of an integer dtype (JAX: "cannot convert float NaN to integer")
    (pb.ARRAY_KIND_TYPED_FLOAT, np.float64("nan").tobytes(), "a TypedFloat cannot have dtype int32"),
    # an int32 TypedInt of a 64-bit value (JAX: "TypedInt(...) out of bounds for int32")
    (pb.ARRAY_KIND_TYPED_INT, np.int64(1 << 40).tobytes(), "1099511627776 does not fit in int32"),
])
def test_typed_scalar_that_does_not_fit_its_dtype(kind, value, error):
  m = jp.encode(jax.make_jaxpr(lambda x: x + 3)(np.int32(1)))
  lit = next(a for a in _root(m).eqns[0].invars if a.WhichOneof("kind") == "literal")
  lit.literal.value.array.kind = kind
  lit.literal.value.array.data = value
  _fails(m, match=error, path="eqn[0].invars[1]")


def test_constant_that_does_not_match_its_variable(base):
  m = _copy(base)
  arr = m.closed_jaxprs[m.root].consts[0].array
  arr.dtype = pb.DTYPE_INT32
  _fails(m, match="constant does not match", path="consts[0]")


def test_unknown_param_name(base):
  # JAX's abstract evaluation of convert_element_type takes its params by
  # name (many rules take **params: see test_versions for files of another
  # JAX, whose params are checked against a table).
  m = _copy(base)
  e = _eqn_of(m, _root(m), "convert_element_type")
  m.params.add(name="frobnicate", value=pb.Value(int=3))
  e.params.append(len(m.params) - 1)
  _fails(m, match="primitive convert_element_type does not take a param 'frobnicate'",
         path="eqn[2].params.frobnicate")


def test_missing_param(base):
  m = _copy(base)
  e = _eqn_of(m, _root(m), "reduce_sum")
  del e.params[:]
  _fails(m, match="primitive reduce_sum lacks the param 'axes'", path="eqn[0]")


# --- values ----------------------------------------------------------------------------

@pytest.mark.parametrize("edit,match", [
    (lambda m: setattr(m.avals[0].shaped_array, "dtype", 999), "unknown or unsupported dtype 999"),
    (lambda m: setattr(m.avals[0].shaped_array, "dtype", pb.DTYPE_UNSPECIFIED), "DTYPE_UNSPECIFIED"),
    (lambda m: setattr(m.avals[0].shaped_array, "memory_space", 77), "unknown memory space 77"),
    (lambda m: setattr(m.closed_jaxprs[m.root].consts[0].array, "kind", 99), "unknown array kind 99"),
    (lambda m: setattr(m.closed_jaxprs[m.root].consts[0].array, "dtype", 12345), "dtype 12345"),
    (lambda m: m.avals[0].shaped_array.shape.add(constant=-3), "negative dimension -3"),
    (lambda m: m.avals[0].shaped_array.shape.add(symbolic="(("), "symbolic"),
    (lambda m: m.avals[0].shaped_array.shape.add(), "empty dimension"),
    (lambda m: m.avals[0].Clear(), "empty aval"),
])
def test_unknown_enum_numbers_and_bad_types(base, edit, match):
  m = _copy(base)
  edit(m)
  _fails(m, match=match)


def test_bad_utf8_string(base):
  m = _copy(base)
  m.strings.append("ZQZQZQZQ")
  data = m.SerializeToString().replace(b"ZQZQZQZQ", b"\xff\xfe\xfd\xfc\xc3\x28\xa0\xa1")
  _fails(data, match="not a valid .jaxpb file")


@pytest.mark.parametrize("frac", [0.1, 0.5, 0.9, 0.999])
def test_truncated_bytes(base, frac):
  data = base.SerializeToString()
  _fails(data[:int(len(data) * frac)])


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes(seed):
  data = np.random.default_rng(seed).bytes(1 + 997 * seed)
  _fails(data)


def test_not_bytes():
  """Bytes are a .jaxpb, a str a .jaxpr text (its own error, with its place);
  nothing else is read."""
  for x in (123, None, [b"\n\x02\x08\x01"]):
    with pytest.raises(TypeError):
      jp.loads(x)
  with pytest.raises(jp.TextError) as e:
    jp.loads("a str")
  assert (e.value.line, e.value.column) == (1, 1)


def test_empty_file_is_a_version_error():
  e = _fails(b"", cls=jp.VersionError, match="format version is missing")
  assert e.path == "format_version"


# --- wrong value kinds for param codecs --------------------------------------------------

def _custom_jvp_module():
  @jax.custom_jvp
  def f(x):
    return jnp.sin(x)
  f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * t[0]))
  return jp.encode(jax.make_jaxpr(f)(1.0))


def test_param_codec_gets_the_wrong_kind():
  m = _custom_jvp_module()
  p = next(p for p in m.params if p.name == "jvp_jaxpr_fun")
  p.value.Clear()
  p.value.int = 3
  _fails(m, match="expected a custom rule reference", path="eqn[0].params.jvp_jaxpr_fun")


def test_param_with_an_empty_value():
  m = _custom_jvp_module()
  p = next(p for p in m.params if p.name == "num_consts")
  p.value.Clear()
  p.value.SetInParent()  # (set, with no kind)
  _fails(m, match="empty value", path="eqn[0].params.num_consts")
  assert jp.check(m).errors[0] == ("eqn[0].params.num_consts", "empty value")


def test_param_codec_gets_an_out_of_range_rule():
  m = _custom_jvp_module()
  p = next(p for p in m.params if p.name == "jvp_jaxpr_fun")
  p.value.rule = 99
  _fails(m, match="rule index 99 is out of range", path="eqn[0].params.jvp_jaxpr_fun")


def test_one_rule_for_calls_of_two_types():
  """The checks of a jvp rule against its call are kept per rule and types
  (a model calls relu's rule once per layer): a file whose second call, of
  another type, names the first call's rule is refused at that call."""
  @jax.custom_jvp
  def f(x):
    return jnp.sin(x)
  f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * t[0]))
  m = jp.encode(jax.make_jaxpr(lambda x, y: (f(x), f(y)))(jnp.ones(3), jnp.ones(4)))
  rules = [p for p in m.params if p.name == "jvp_jaxpr_fun"]
  assert len(rules) == 2 and rules[0].value.rule != rules[1].value.rule
  assert jp.check(m).ok
  rules[1].value.rule = rules[0].value.rule  # (the f32[3] call's rule for the f32[4] call)
  why = "jvp_jaxpr_fun's inputs 0 is float32[3] where it gets float32[4]"
  _fails(m, match=why, path="eqn[1].params.jvp_jaxpr_fun")
  assert jp.check(m).errors[0] == ("eqn[1].params.jvp_jaxpr_fun", why)


def test_call_jaxpr_of_the_wrong_kind():
  m = _custom_jvp_module()
  p = next(p for p in m.params if p.name == "call_jaxpr")
  p.value.Clear()
  p.value.str = "not a jaxpr"
  _fails(m, match="custom_jvp_call's call_jaxpr is a str where it takes ClosedJaxpr",
         path="eqn[0].params.call_jaxpr")


def test_jvp_rule_that_does_not_fit_its_call():
  # out_zeros claims the tangent is zero, but the rule's jaxpr gives it: the
  # vjp of such a program failed in JAX with a bare AssertionError.
  m = _custom_jvp_module()
  m.rules[0].jvp.out_zeros[0] = True
  _fails(m, match="jvp_jaxpr_fun takes 2 outputs where the eqn gives it 1",
         path="eqn[0].params.jvp_jaxpr_fun")


def test_jit_jaxpr_with_debug_names_of_another_count():
  # jit asserts the count when it traces the call again: a bare AssertionError.
  m = jp.encode(jax.make_jaxpr(lambda x: jax.jit(jnp.sin)(x))(1.0))
  jp.loads(m.SerializeToString())  # (its params' verdict kept: a sound sub-jaxpr's)
  jaxpr = m.jaxprs[m.closed_jaxprs[_eqn_param(m, _root(m).eqns[0], "jaxpr").closed_jaxpr].jaxpr]
  jaxpr.debug_info.arg_names.values.append("extra")
  _fails(m, match="its jaxpr's debug info has 2 arg names for 1 inputs", path="eqn[0].params.jaxpr")


@pytest.mark.parametrize("edit, match, path", [
    ("reshape", "changes the element count", "eqn[0].params.new_sizes"),
    ("axes", "names an axis twice", "eqn[1].params.axes"),
])
def test_params_jax_lets_through_but_xla_refuses(edit, match, path):
  m = jp.encode(jax.make_jaxpr(lambda x: jnp.sum(x.reshape(2, 3), axis=(0, 1)))(np.ones(6, np.float32)))
  p = next(p for p in m.params if p.name == {"reshape": "new_sizes", "axes": "axes"}[edit])
  p.value.tuple.items[-1].int = 4 if edit == "reshape" else 0
  _fails(m, match=match, path=path)


@pytest.mark.parametrize("prim, param", [("reduce", "dimensions"), ("reduce_or", "axes")])
def test_negative_reduction_axes(prim, param):
  # Their shape rules delete the axis with numpy, which takes -1; lowering
  # refused it (device fuzz seeds 741 and earlier).
  def f(x, b):
    return (jax.lax.reduce(x, np.int32(0), lambda a, c: a + 2 * c, (0,)),
            jax.lax.reduce_or_p.bind(b, axes=(0,)))
  m = jp.encode(jax.make_jaxpr(f)(np.arange(5, dtype=np.int32), np.ones(5, bool)))
  k = next(k for k, e in enumerate(_root(m).eqns) if m.primitives[e.primitive].name == prim)
  p = next(p for p in m.params if p.name == param)
  p.value.tuple.items[0].int = -1
  _fails(m, match="reduction axes (-1,) are not axes (0 to 0) of the rank-1 operand",
         path=f"eqn[{k}].params.{param}")


def test_random_wrap_of_data_that_is_not_key_data():
  data = np.zeros(2, np.uint32)
  m = jp.encode(jax.make_jaxpr(lambda d: jax.random.key_data(jax.random.wrap_key_data(d)))(data))
  m.avals.add().shaped_array.CopyFrom(pb.ShapedArray(dtype=pb.DTYPE_FLOAT32, shape=[pb.Dim(constant=2)]))
  _root(m).invars[0].aval = len(m.avals) - 1
  _fails(m, match="key data must be uint32", path="eqn[0]")


def test_record_with_wrong_fields():
  def f(x, i):
    return x[i]
  m = jp.encode(jax.make_jaxpr(f)(np.arange(4.0, dtype=np.float32), np.array([1, 2])))
  p = next(p for p in m.params if p.value.WhichOneof("kind") == "record")
  p.value.record.fields[0].value.Clear()
  p.value.record.fields[0].value.str = "zzz"
  p.value.record.fields.add(name="bogus", value=pb.Value(int=1))
  _fails(m, match="bogus")


def test_extension_with_wrong_fields():
  data = np.zeros(2, np.uint32)
  m = jp.encode(jax.make_jaxpr(lambda d: jax.random.key_data(jax.random.wrap_key_data(d)))(data))
  exts = [p for p in m.params if p.value.WhichOneof("kind") == "extension"]
  assert exts, [p.name for p in m.params]
  exts[0].value.extension.fields[0].value.Clear()
  exts[0].value.extension.fields[0].value.int = 5
  _fails(m, match="needs a str name")


def test_unknown_effect(base):
  m = _copy(base)
  _root(m).eqns[0].effects.add(name="os::system")
  _fails(m, match="unknown effect", path="eqn[0].effects[0]")


def test_every_error_has_a_path(base):
  """Errors past parsing and version gating name where they are."""
  import random
  from tests.test_fuzz import fuzz as fz
  rng = random.Random(7)
  data = base.SerializeToString()
  seen = 0
  for _ in range(150):
    m = _copy(base)
    fz.mutate_message(m, rng)
    try:
      jp.loads(m.SerializeToString())
    except jp.VersionError:
      continue
    except jp.DecodeError as e:
      if e.message.startswith("not a valid .jaxpb file"):
        continue
      seen += 1
      assert e.path, e
  assert seen > 20


def test_one_token_returned_twice():
  # XLA's CPU client aborts the process on it (JAX 0.10-0.12), as it does for
  # jax.jit of the same program traced by JAX itself.
  def f(x):
    t = jax.lax.create_token()
    return t, x
  m = jp.encode(jax.make_jaxpr(f)(1.0))
  _root(m).outvars[1].CopyFrom(_root(m).outvars[0])
  _fails(m, match="returns one token twice", path="outvars[1]")


def test_sharding_spec_naming_axes_the_mesh_lacks():
  # A mesh without its axis, and a spec that still names it, aborted XLA.
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
  s = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
  m = jp.encode(jax.make_jaxpr(lambda x: jax.lax.with_sharding_constraint(x, s))(np.ones(2, np.float32)))
  p = next(p for p in m.params if p.value.WhichOneof("kind") == "named_sharding")
  del p.value.named_sharding.mesh.axes[:]
  _fails(m, match="the spec names axes ['x'] that the mesh lacks")


def test_scan_unrolled_into_a_long_chain():
  """A fully unrolled scan copies its body `length` times into one chain: it
  loads (loading refuses no chain), though XLA's CPU compiler crashes on it
  (`jaxpr-proto run` and the fuzzer check bounds.compiled_chain first); an
  unroll that copies the body past MAX_INLINED_EQNS eqns is refused."""
  from jaxpr_proto.check import bounds

  def body(c, _):
    return jnp.tanh(jnp.sin(c) * 2.0 + 1.0), None

  def f(x, unroll, length=10_000):
    return jax.lax.scan(body, x, None, length=length, unroll=unroll)[0]

  assert jp.check(jp.dumps(jax.make_jaxpr(lambda x: f(x, 8))(1.0))).ok
  cj = jp.loads(jp.dumps(jax.make_jaxpr(lambda x: f(x, True))(1.0)))
  lowered = jax.jit(jax.extend.core.jaxpr_as_fun(cj)).lower(1.0)
  assert bounds.compiled_chain(lowered.compiler_ir("stablehlo")) > bounds.XLA_CPU_CHAIN
  data = jp.dumps(jax.make_jaxpr(lambda x: f(x, True, length=1 << 23))(1.0))
  with pytest.raises(jp.DecodeError, match=r"eqn\[0\].params.unroll: unroll=8388608 copies of a "
                                           r"body of 4 eqns make more than 16777216 eqns"):
    jp.loads(data)


def test_jax_primitive_without_a_param_schema():
  """One of JAX's primitives that no source of the schemas binds has its
  params checked by their names (tests/test_param_schemas.py): a param of a
  known name holding a value of another kind is refused, with its path."""
  from jaxpr_proto.check import param_schema
  from jaxpr_proto.codec.names import REGISTRY
  unchecked = sorted(n for (ns, n) in REGISTRY.all() if ns == "jax" and param_schema.schema(n) is None)
  if not unchecked:
    pytest.skip("every JAX primitive of this process has a recorded schema")
  cj = jax.make_jaxpr(lambda x: jax.lax.psum(x, "i"), axis_env=[("i", 2)])(1.0)
  m = jp.encode(cj)
  m.primitives[_root(m).eqns[0].primitive].name = unchecked[0]
  p = next(p for p in m.params if p.name == "axes")
  p.value.Clear()
  p.value.float = 1.5
  _fails(m, match=f"{unchecked[0]}'s axes is a float where it takes", path="eqn[0].params.axes")


def test_a_dtype_the_backend_cannot_compile_is_refused():
  """float6: XLA cannot compile it on CPU or TPU, and a constant of it
  (`x * 2`) aborts the process there; such a program is refused on load."""
  from jaxpr_proto import compat
  if jax.default_backend() not in compat.UNCOMPILABLE_DTYPES:
    pytest.skip(f"float6 is not known to fail on {jax.default_backend()}")
  f6 = np.zeros((8, 16), jnp.float6_e2m3fn)
  data = jp.dumps(jax.make_jaxpr(lambda x: x * 2)(f6))
  with pytest.raises(jp.DecodeError, match="float6_e2m3fn, which JAX .* cannot compile") as e:
    jp.loads(data)
  assert e.value.path == "invars[0](aval 0)"
  assert jp.check(data).errors[0] == (e.value.path, e.value.message)
  # a program without it still loads
  jp.loads(jp.dumps(jax.make_jaxpr(lambda x: x * 2)(np.zeros(3, np.float32))))


def test_random_gamma_of_operands_jax_does_not_check():
  """random_gamma's abstract eval passes any operands through; its sampler
  then fails inside jit. Its key is a PRNG key array (fuzz seed 881, JAX
  0.12: an f32[4] key), and alpha's shape starts with the key's (a key per
  row of alpha)."""
  keys = jax.random.split(jax.random.key(0), 3)
  text = jp.format(jax.make_jaxpr(jax.vmap(jax.random.gamma))(keys, np.ones(3, np.float32)),
                   debug_info=False)
  assert "random_gamma" in text and text.count("f32[3]") >= 2
  jp.loads(text)  # (as written, it loads)
  with pytest.raises(jp.DecodeError, match=r"random_gamma's alpha float32\[4\] does not start "
                     r"with the dims of its key key<\w+>\[3\]"):
    jp.loads(text.replace("f32[3]", "f32[4]"))
  with pytest.raises(jp.DecodeError, match=r"random_gamma takes a PRNG key array, not float32\[3\]"):
    jp.loads(text.replace("key<threefry2x32>[3]", "f32[3]"))
