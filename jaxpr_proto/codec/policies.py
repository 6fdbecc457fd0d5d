"""Remat (`jax.checkpoint`) policies read from a file.

A policy is a function JAX calls at every eqn when it partially evaluates
the remat's jaxpr (under `vjp`, `grad`, `linearize`), as
`policy(prim, *avals, **params)`. A file names one as JAX's
`checkpoint_policies` build it: a singleton (`everything_saveable`), a
record (`DotsSaveable`, `SaveOnlyTheseNames`, `SaveAnyNamesButThese` in JAX
0.10-0.11, and `OffloadDotWithNoBatchDims`, `SaveAndOffloadOnlyTheseNames`
in 0.11; JAX 0.9 and 0.12 build the first three as closures, written in
their record form) or a closure written by its factory's arguments
(`save_from_both_policies(policy_1, policy_2)`,
`offload_dot_with_no_batch_dims(offload_src, offload_dst)`,
`save_and_offload_only_these_names(...)`: an extension, see
codec/extensions.py). Decoding builds those, so each is checked here
before JAX meets it: a `save_from_both_policies` of two strings loaded and
then failed under vjp (`'str' object is not callable`, issue 30).

Where a hostile field is refused follows the encoding: an extension's
fields one by one as it is built (build_problem; the path names the
field); JAX's dataclass record as a whole by remat's check (problem; the
path names the policy); the record form of a closure as the closure is
built from it (compat.closure_policy, which takes the fields only as the
record holds them: the factories take any iterable, a str as its letters,
and any truth value; the path names the policy).
"""
from __future__ import annotations

import dataclasses

from jaxpr_proto import compat

# JAX's policy records (JAX 0.10-0.11; the two that offload 0.11's alone), and
# whether each offloads (and so returns no bool, as save_from_both_policies needs).
_RECORDS = {"DotsSaveable": False, "SaveOnlyTheseNames": False, "SaveAnyNamesButThese": False,
            "OffloadDotWithNoBatchDims": True, "SaveAndOffloadOnlyTheseNames": True}

# The factories whose closures offload (JAX 0.9, 0.12, and 0.10's).
_OFFLOADING = ("jax::offload_dot_with_no_batch_dims", "jax::save_and_offload_only_these_names")
_NO_BOOL = "an offloading policy returns no bool, as save_from_both_policies needs"


def _field_problem(field, v) -> str | None:
  ok, what = compat.POLICY_FIELDS.get(field, (None, None))
  if ok is not None and not ok(v):
    return f"must be {what}, got {_describe(v)}"
  return None


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
  offloads = _RECORDS.get(cls.__name__)
  if offloads is not None and cls.__module__ == "jax._src.ad_checkpoint":
    for f in dataclasses.fields(v):
      field, x = f.name, getattr(v, f.name)
      why = _field_problem(field, x)
      if why:
        return f"{cls.__name__}'s {field} {why}"
    return _NO_BOOL if boolean and offloads else None
  if compat.policy_record(v) is not None:  # (JAX 0.9, 0.12: the records as closures,
    return None                           # their fields checked as built: closure_policy)
  factory = compat.policy_factory_of(v)
  if factory == "jax::save_from_both_policies":
    return None  # (its two policies were checked when it was built: build_problem)
  if factory in _OFFLOADING:
    return _NO_BOOL if boolean else None
  return f"not a remat policy: {_describe(v)}"


def build_problem(codec: str, fields: dict) -> tuple[str, str] | None:
  """(field, why) where the fields of a policy extension would build a
  policy that fails when JAX calls it, or None."""
  if codec == "jax::save_from_both_policies":
    for field in ("policy_1", "policy_2"):
      why = problem(fields[field], boolean=True)
      if why:
        return field, why
  else:
    for field, v in fields.items():
      why = _field_problem(field, v)
      if why:
        return field, why
  return None
