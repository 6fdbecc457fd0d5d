"""What JAX 0.10 changed in its primitives: the changes that the
upgraders apply to files of JAX 0.10 and later read by an older JAX, and
the other way round (see compat/upgrade.py)."""
from __future__ import annotations

from jaxpr_proto.compat.change import Change

SINCE = (0, 10, 0)


def _scan_linear(params):
  n = len(params["jaxpr"].in_avals) if "jaxpr" in params else 0
  return (False,) * n


def _mesh_manual(params) -> frozenset:
  mesh = params.get("mesh")
  return frozenset(getattr(mesh, "manual_axes", ()) or ())


def _newly_manual_up(value, params):
  return frozenset(value) - _mesh_manual(params)


def _newly_manual_down(value, params):
  return frozenset(value) | _mesh_manual(params)


CHANGES: list[Change] = [
    Change(SINCE, "mul", "add_param", "out_dtype", default=None),
    Change(SINCE, "eig", "add_param", "enable_eigvec_derivs", default=False,
           note="JAX 0.9 never differentiates eigenvectors"),
    Change(SINCE, "tridiagonal_solve", "add_param", "perturb_singular", default=False),
    Change(SINCE, "ragged_dot_general", "add_param", "out_sharding", default=None),
    Change(SINCE, "scan", "remove_param", "linear", default=_scan_linear),
    Change(SINCE, "scan", "remove_param", "_split_transpose", default=False),
    Change(SINCE, "shard_map", "rename_param", "manual_axes", new="newly_manual_axes",
           up=_newly_manual_up, down=_newly_manual_down),
    Change(SINCE, "ag_start", "rename_primitive", new="all_gather_start"),
    Change(SINCE, "ag_done", "rename_primitive", new="all_gather_done"),
]

# Allow-listed param types (enums, records) that moved between modules, and
# so between registered names: the name before this minor -> the name since.
TYPE_RENAMES: dict[str, str] = {
    "jax::memory.Space": "jax::core.MemorySpace",
}


