"""Small helpers shared by several test files."""
import os
import pathlib
import shutil
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
