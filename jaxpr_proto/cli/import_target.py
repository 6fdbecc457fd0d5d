"""Modules the user names on the command line: `trace MODULE:FUNCTION`'s
module (by name, or a .py file by path) and its function, and `--import
MODULE` (run, load, check, ...), which imports a module so that what it
registers (jp.register_callback, jp.register_pytree_node, ...) binds the names
a file uses. Only the user names these modules, never a file."""
from __future__ import annotations

import contextlib
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
  module = import_module(mod_name)
  obj = module
  for part in attr.split("."):
    try:
      obj = getattr(obj, part)
    except AttributeError:
      raise CheckFailed(f"{mod_name} has no attribute {attr!r}") from None
  if not callable(obj):
    raise CheckFailed(f"{target} is not callable")
  return obj


def import_module(mod_name: str):
  """A module by name (with the working folder on the path, as `python -m`
  has it) or a .py file by path, imported once."""
  if mod_name.endswith(".py") or os.sep in mod_name:
    if not os.path.isfile(mod_name):
      raise CheckFailed(f"{mod_name}: no such file")
    # A name of our own, so that the file does not replace a module of the
    # same name in sys.modules.
    name = "_jaxpr_proto_trace_" + re.sub(r"\W", "_", os.path.basename(mod_name)[:-3])
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == mod_name:
      return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, mod_name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with _failing_as(mod_name):
      spec.loader.exec_module(module)
    return module
  if "" not in sys.path and os.getcwd() not in sys.path:
    sys.path.insert(0, os.getcwd())
  with _failing_as(mod_name):
    return importlib.import_module(mod_name)


@contextlib.contextmanager
def _failing_as(mod_name):
  """A module that cannot be imported, or fails as it runs, in one line."""
  try:
    yield
  except ModuleNotFoundError as e:
    raise CheckFailed(f"cannot import {mod_name!r}: {e}") from None
  except Exception as e:
    first = (str(e).strip().splitlines() or [""])[0]
    raise CheckFailed(f"importing {mod_name!r} failed: {type(e).__name__}: {first}") from None


def import_modules(names) -> None:
  """`--import MODULE`, each in the order given."""
  for name in names or ():
    import_module(name)
