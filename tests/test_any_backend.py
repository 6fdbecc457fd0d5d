"""A file written on one backend opens on another: its meshes are bound to
this process's devices on load, the concrete ones to the local devices and
the abstract ones to their kind (tools/backend_check.py runs the corpus
saved on the CPU on a TPU)."""
from __future__ import annotations

import jax
import numpy as np
from jax.extend.core import jaxpr_as_fun
from jax.sharding import PartitionSpec as P

import jaxpr_proto as jp
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _written_on_a_tpu(m: pb.Module) -> int:
  """Makes `m` read as if a TPU v5e had written it: every abstract mesh's
  device is a TPU's. Returns how many it changed."""
  n = 0

  def walk(msg):
    nonlocal n
    for fd, v in msg.ListFields():
      if fd.name == "abstract_device":
        v.device_kind, v.platform, v.num_cores = "TPU v5 lite", "tpu", 1
        n += 1
      elif fd.type == fd.TYPE_MESSAGE:
        for x in (v if fd.is_repeated else [v]):
          walk(x)
  walk(m)
  return n


def test_shard_map_written_on_another_backend_loads_and_runs():
  mesh = jax.make_mesh((1,), ("x",))
  f = jax.shard_map(lambda a: a * 2 + jax.lax.psum(a, "x"), mesh=mesh, in_specs=P(),
                    out_specs=P())
  x = np.arange(4, dtype=np.float32)
  orig = jax.make_jaxpr(f)(x)
  m = jp.encode(orig)
  assert _written_on_a_tpu(m) > 0
  loaded = jp.loads(m.SerializeToString())
  assert str(loaded) == str(orig)
  want = jax.jit(jaxpr_as_fun(orig))(x)
  got = jax.jit(jaxpr_as_fun(loaded))(x)
  np.testing.assert_array_equal(want, got)
  g = jax.grad(lambda a: jaxpr_as_fun(loaded)(a)[0].sum())(x)
  np.testing.assert_array_equal(g, jax.grad(lambda a: jaxpr_as_fun(orig)(a)[0].sum())(x))


def test_explicit_mesh_program_written_on_another_backend_loads():
  mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
  x = np.arange(8, dtype=np.float32).reshape(2, 4)

  def f(a):
    a = jax.sharding.reshard(a, P("x"))
    return (a * 2).sum(axis=1)
  with jax.set_mesh(mesh):
    orig = jax.make_jaxpr(f)(x)
  m = jp.encode(orig)
  assert _written_on_a_tpu(m) > 0
  loaded = jp.loads(m.SerializeToString())
  assert str(loaded) == str(orig)
  with jax.set_mesh(mesh):
    np.testing.assert_array_equal(jax.jit(jaxpr_as_fun(orig))(x), jax.jit(jaxpr_as_fun(loaded))(x))
