"""Small helpers shared by several test files."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest


def buf() -> str:
  """The buf binary: next to the running interpreter (buf-bin in the venv), else PATH."""
  exe_dir = pathlib.Path(sys.executable).parent
  for cand in (exe_dir / "buf", exe_dir / "buf.exe"):
    if cand.is_file() and os.access(cand, os.X_OK):
      return str(cand)
  found = shutil.which("buf")
  if found is None:
    pytest.fail("buf not found next to sys.executable nor on PATH; "
                "install the test extras: pip install -e '.[test]'")
  return found


def run_script(script: str, *args) -> str:
  """The stdout of `script` run with `args` in a fresh Python process (one
  that never imports the test's code), which must exit 0."""
  r = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                     text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  return r.stdout


def run_json(script: str, *args):
  """What `script`, run as `run_script` runs it, prints as JSON on its last line."""
  return json.loads(run_script(script, *args).strip().splitlines()[-1])
