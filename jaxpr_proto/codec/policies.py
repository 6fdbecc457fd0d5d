"""Remat (`jax.checkpoint`) policies read from a file.

A policy is a function JAX calls at every eqn when it partially evaluates
the remat's jaxpr (under `vjp`, `grad`, `linearize`), as
`policy(prim, *avals, **params)`. A file names one as JAX's
`checkpoint_policies` build it: a singleton (`everything_saveable`), a
record (`DotsSaveable`, `SaveOnlyTheseNames`, `SaveAnyNamesButThese` in JAX
0.10-0.11; closures in 0.9 and 0.12) or a closure written by its factory's
arguments (`save_from_both_policies(policy_1, policy_2)`,
`offload_dot_with_no_batch_dims(offload_src, offload_dst)`,
`save_and_offload_only_these_names(...)`: an extension, see
codec/extensions.py). Decoding builds those, so each is checked here
before JAX meets it: a `save_from_both_policies` of two strings loaded and
then failed under vjp (`'str' object is not callable`, issue 30).
"""
from __future__ import annotations


from jaxpr_proto import compat

# The memory kinds that offload_dot_with_no_batch_dims may move residuals
# between: JAX offloads from the device (it fails on `pinned_host` as the
# source) to a memory kind that `core.mem_kind_to_space` reads.
OFFLOAD_SRC = ("device",)
OFFLOAD_DST = ("device", "pinned_host", "unpinned_host")

# The record classes' fields, each a (type check, what it must be).
_RECORD_FIELDS = {
    "DotsSaveable": {"only_if_no_batch_dims": (lambda v: type(v) is bool, "a bool")},
    "SaveOnlyTheseNames": {"saveable_names": (lambda v: _names(v), "a frozenset of str")},
    "SaveAnyNamesButThese": {"names": (lambda v: _names(v), "a frozenset of str")},
}


def _names(v) -> bool:
  return type(v) is frozenset and all(type(n) is str for n in v)


def _describe(v) -> str:
  r = repr(v)
  return f"{type(v).__name__} {r if len(r) < 60 else r[:57] + '...'}"


def problem(v, boolean: bool = False) -> str | None:
  """Why `v` is not a remat policy of JAX's (one returning a bool, where
  `boolean`: what save_from_both_policies combines), or None."""
  p = compat.checkpoint_policies
  if v is p.everything_saveable or v is p.nothing_saveable:
    return None
  cls = type(v)
  fields = _RECORD_FIELDS.get(cls.__name__)
  if fields is not None and cls.__module__ == "jax._src.ad_checkpoint":
    for field, (ok, what) in fields.items():
      if not ok(getattr(v, field, None)):
        return f"{cls.__name__}'s {field} must be {what}, got {_describe(getattr(v, field, None))}"
    return None
  if compat.policy_record(v) is not None:  # (JAX 0.9, 0.12: the records as closures)
    return None
  factory = compat.policy_factory_of(v)
  if factory == "jax::save_from_both_policies":
    return None  # (its two policies were checked when it was built: build_problem)
  if factory in _OFFLOADING:
    return "an offloading policy returns no bool, as save_from_both_policies needs" if boolean else None
  return f"not a remat policy: {_describe(v)}"


def build_problem(codec: str, fields: dict) -> tuple[str, str] | None:
  """(field, why) where the fields of a policy extension would build a
  policy that fails when JAX calls it, or None."""
  if codec == "jax::save_from_both_policies":
    for field in ("policy_1", "policy_2"):
      why = problem(fields[field], boolean=True)
      if why:
        return field, why
  elif codec in _OFFLOADING:
    for field, allowed in (("offload_src", OFFLOAD_SRC), ("offload_dst", OFFLOAD_DST)):
      v = fields[field]
      if type(v) is not str or v not in allowed:
        return field, f"must be one of the memory kinds {', '.join(allowed)}, got {_describe(v)}"
    for field in ("names_which_can_be_saved", "names_which_can_be_offloaded"):
      if field in fields and not _names(fields[field]):
        return field, f"must be a frozenset of str, got {_describe(fields[field])}"
  return None


# The factories whose policies offload residuals (and return no bool).
_OFFLOADING = ("jax::offload_dot_with_no_batch_dims", "jax::save_and_offload_only_these_names")
