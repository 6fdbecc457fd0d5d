"""`trace --args`: 'f32[8,3],i32[]' -> abstract arguments (jax.ShapeDtypeStruct).

Dtype names come from jaxpr_proto.codec.dtypes.by_name(), the project's one
dtype table (short names as JAX prints them, and long ones like float32).
"""
from __future__ import annotations

import re

import numpy as np

from jaxpr_proto.cli.exits import UsageError
from jaxpr_proto.codec import dtypes

_SPEC = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*(?:\[([^\]]*)\])?\s*")


def parse_arg_specs(text: str):
  """'f32[8,3],i32[]' -> [jax.ShapeDtypeStruct]; symbolic dims share one scope."""
  import jax
  table = dtypes.by_name()
  specs, pos = [], 0
  text = text.strip()
  raw = []
  while pos < len(text):
    mt = _SPEC.match(text, pos)
    if not mt or mt.end() == pos:
      raise UsageError(f"bad --args at {text[pos:]!r}; expected e.g. 'f32[8,3],i32[]'")
    name, dims = mt.group(1), mt.group(2)
    if name not in table:
      raise UsageError(f"unknown dtype {name!r} in --args; known: "
                       + ", ".join(sorted(k for k in table if len(k) <= 5)))
    dims = [d.strip() for d in dims.split(",")] if dims and dims.strip() else []
    raw.append((table[name], dims, name))
    pos = mt.end()
    if pos < len(text):
      if text[pos] != ",":
        raise UsageError(f"bad --args at {text[pos:]!r}; separate arguments with ','")
      pos += 1
      if pos >= len(text):
        raise UsageError("bad --args: trailing ','")
  x64 = jax.config.jax_enable_x64
  scope = None
  for dt, dims, name in raw:
    if dt.itemsize == 8 and dt.kind in "iuf" or dt == np.complex128:
      if not x64:  # without x64, JAX would make them 32-bit
        raise UsageError(f"--args {name}: 64-bit types need JAX_ENABLE_X64=1")
    if all(re.fullmatch(r"\d+", d) for d in dims):
      shape = tuple(int(d) for d in dims)
    else:
      if any(not d for d in dims):
        raise UsageError(f"bad --args shape [{','.join(dims)}]")
      from jax import export
      if scope is None:  # one scope, so that `b` in two arguments is the same dim
        scope = export.SymbolicScope()
      try:
        shape = export.symbolic_shape(",".join(dims), scope=scope)
      except Exception as e:
        raise UsageError(f"bad symbolic shape [{','.join(dims)}]: {e}") from None
    specs.append(jax.ShapeDtypeStruct(shape, dt))
  return specs
