"""Remat policies: the records files carry and the closures some minors
build, the fields of each, and the factories of those written by their
arguments."""
from __future__ import annotations

import functools

from jax._src import ad_checkpoint

checkpoint_policies = ad_checkpoint.checkpoint_policies


# JAX 0.10 and 0.11 build the named remat policies as records (DotsSaveable,
# SaveOnlyTheseNames, SaveAnyNamesButThese); JAX 0.9 and 0.12 build them as
# closures. Files always carry the record form, so that they move between
# releases; these two functions convert in the closure releases.

def policy_record(fn):
  """(record name, {field: value}) of a remat policy closure, or None."""
  import types
  if not isinstance(fn, types.FunctionType):
    return None
  p = checkpoint_policies
  if fn is p.dots_saveable:
    return "jax::ad_checkpoint.DotsSaveable", {"only_if_no_batch_dims": False}
  if fn is p.dots_with_no_batch_dims_saveable:
    return "jax::ad_checkpoint.DotsSaveable", {"only_if_no_batch_dims": True}
  for factory, record, field in (
      (p.save_only_these_names, "jax::ad_checkpoint.SaveOnlyTheseNames", "saveable_names"),
      (p.save_any_names_but_these, "jax::ad_checkpoint.SaveAnyNamesButThese", "names")):
    probe = factory("x")
    if isinstance(probe, types.FunctionType) and fn.__code__ is probe.__code__:
      (names,) = (c.cell_contents for c in fn.__closure__)
      return record, {field: frozenset(names)}
  return None


# The memory kinds an offloading remat policy may move residuals between:
# JAX offloads from the device (it fails on `pinned_host` as the source) to a
# memory kind that `core.mem_kind_to_space` reads.
OFFLOAD_SRC = ("device",)
OFFLOAD_DST = ("device", "pinned_host", "unpinned_host")


def _memory_kind(allowed):
  return (lambda v: type(v) is str and v in allowed,
          f"one of the memory kinds {', '.join(allowed)}")


def _names(v) -> bool:
  return type(v) is frozenset and all(type(n) is str for n in v)


# What each field of a remat policy (a record's, or a factory's argument) must
# be, by its name: (check, what it must be). codec/policies.py checks decoded
# policies with it, closure_policy the records it builds closures of.
POLICY_FIELDS = {
    "only_if_no_batch_dims": (lambda v: type(v) is bool, "a bool"),
    **{name: (_names, "a frozenset of str")
       for name in ("saveable_names", "names", "names_which_can_be_saved",
                    "names_which_can_be_offloaded")},
    "offload_src": _memory_kind(OFFLOAD_SRC),
    "offload_dst": _memory_kind(OFFLOAD_DST),
}


def closure_policy(record_name: str):
  """A builder (fields -> policy closure) for a policy record this JAX lacks
  (JAX 0.10-0.11's records; JAX 0.11's offloading ones), or None. It takes
  each field only as the record holds it (POLICY_FIELDS: a frozenset of str,
  a bool, a memory kind), raising TypeError otherwise: the factories take any
  iterable (a str as its letters) and any truth value."""
  p = checkpoint_policies

  def fields(f, *names):
    if set(f) != set(names):
      raise TypeError(f"needs the fields {sorted(names)}, got {sorted(f)}")
    for name in names:
      ok, what = POLICY_FIELDS[name]
      if not ok(f[name]):
        r = repr(f[name])
        raise TypeError(f"{name} must be {what}, got {type(f[name]).__name__} "
                        f"{r if len(r) < 60 else r[:57] + '...'}")
    return f

  return {
      "jax::ad_checkpoint.SaveOnlyTheseNames":
          lambda f: p.save_only_these_names(*sorted(fields(f, "saveable_names")["saveable_names"])),
      "jax::ad_checkpoint.SaveAnyNamesButThese":
          lambda f: p.save_any_names_but_these(*sorted(fields(f, "names")["names"])),
      "jax::ad_checkpoint.DotsSaveable":
          lambda f: (p.dots_with_no_batch_dims_saveable
                     if fields(f, "only_if_no_batch_dims")["only_if_no_batch_dims"]
                     else p.dots_saveable),
      "jax::ad_checkpoint.OffloadDotWithNoBatchDims":
          lambda f: p.offload_dot_with_no_batch_dims(**fields(f, "offload_src", "offload_dst")),
      "jax::ad_checkpoint.SaveAndOffloadOnlyTheseNames":
          lambda f: p.save_and_offload_only_these_names(**fields(
              f, "names_which_can_be_saved", "names_which_can_be_offloaded",
              "offload_src", "offload_dst")),
  }.get(record_name)


@functools.cache
def policy_factories() -> dict[str, tuple]:
  """{name: (factory, argument names)}: the remat policy factories of
  `jax.checkpoint_policies` whose closures are written by their arguments,
  each public function there of named arguments alone (a policy itself
  takes `prim`; one of `*names` is written as a record, policy_record):
  save_from_both_policies, offload_dot_with_no_batch_dims,
  save_and_offload_only_these_names."""
  import inspect
  import types
  out = {}
  for name, fn in sorted(vars(checkpoint_policies).items()):
    if name.startswith("_") or not isinstance(fn, types.FunctionType):
      continue
    params = list(inspect.signature(fn).parameters.values())
    if (not params or params[0].name == "prim"
        or any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) for q in params)):
      continue
    out[f"jax::{name}"] = (fn, tuple(q.name for q in params))
  return out


@functools.cache
def _policy_codes() -> dict:
  """{code object: factory name} of the closures policy_factories build: a
  function defined in the factory (a constant of its code), or the one a
  call with None arguments returns (JAX 0.11's offload_dot_with_no_batch_dims
  builds it in a helper)."""
  import types
  out = {}
  for name, (factory, argnames) in policy_factories().items():
    for c in factory.__code__.co_consts:
      if isinstance(c, types.CodeType):
        out[c] = name
    try:
      probe = factory(**dict.fromkeys(argnames))
    except Exception:  # a factory that reads its arguments (names into a set)
      continue
    if isinstance(probe, types.FunctionType):
      out.setdefault(probe.__code__, name)
  return out


def policy_factory_of(fn) -> str | None:
  """The name (in policy_factories) of the factory whose closure `fn` is."""
  return _policy_codes().get(getattr(fn, "__code__", None))
