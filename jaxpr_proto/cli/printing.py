"""Short text forms the commands print: avals as JAX prints them, durations."""
from __future__ import annotations


def aval_str(aval) -> str:
  """`f32[8,3]`, as in a printed jaxpr."""
  try:
    return aval.str_short(short_dtypes=True)
  except Exception:  # an aval without str_short
    return str(aval)


def avals_str(avals) -> str:
  """`f32[8,3], i32[]`; `-` for none."""
  return ", ".join(aval_str(a) for a in avals) or "-"


def ms(seconds: float) -> str:
  return f"{seconds * 1e3:.1f} ms"
