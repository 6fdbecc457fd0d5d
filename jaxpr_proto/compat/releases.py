"""The JAX releases jaxpr_proto supports: the one place that names them.

`RELEASES` maps each supported JAX minor to the release that the tests and
CI install for it. Each minor has a folder `compat/v0_<minor>/` (adapter,
recorded params, changes). Adding a JAX minor is that folder and one entry
here; pyproject.toml's `jax` range, tests/test_cross_jax.py and .ci/run read
this line or are checked against it (tests/test_layout.py).

This module imports nothing, so tools and CI can read it without JAX.
"""
from __future__ import annotations

import re

RELEASES = {"0.9": "0.9.2", "0.10": "0.10.2", "0.11": "0.11.2", "0.12": "0.12.0.1"}

# The oldest minor pip installs (pyproject.toml); older ones are kept for
# reading and writing files across releases.
OLDEST_INSTALLABLE = "0.10"

_DIGITS = re.compile(r"[0-9]{1,9}(?![0-9])")  # a release number: at most 9 ASCII digits


def parse_version(v: str) -> tuple[int, ...]:
  """'0.10.2' -> (0, 10, 2); '0.10.3.dev20260101' -> (0, 10, 3); '' -> ().

  Digits are ASCII only: a file's text may hold other characters that
  `str.isdigit()` takes ('²') and `int()` refuses, or takes ('١')."""
  out = []
  for part in str(v).split("."):
    m = _DIGITS.match(part)
    if m is None:  # not a release number
      break
    out.append(int(m.group()))
    if m.end() != len(part):
      break
  return tuple(out)


def fmt(v: tuple[int, ...]) -> str:
  return ".".join(map(str, v)) or "?"


MINORS: tuple[tuple[int, int], ...] = tuple(sorted(parse_version(m)[:2] for m in RELEASES))
INSTALLABLE = (parse_version(OLDEST_INSTALLABLE)[:2], MINORS[-1])  # the range pyproject.toml allows


def folder(minor: tuple[int, ...]) -> str:
  """The package of a minor's adapter, params and changes: 'v0_12'."""
  return f"v{minor[0]}_{minor[1]}"


def supported_range() -> str:
  return (f"JAX {fmt(MINORS[0])} to {fmt(MINORS[-1])} "
          f"(pip installs {fmt(INSTALLABLE[0])} to {fmt(INSTALLABLE[1])})")
