"""What JAX 0.11 changed in its primitives: the changes that the
upgraders apply to files of JAX 0.11 and later read by an older JAX, and
the other way round (see compat/upgrade.py)."""
from __future__ import annotations

import jax

from jaxpr_proto import compat
from jaxpr_proto.compat.change import Change, not_convertible
from jaxpr_proto.compat.standins import EnumStandIn, FlatTreeStandIn
from jaxpr_proto.errors import VersionError

SINCE = (0, 11, 0)


def _inline_up(v, params):
  """jit's inline: a bool before JAX 0.11, then a jax.Inline."""
  return {True: compat.Inline.JAX_LATE, False: compat.Inline.AUTO}.get(v, v) if isinstance(v, bool) else v


def _inline_down(v, params):
  if isinstance(v, bool):
    return v
  member = v.member if isinstance(v, EnumStandIn) else getattr(v, "name", None)
  if member == "JAX_LATE":
    return True
  if member == "AUTO":
    return False
  raise VersionError(f"inline={v!r} has no equivalent before JAX 0.11")


def _scan_flattrees_up(params):
  """JAX 0.11's scan groups its operands with FlatTrees instead of counts."""
  if "num_consts" not in params or "num_carry" not in params or "jaxpr" not in params:
    return  # not the old form: the type check will tell
  nc, nk = params.pop("num_consts"), params.pop("num_carry")
  jaxpr = params["jaxpr"]
  n_in, n_out = len(jaxpr.in_avals), len(jaxpr.out_avals)
  if not (type(nc) is int and type(nk) is int and 0 <= nc and 0 <= nk
          and nc + nk <= n_in and nk <= n_out):  # (FlatTrees of 10**18 Nones exhaust memory)
    raise VersionError(f"scan's num_consts={nc!r} and num_carry={nk!r} do not fit its "
                       f"jaxpr of {n_in} inputs and {n_out} outputs")
  params["ft_in"], params["ft_out"] = compat.scan_flattrees(nc, nk, n_in - nc - nk, n_out - nk)


def _scan_flattrees_down(params):
  if "ft_in" not in params:
    return  # not the new form: the type check will tell
  consts, carry, _ = _part_sizes(params.pop("ft_in"), 3, "ft_in")
  params.pop("ft_out", None)
  params["num_consts"], params["num_carry"] = consts, carry


def _part_sizes(t, n: int, name: str) -> list[int]:
  sizes = t.part_sizes() if isinstance(t, FlatTreeStandIn) else None
  if sizes is None or len(sizes) != n:
    raise VersionError(f"scan's {name} is not a FlatTree of {n} parts")
  return sizes


def _one_minus_square(x):
  """1 - x**2 as JAX 0.11 lowers one_minus_square: (1 + x) * (1 - x)."""
  one = jax.lax.full_like(x, 1)
  return jax.lax.mul(jax.lax.add(one, x), jax.lax.sub(one, x))


CHANGES: list[Change] = [
    Change(SINCE, "scan", "rewrite", "num_consts,num_carry -> ft_in,ft_out",
           up=_scan_flattrees_up, down=_scan_flattrees_down),
    Change(SINCE, "composite", "rename_param", "jaxpr", new="call_jaxpr"),
    Change(SINCE, "jit", "convert_param", "inline", up=_inline_up, down=_inline_down,
           note="True/False became Inline.JAX_LATE/AUTO"),
    Change(SINCE, "reduce_max", "add_param", "out_sharding", default=None),
    Change(SINCE, "reduce_min", "add_param", "out_sharding", default=None),
    Change(SINCE, "top_k", "add_param", "is_stable", default=True,
           note="JAX 0.10's top_k was stable"),
    Change(SINCE, "new_ref", "add_param", "pin", default=False),
    Change(SINCE, "empty_ref", "add_param", "pin", default=False),
    Change(SINCE, "closed_call", "rename_primitive", new="eval_jaxpr",
           note="JAX 0.11 deleted closed_call_p; it is an alias of eval_jaxpr_p"),
    Change(SINCE, "eval_jaxpr", "rewrite", "drop closed_call's name",
           up=lambda p: p.pop("name", None), down=lambda p: None),
    # Pallas kernels' primitives (Mosaic TPU and GPU).
    Change(SINCE, "dma_wait", "add_param", "is_wait_send", default=False),
    Change(SINCE, "get_barrier_semaphore", "add_param", "tag", default=None),
    Change(SINCE, "barrier_arrive", "add_param", "has_user_predicate", default=False),
    Change(SINCE, "copy_gmem_to_smem", "add_param", "has_user_predicate", default=False),
    Change(SINCE, "copy_gmem_to_smem", "add_param", "has_barrier", default=True,
           note="JAX 0.10's copy_gmem_to_smem always took a barrier"),
    *[Change(SINCE, prim, "rewrite", "n: an operand -> a param",
             up=not_convertible(f"{prim}'s n became a param"),
             down=not_convertible(f"{prim}'s n became a param"))
      for prim in ("wgmma_wait", "wait_smem_to_gmem", "set_max_registers_p")],
    Change(SINCE, "xla_metadata_call", "rewrite", "scheduling_group -> xla_metadata, ad_metadata",
           up=not_convertible("xla_metadata_call's params changed"),
           down=not_convertible("xla_metadata_call's params changed")),
]

# Primitives new in this minor that an older JAX lacks but can compute: an
# older reader replaces each such eqn by a closed_call of this function's
# jaxpr. {primitive: function of the operands and params}
EXPANSIONS = {"one_minus_square": _one_minus_square}

# Enum types new in this minor that an older JAX reads as EnumStandIn.
FOREIGN_ENUMS = frozenset({"jax::api.Inline"})
