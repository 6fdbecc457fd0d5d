"""Runs the loading path once as the package is imported, so that a
process's first `jp.loads` or unpickling (a Dask worker's first task, a
server's first request) does not pay the first uses of every code path:
the interpreter's and JAX's constructors. Issue 32 measured them at about
2 ms of the MLP step's 6-9 ms first load.

It loads warmup.jaxpb (a small training step, tools/make_warmup.py) with
every check, then again as a file that passed, makes its key in the verdict
cache where a folder is set (not reading or writing the folder), then
empties the memos that filled (`jp.clear_caches()`): what it leaves is code
run once, not verdicts.
It makes no arrays on a device, starts no backend, keeps nothing in the
verdict cache folder, and leaves no thread of its own running (it ends the
traceback worker it started; the first load that wants a traceback starts
one again). It costs about 7 ms of `import jaxpr_proto`. It never fails an
import: where it cannot run, the first load pays as before, and `warmed`
says so.
"""
from __future__ import annotations

import os

from jaxpr_proto import api
from jaxpr_proto._config import config
from jaxpr_proto.codec import tracebacks

PATH = os.path.join(os.path.dirname(__file__), "warmup.jaxpb")

warmed = False


def warm() -> bool:
  global warmed
  cache_dir = config.verdict_cache_dir
  config.update("verdict_cache_dir", None)
  try:
    with open(PATH, "rb") as f:
      data = f.read()
    api.loads(data)
    api.loads(data)  # (as a file that passed: the path of loading again)
    if cache_dir:  # (the verdict cache's key of a file, made once; its folder untouched)
      from jaxpr_proto.check import verdict_cache
      verdict_cache.file_key(api.parse(data), bytes(32), False, False)
    warmed = True
  except Exception:  # noqa: BLE001 (a warm-up that cannot run leaves the first load cold)
    warmed = False
  finally:
    config.update("verdict_cache_dir", cache_dir)
    api.clear_caches()
    tracebacks.stop_worker()  # (no thread left running by an import)
  return warmed
