"""Devices in params (`device_put(x, device)`), written by platform and index
among that platform's devices, and bound on load to this process's device of
that platform: a CPU device on a TPU host stays a CPU device (it is not among
`jax.local_devices()`, which are the default backend's; found on the TPU
with JAX's harness device_put_devices_shape_float32_3_4_device_cpu, which
loaded as a device_put to the TPU)."""
from __future__ import annotations

import types

import jax
import numpy as np

import jaxpr_proto as jp
from jaxpr_proto import compat


def _put_on_cpu():
  cpu = jax.devices("cpu")[0]
  return jax.make_jaxpr(lambda x: jax.device_put(x, cpu) * 2)(np.ones(3, np.float32)), cpu


def test_device_put_to_a_cpu_device_round_trips():
  cj, cpu = _put_on_cpu()
  loaded = jp.loads(jp.dumps(cj))
  assert str(loaded) == str(cj)
  assert loaded.jaxpr.eqns[0].params["devices"] == (cpu,)


def test_a_cpu_device_is_found_where_the_default_backend_is_another(monkeypatch):
  """As on a TPU host: `jax.local_devices()` lists the TPU's devices, and the
  CPU's only under backend="cpu"."""
  cj, cpu = _put_on_cpu()
  real = jax.local_devices
  tpu = types.SimpleNamespace(platform="tpu", id=0)

  def local_devices(process_index=None, backend=None):
    return real(backend=backend) if backend is not None else [tpu]

  monkeypatch.setattr(jax, "local_devices", local_devices)
  data = jp.dumps(cj)
  assert compat.local_device("cpu", 0) is cpu
  assert compat.local_device("tpu", 0) is tpu  # (a platform this process lacks: the default's)
  assert jp.loads(data).jaxpr.eqns[0].params["devices"] == (cpu,)
