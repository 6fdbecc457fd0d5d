"""No data lost on save: `jp.save` replaces a file atomically.

A writer process is killed (SIGKILL) in the middle of a save, at several
points: while writing the data, while syncing it, and just before the
rename. The old file must be intact, and no partial file may be left in the
folder. (On file systems without O_TMPFILE the temp file has a name from the
start, and a killed writer leaves it behind; the test then checks only that
the old file is intact.)
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import jax

import jaxpr_proto as jp
from jaxpr_proto.wire import files as api

_CHILD = textwrap.dedent("""
    import os, sys, time
    import numpy as np, jax, jax.numpy as jnp
    import jaxpr_proto as jp
    from jaxpr_proto.wire import files as api
    path, marker, point = sys.argv[1], sys.argv[2], sys.argv[3]

    def hang():
      open(marker, "w").close()
      while True:
        time.sleep(1)

    real_write, real_fsync, real_replace = os.write, os.fsync, os.replace
    n_writes = [0]
    def write(fd, data):
      n_writes[0] += 1
      if point == "write" and n_writes[0] > 1:
        hang()
      return real_write(fd, bytes(data)[:4096])  # a partial write: the loop goes on
    def fsync(fd):
      if point == "fsync":
        hang()
      return real_fsync(fd)
    def replace(a, b):
      if point == "replace":
        hang()
      return real_replace(a, b)
    os.write, os.fsync, os.replace = write, fsync, replace

    x = np.linspace(0, 1, 200_000, dtype=np.float32)  # a big constant: a long write
    cj = jax.make_jaxpr(lambda y: jnp.sin(y) + x)(x)
    jp.save(cj, path)
    print("saved")
""")


def _supports_unnamed_temp_files(folder) -> bool:
  probe = os.path.join(folder, "probe.bin")
  ok = api._write_unnamed(probe, folder, b"x")
  if ok:
    os.unlink(probe)
  return ok


@pytest.fixture(scope="module")
def old_program():
  return jax.make_jaxpr(lambda y: y * 2.0)(np.ones(3, np.float32))


_POINTS = ("write", "fsync", "replace")


def test_killed_writer_leaves_the_old_file_intact(tmp_path, old_program):
  """One writer per kill point, run side by side (each imports JAX)."""
  runs = {}
  for point in _POINTS:
    folder = tmp_path / point
    folder.mkdir()
    path = folder / "model.jaxpb"
    jp.save(old_program, path)
    marker = tmp_path / f"{point}.marker"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), str(marker), point],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    runs[point] = (folder, path, path.read_bytes(), marker, proc)
  unnamed = _supports_unnamed_temp_files(str(tmp_path))
  try:
    deadline = time.time() + 180
    for point, (folder, path, old_bytes, marker, proc) in runs.items():
      while not marker.exists():
        if proc.poll() is not None:
          out, err = proc.communicate()
          pytest.fail(f"{point}: the writer ended before the kill point: {out!r} {err[-2000:]!r}")
        if time.time() > deadline:
          pytest.fail(f"{point}: the writer never reached the kill point")
        time.sleep(0.05)
      os.kill(proc.pid, signal.SIGKILL)
      proc.wait(timeout=60)
      assert proc.returncode == -signal.SIGKILL
  finally:
    for *_, proc in runs.values():
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  for point, (folder, path, old_bytes, marker, proc) in runs.items():
    # The old file is intact, and still loads.
    assert path.read_bytes() == old_bytes, point
    cj = jp.load(path)
    np.testing.assert_allclose(jax.extend.core.jaxpr_as_fun(cj)(np.ones(3, np.float32))[0], 2.0)
    left = sorted(p.name for p in folder.iterdir() if p.name != "model.jaxpb")
    if unnamed and point in ("write", "fsync"):
      assert left == [], f"{point}: a killed save left {left} behind"
    elif unnamed:  # killed between naming the complete temp file and the rename
      for name in left:
        assert name.startswith(".tmp-") and name.endswith(".jaxpb")
        assert jp.load(folder / name) is not None  # complete, not partial
    # The next save still works and replaces the file.
    jp.save(old_program, path)
    assert path.read_bytes() == old_bytes


def test_save_replaces_atomically_and_leaves_nothing(tmp_path, old_program):
  path = tmp_path / "m.jaxpb"
  jp.save(old_program, path)
  jp.save(old_program, path, debug_info=False)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jaxpb"]
  assert jp.load(path) is not None


def test_failed_save_leaves_nothing(tmp_path, old_program, monkeypatch):
  path = tmp_path / "m.jaxpb"
  jp.save(old_program, path)
  old = path.read_bytes()

  def boom(*a, **k):
    raise OSError("disk full")
  monkeypatch.setattr(os, "fsync", boom)
  with pytest.raises(OSError, match="disk full"):
    jp.save(old_program, path, debug_info=False)
  monkeypatch.undo()
  assert path.read_bytes() == old
  assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jaxpb"]
