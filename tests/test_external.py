"""Arrays stored outside the message: `jp.save`'s data file beside the .jaxpb
(mapped on load, no copy), pickles' out-of-band buffers, the path checks on
hostile locations, checksums, and peak memory."""
import copy
import os
import pickle
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun

import jaxpr_proto as jp
from jaxpr_proto.codec import arrays
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import external, files

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import bench  # noqa: E402  (its peak-memory measurement)

MiB = 1 << 20


def _program():
  """A program closing over big constants of several kinds and dtypes, and a
  small one that stays in the message."""
  rng = np.random.default_rng(0)
  w = rng.standard_normal((4, MiB // 2)).astype(np.float32)  # 8 MiB, numpy
  b = jnp.asarray(rng.standard_normal(MiB), jnp.bfloat16)  # 2 MiB, jax.Array
  q = jnp.asarray(rng.integers(-8, 8, 3 * MiB), ml_dtypes.int4)  # 1.5 MiB packed
  small = np.float32(rng.standard_normal(8))

  def f(x):
    y = jnp.tanh(x @ jnp.asarray(w))
    return y.sum() + b.astype(jnp.float32).sum() + q.astype(jnp.float32).mean() + small.sum()

  x = jnp.linspace(-1, 1, 4, dtype=jnp.float32)
  return jax.make_jaxpr(f)(x), x


def _run(cj, x):
  return np.asarray(jax.jit(jaxpr_as_fun(cj))(x)[0])


def _mapping_of(path):
  """(start, end) addresses of the mappings of `path` in this process."""
  real = os.path.realpath(path)
  out = []
  with open("/proc/self/maps") as f:
    for line in f:
      if line.rstrip().endswith(real):
        lo, hi = (int(a, 16) for a in line.split()[0].split("-"))
        out.append((lo, hi))
  return out


def _address(c):
  if isinstance(c, jax.Array):
    return c.unsafe_buffer_pointer()
  return np.asarray(c).__array_interface__["data"][0]


def test_save_load_round_trip_bitwise(tmp_path):
  cj, x = _program()
  path = tmp_path / "m.jaxpb"
  jp.save(cj, path)
  assert sorted(os.listdir(tmp_path)) == ["m.jaxpb", "m.jaxpb.data"]
  assert path.stat().st_size < 10_000  # the message holds no array data
  m = files.parse(path.read_bytes())
  assert external.FEATURE in m.required_features
  assert (m.format_version.major, m.format_version.minor) == (1, 2)
  exts = [c.array.external for cj_ in m.closed_jaxprs for c in cj_.consts if c.array.HasField("external")]
  assert len(exts) == 3 and all(e.offset % external.ALIGN == 0 and len(e.sha256) == 32 for e in exts)
  cj2 = jp.load(path)
  assert str(cj2) == str(cj)
  assert [type(c) for c in cj2.consts] == [type(c) for c in cj.consts]
  for a, b in zip(cj.consts, cj2.consts):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert _run(cj2, x).tobytes() == _run(cj, x).tobytes()
  g1 = jax.grad(lambda x: jaxpr_as_fun(cj)(x)[0])(x)
  g2 = jax.grad(lambda x: jaxpr_as_fun(cj2)(x)[0])(x)
  assert np.asarray(g1).tobytes() == np.asarray(g2).tobytes()
  assert jp.check(path).ok


def test_loaded_constants_are_views_of_the_mapping(tmp_path):
  cj, _ = _program()
  path = tmp_path / "m.jaxpb"
  jp.save(cj, path)
  cj2 = jp.load(path)
  maps = _mapping_of(tmp_path / "m.jaxpb.data")
  assert maps, "the data file is not mapped"
  big = [c for c in cj2.consts if np.asarray(c).nbytes >= MiB and np.asarray(c).dtype != ml_dtypes.int4]
  assert len(big) == 2  # the float32 (numpy) and bfloat16 (jax.Array) constants
  for c in big:
    addr = _address(c)
    assert any(lo <= addr < hi for lo, hi in maps), f"{type(c).__name__} was copied"
    assert addr % external.ALIGN == 0
  numpy_consts = [c for c in big if isinstance(c, np.ndarray)]
  assert numpy_consts and not numpy_consts[0].flags.writeable  # a read-only mapping


def test_small_programs_stay_one_file_and_threshold_overrides(tmp_path):
  cj, x = _program()
  jp.save(cj, tmp_path / "a.jaxpb", external_min_bytes=1 << 40)
  assert os.listdir(tmp_path) == ["a.jaxpb"]
  assert jp.loads((tmp_path / "a.jaxpb").read_bytes()) is not None
  jp.save(cj, tmp_path / "b.jaxpb", external_min_bytes=4 * MiB)  # only the 8 MiB one
  m = files.parse((tmp_path / "b.jaxpb").read_bytes())
  assert sum(c.array.HasField("external") for j in m.closed_jaxprs for c in j.consts) == 1
  assert _run(jp.load(tmp_path / "b.jaxpb"), x).tobytes() == _run(cj, x).tobytes()


def test_loads_of_a_message_with_external_arrays_names_jp_load(tmp_path):
  cj, _ = _program()
  jp.save(cj, tmp_path / "m.jaxpb")
  data = (tmp_path / "m.jaxpb").read_bytes()
  with pytest.raises(jp.DecodeError, match=r"jp\.load\(path\)") as e:
    jp.loads(data)
  assert e.value.path.endswith(".external")
  assert not jp.check(data).ok


def test_dumps_too_big_names_jp_save(monkeypatch):
  cj, _ = _program()
  monkeypatch.setattr(arrays, "MAX_INLINE_BYTES", 4 * MiB)
  with pytest.raises(jp.EncodeError, match=r"jp\.save\(program, path\)"):
    jp.dumps(cj)


def test_checksum_detects_damage_unless_skipped(tmp_path):
  cj, x = _program()
  path = tmp_path / "m.jaxpb"
  jp.save(cj, path)
  data = tmp_path / "m.jaxpb.data"
  raw = bytearray(data.read_bytes())
  raw[100] ^= 1
  data.write_bytes(bytes(raw))
  with pytest.raises(jp.DecodeError, match="SHA-256") as e:
    jp.load(path)
  assert e.value.path.startswith("consts[")
  report = jp.check(path)
  assert not report.ok and "SHA-256" in report.format()
  cj2 = jp.load(path, verify=False)  # the caller's choice: loads, damaged
  assert str(cj2) == str(cj)


def _tamper(tmp_path, **fields):
  """Saves the program, then rewrites its first external array's fields."""
  cj, _ = _program()
  path = tmp_path / "m.jaxpb"
  jp.save(cj, path)
  m = files.parse(path.read_bytes())
  for c in m.closed_jaxprs:
    for v in c.consts:
      if v.array.HasField("external"):
        for k, val in fields.items():
          setattr(v.array.external, k, val)
        path.write_bytes(m.SerializeToString())
        return path
  raise AssertionError("no external array")


@pytest.mark.parametrize("location", [
    "../m.jaxpb.data", "/etc/passwd", "a/../../m.jaxpb.data", "./m.jaxpb.data",
    "", "sub//x", "C:\\x", "c:x", "x\0y", "pickle-buffer:0",
])
def test_hostile_locations_are_refused(tmp_path, location):
  path = _tamper(tmp_path, location=location)
  with pytest.raises(jp.DecodeError) as e:
    jp.load(path)
  assert ".external" in e.value.path
  assert not jp.check(path).ok


def test_symlinks_out_of_the_folder_are_refused(tmp_path):
  outside = tmp_path / "outside"
  outside.mkdir()
  (outside / "secret").write_bytes(b"x" * 4096)
  inner = tmp_path / "in"
  inner.mkdir()
  cj, _ = _program()
  jp.save(cj, inner / "m.jaxpb")
  m = files.parse((inner / "m.jaxpb").read_bytes())
  ext = next(v.array.external for c in m.closed_jaxprs for v in c.consts if v.array.HasField("external"))
  os.symlink(outside / "secret", inner / "link")  # a symlinked file
  os.symlink(outside, inner / "dir")  # a symlinked folder on the way
  os.symlink(inner / "m.jaxpb.data", inner / "inside")  # even one that stays inside
  for location in ("link", "dir/secret", "inside"):
    ext.location = location
    (inner / "m.jaxpb").write_bytes(m.SerializeToString())
    with pytest.raises(jp.DecodeError, match="symlink|Not a directory|cannot open|not a regular file") as e:
      jp.load(inner / "m.jaxpb")
    assert location in str(e.value)


def test_fifo_and_missing_files_are_refused_without_hanging(tmp_path):
  os.mkfifo(tmp_path / "fifo")
  path = _tamper(tmp_path, location="fifo")
  with pytest.raises(jp.DecodeError, match="not a regular file"):
    jp.load(path)
  path = _tamper(tmp_path, location="missing.data")
  with pytest.raises(jp.DecodeError, match="cannot open"):
    jp.load(path)


@pytest.mark.parametrize("fields", [
    dict(offset=1 << 40), dict(length=1 << 40), dict(offset=(1 << 64) - 1, length=2),
    dict(offset=64), dict(length=5), dict(sha256=b""),
])
def test_bad_ranges_and_checksums_are_refused(tmp_path, fields):
  path = _tamper(tmp_path, **fields)
  with pytest.raises(jp.DecodeError) as e:
    jp.load(path)
  assert e.value.path.startswith("consts[")


def test_an_array_with_data_and_external_is_refused(tmp_path):
  path = _tamper(tmp_path)
  m = files.parse(path.read_bytes())
  next(v.array for c in m.closed_jaxprs for v in c.consts if v.array.HasField("external")).data = b"x"
  path.write_bytes(m.SerializeToString())
  with pytest.raises(jp.DecodeError, match="both"):
    jp.load(path)


def test_an_older_reader_refuses_by_feature(tmp_path, monkeypatch):
  from jaxpr_proto.wire import versions
  cj, _ = _program()
  jp.save(cj, tmp_path / "m.jaxpb")
  monkeypatch.setattr(versions, "SUPPORTED_FEATURES", versions.SUPPORTED_FEATURES - {external.FEATURE})
  with pytest.raises(jp.VersionError, match="external_data"):
    jp.load(tmp_path / "m.jaxpb")


def test_resave_replaces_the_data_file(tmp_path):
  cj, x = _program()
  path = tmp_path / "m.jaxpb"
  jp.save(cj, path)
  big = np.linspace(0, 1, MiB // 2, dtype=np.float32)
  cj_other = jax.make_jaxpr(lambda x: x * jnp.asarray(big).reshape(4, -1).sum(1))(x)
  jp.save(cj_other, path)  # another program, another data file, same names
  assert (tmp_path / "m.jaxpb.data").stat().st_size == big.nbytes
  assert _run(jp.load(path), x).tobytes() == _run(cj_other, x).tobytes()
  jp.save(cj, path)
  assert _run(jp.load(path), x).tobytes() == _run(cj, x).tobytes()
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]  # no temp files left


# --- pickling ---------------------------------------------------------------------

def test_pickle_protocol_5_carries_arrays_out_of_band():
  cj, x = _program()
  buffers = []
  data = pickle.dumps(cj, protocol=5, buffer_callback=buffers.append)
  assert len(buffers) == 3
  assert len(data) < 20_000  # the arrays are not in the stream
  cj2 = pickle.loads(data, buffers=buffers)
  assert str(cj2) == str(cj)
  assert _run(cj2, x).tobytes() == _run(cj, x).tobytes()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_pickle_in_band_and_deepcopy(protocol):
  cj, x = _program()
  cj2 = pickle.loads(pickle.dumps(cj, protocol=protocol))
  assert _run(cj2, x).tobytes() == _run(cj, x).tobytes()
  cj3 = copy.deepcopy(cj)
  assert _run(cj3, x).tobytes() == _run(cj, x).tobytes()


def test_pickled_jit_and_function_with_big_constants():
  cj, x = _program()
  f = jax.jit(jaxpr_as_fun(cj))
  buffers = []
  g = pickle.loads(pickle.dumps(f, protocol=5, buffer_callback=buffers.append), buffers=buffers)
  assert len(buffers) == 3
  assert np.asarray(g(x)[0]).tobytes() == np.asarray(f(x)[0]).tobytes()
  fn = jp.trace(lambda x: cj.consts[0].sum() + x)(x)
  fn2 = pickle.loads(pickle.dumps(fn, protocol=5))
  assert np.asarray(fn2(x)).tobytes() == np.asarray(fn(x)).tobytes()


def test_pickle_buffers_are_checked():
  cj, _ = _program()
  buffers = []
  data = pickle.dumps(cj, protocol=5, buffer_callback=buffers.append)
  with pytest.raises(jp.DecodeError, match="pickle buffer"):
    pickle.loads(data, buffers=[b"short"] + buffers[1:])


# --- the CLI and info -------------------------------------------------------------

def test_cli_reads_external_arrays(tmp_path):
  cj, _ = _program()
  path = tmp_path / "m.jaxpb"
  jp.save(cj, path)
  for cmd in (["check", str(path)], ["info", str(path)], ["load", str(path)]):
    r = subprocess.run([sys.executable, "-m", "jaxpr_proto", *cmd], capture_output=True,
                       text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert r.returncode == 0, r.stderr
    if cmd[0] == "info":
      assert "m.jaxpb.data" in r.stdout and "external" in r.stdout


# --- memory ----------------------------------------------------------------------

def test_peak_memory_of_a_256_mib_constant(tmp_path):
  """Saving and loading a program with N = 256 MiB of constants peak at no
  more than N + 256 MiB above the process's size after importing JAX (not 3N)."""
  if not os.path.exists("/proc/self/statm"):
    pytest.skip("needs Linux's /proc/self/statm")
  path = str(tmp_path / "big.jaxpb")
  for what in ("save", "load"):  # (the load checks that all 256 MiB came back)
    _, base, peak = bench.measure_peak(path, what, 256 * MiB)
    assert peak - base <= 512 * MiB, f"{what}: peak {peak - base >> 20} MiB above the baseline"


def test_saved_function_with_a_big_constant(tmp_path):
  rng = np.random.default_rng(2)
  w = rng.standard_normal((8, MiB // 8)).astype(np.float32)  # 4 MiB
  fn = jp.trace(lambda p, x: {"y": jnp.tanh(x @ jnp.asarray(w)).sum() * p["s"]})(
      {"s": jnp.float32(2)}, jnp.ones(8, jnp.float32))
  jp.save(fn, tmp_path / "f.jaxpb")
  assert (tmp_path / "f.jaxpb.data").stat().st_size == w.nbytes
  fn2 = jp.load(tmp_path / "f.jaxpb")
  assert isinstance(fn2, jp.Function)
  args = ({"s": jnp.float32(3)}, jnp.linspace(0, 1, 8, dtype=jnp.float32))
  assert np.asarray(fn2(*args)["y"]).tobytes() == np.asarray(fn(*args)["y"]).tobytes()


def test_names_with_colons_symlinked_files_and_the_cli(tmp_path):
  """A timestamped name saves and loads; a .jaxpb reached through a symlink
  finds its data file beside the real one; `convert` to another folder
  copies the data file; `trace -o` writes one; jp.check takes the folder."""
  cj, x = _program()
  path = tmp_path / "run-12:30.jaxpb"
  jp.save(cj, path)
  assert _run(jp.load(path), x).tobytes() == _run(cj, x).tobytes()
  (tmp_path / "link").mkdir()
  os.symlink(path, tmp_path / "link" / "current.jaxpb")
  assert str(jp.load(tmp_path / "link" / "current.jaxpb")) == str(cj)
  assert jp.check(path.read_bytes(), external=tmp_path).ok
  out = tmp_path / "elsewhere" / "c.txtpb"
  out.parent.mkdir()
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  r = subprocess.run([sys.executable, "-m", "jaxpr_proto", "convert", str(path), str(out)],
                     capture_output=True, text=True, env=env)
  assert r.returncode == 0, r.stderr
  assert (out.parent / "run-12:30.jaxpb.data").is_file()
  r = subprocess.run([sys.executable, "-m", "jaxpr_proto", "check", str(out)],
                     capture_output=True, text=True, env=env)
  assert r.returncode == 0, r.stderr + r.stdout


def test_a_constant_used_twice_is_stored_once():
  w = np.arange(MiB // 4, dtype=np.float32)
  cj = jax.make_jaxpr(lambda x: (x + w).sum() * (x * w).sum())(jnp.ones(MiB // 4, jnp.float32))
  sink = external.PickleBuffers()
  jp.encode(cj, out_of_line=sink)
  assert len(sink.buffers) <= 1
