"""Short text forms the commands print: avals as JAX prints them, durations,
errors in one line."""
from __future__ import annotations

import re

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


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


def first_line(e: Exception) -> str:
  """The first line of an error, with the next where it ends in ':'."""
  lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]
  return " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def without_addresses(text: str) -> str:
  """A repr without the `at 0x7f...` of its objects (which differ per process)."""
  return _ADDRESS.sub("", text)
