"""`trace MODULE:FUNCTION`: import the module (by name, or a .py file by path)
and return the function."""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys

from jaxpr_proto.cli.exits import CheckFailed, UsageError


def import_function(target: str):
  """'pkg.mod:f' or 'path/to/file.py:Class.method' -> the callable."""
  if ":" not in target:
    raise UsageError(f"expected MODULE:FUNCTION, got {target!r}")
  mod_name, _, attr = target.rpartition(":")
  if not mod_name or not attr:
    raise UsageError(f"expected MODULE:FUNCTION, got {target!r}")
  if mod_name.endswith(".py") or os.sep in mod_name:
    if not os.path.isfile(mod_name):
      raise CheckFailed(f"{mod_name}: no such file")
    # A name of our own, so that the file does not replace a module of the
    # same name in sys.modules.
    name = "_jaxpr_proto_trace_" + re.sub(r"\W", "_", os.path.basename(mod_name)[:-3])
    spec = importlib.util.spec_from_file_location(name, mod_name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
  else:
    if "" not in sys.path and os.getcwd() not in sys.path:
      sys.path.insert(0, os.getcwd())  # as `python -m` does
    try:
      module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
      raise CheckFailed(f"cannot import {mod_name!r}: {e}") from None
  obj = module
  for part in attr.split("."):
    try:
      obj = getattr(obj, part)
    except AttributeError:
      raise CheckFailed(f"{mod_name} has no attribute {attr!r}") from None
  if not callable(obj):
    raise CheckFailed(f"{target} is not callable")
  return obj
