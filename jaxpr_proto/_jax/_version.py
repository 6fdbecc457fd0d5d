"""JAX release numbers, and the JAX minors jaxpr_proto has an adapter for."""
from __future__ import annotations

# One adapter module per JAX minor (jaxpr_proto/_jax/v0_<minor>.py).
# JAX 0.9 is kept for reading and writing files across releases; pip installs
# need JAX >= 0.10 (pyproject.toml).
ADAPTERS = {(0, 9): "v0_9", (0, 10): "v0_10", (0, 11): "v0_11", (0, 12): "v0_12"}
INSTALLABLE = ((0, 10), (0, 12))  # the range pyproject.toml allows


def parse_version(v: str) -> tuple[int, ...]:
  """'0.10.2' -> (0, 10, 2); '0.10.3.dev20260101' -> (0, 10, 3); '' -> ()."""
  out = []
  for part in str(v).split("."):
    digits = ""
    for c in part:
      if not c.isdigit():
        break
      digits += c
    if not digits or len(digits) > 9:  # not a release number
      break
    out.append(int(digits))
    if digits != part:
      break
  return tuple(out)


def fmt(v: tuple[int, ...]) -> str:
  return ".".join(map(str, v)) or "?"


def supported_range() -> str:
  minors = sorted(ADAPTERS)
  return f"JAX {fmt(minors[0])} to {fmt(minors[-1])} (pip installs {fmt(INSTALLABLE[0])} to {fmt(INSTALLABLE[1])})"
