"""Adapting files written under another JAX release: per-primitive upgraders.

JAX changes its primitives between releases: params are added (often with a
default that means "as before"), removed, renamed or change type, and
primitives are renamed. Each minor's `compat/v0_<minor>/changes.py` lists
what that minor changed (`CHANGES`, each with the first JAX release that has
the new form), and here they are put together. A file records the JAX release that wrote
it (the version of its `jax` namespace, see `versions.jax_version_of`), and
the decoder adapts each eqn from that release to the running one:

* a file from an *older* JAX is upgraded: added params get their default,
  renamed params and primitives get their new names, converted params their
  new type;
* a file from a *newer* JAX is downgraded where that loses nothing: an added
  param that holds its default is dropped, a renamed one gets its old name.
  Where it would change the program (an added param with a non-default
  value, a primitive this JAX lacks), decoding fails with a `VersionError`
  naming the primitive, the param and both JAX versions.

A newer JAX may also change things this table does not know yet. Such a
file still fails clearly: an unknown primitive raises `UnknownPrimitiveError`
naming the file's JAX, and a param this JAX's primitive does not take is
found by the type check that decoding runs (JAX's abstract evaluation
rejects unexpected keyword arguments), and reported as a `VersionError`
naming the primitive and the param (see `checker`).

Changes are keyed by the primitive's newest name. tests/test_versions.py
checks each minor's changes against the recorded param tables, and
tests/test_cross_jax.py moves files between the releases.
"""
from __future__ import annotations

import importlib
from typing import Callable

import jax

from jaxpr_proto import compat
from jaxpr_proto.compat import param_tables
from jaxpr_proto.compat.change import Change, Version, same_value
from jaxpr_proto.compat.standins import refuse_stand_ins
from jaxpr_proto.compat.releases import MINORS, folder
from jaxpr_proto.errors import DecodeError, VersionError
from jaxpr_proto.wire.versions import jax_version_of

_MISSING = object()

# The changes of every supported minor, oldest first.
_MINOR_CHANGES = [importlib.import_module(f"jaxpr_proto.compat.{folder(m)}.changes")
                  for m in MINORS]
CHANGES: list[Change] = [c for mod in _MINOR_CHANGES for c in mod.CHANGES]
# {primitive: (first JAX release that has it, function of the operands and params)}
EXPANSIONS: dict[str, tuple[Version, Callable]] = {
    name: (mod.SINCE, fn) for mod in _MINOR_CHANGES for name, fn in getattr(mod, "EXPANSIONS", {}).items()}
FOREIGN_ENUMS = frozenset(e for mod in _MINOR_CHANGES for e in getattr(mod, "FOREIGN_ENUMS", ()))
TYPE_RENAMES: dict[str, str] = {
    old: new for mod in _MINOR_CHANGES for old, new in getattr(mod, "TYPE_RENAMES", {}).items()}


def type_alias(name: str) -> str | None:
  """The other registered name of an enum or record type that was renamed."""
  new = TYPE_RENAMES.get(name)
  if new is not None:
    return new
  for old, new in TYPE_RENAMES.items():
    if new == name:
      return old
  return None


def foreign_record(name: str):
  """A builder for a record type this JAX lacks but can express otherwise
  (the remat policies that JAX 0.9 and 0.12 build as closures), or None."""
  return compat.closure_policy(name)


# --- the adapter -------------------------------------------------------------

def _known_params(version: Version) -> dict[str, frozenset]:
  """{primitive: param names} of a JAX minor (tools/param_names.py), or {}
  for a JAX minor without a table."""
  return param_tables.param_names(version)


_RENAMED_TO = {c.primitive: c.new for c in CHANGES if c.kind == "rename_primitive"}


def _newest_name(name: str) -> str:
  seen = set()
  while name in _RENAMED_TO and name not in seen:
    seen.add(name)
    name = _RENAMED_TO[name]
  return name


def _fmt(v: Version) -> str:
  return ".".join(map(str, v)) or "?"


class Upgrader:
  """Adapts the primitives and params of a file from JAX `file` to JAX `reader`."""

  def __init__(self, file: Version, reader: Version = compat.JAX_VERSION):
    self.file, self.reader = file, reader
    self.newer = file > reader
    if reader >= file:  # upgrade: changes in (file, reader]
      changes = [c for c in CHANGES if file < c.since <= reader]
    else:               # downgrade: changes in (reader, file], newest first
      changes = [c for c in reversed(CHANGES) if reader < c.since <= file]
    self.changes = changes
    self._by_prim: dict[str, list[Change]] = {}
    for c in changes:
      if c.kind != "rename_primitive":
        self._by_prim.setdefault(_newest_name(c.primitive), []).append(c)
    self._prim_names = {}
    for c in changes:
      if c.kind == "rename_primitive":
        if self.newer:
          self._prim_names[c.new] = c.primitive
        else:
          self._prim_names[c.primitive] = c.new

    # Every jaxpr is closed from JAX 0.11 (see compat.UNIFIED_JAXPR).
    self.closes_jaxprs = file[:2] >= (0, 11) > reader[:2]

  def __bool__(self) -> bool:
    return bool(self.changes) or self.newer

  def expansion(self, name: str):
    """The function that computes the file's primitive `name`, which this
    JAX lacks (see EXPANSIONS), or None."""
    entry = EXPANSIONS.get(name)
    if entry is None or not self.newer or not self.file >= entry[0] > self.reader:
      return None
    return entry[1]

  def expand(self, name: str, ins, outs, params: dict, path: str):
    """(closed_call primitive, its params) that compute the eqn `name`."""
    fn = self.expansion(name)
    avals = [x.aval for x in ins]
    try:
      cj = jax.make_jaxpr(lambda *xs: fn(*xs, **params))(
          *[jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals])
    except Exception as e:
      raise VersionError(f"primitive {name} of JAX {_fmt(self.file)} cannot be computed by "
                         f"JAX {_fmt(self.reader)} here: {type(e).__name__}: {e}", path) from None
    out_avals = [v.aval for v in outs]
    if [(a.shape, a.dtype) for a in cj.out_avals] != [(a.shape, a.dtype) for a in out_avals]:
      raise DecodeError(f"primitive {name}: outputs {out_avals} do not match its operands "
                        f"{avals}", path)
    return compat.closed_call_p, {"call_jaxpr": cj}

  def describe(self) -> str:
    return f"the file was written by JAX {_fmt(self.file)}, this is JAX {_fmt(self.reader)}"

  def primitive_name(self, name: str) -> str:
    """The name in this JAX of the file's primitive `name`."""
    return self._prim_names.get(name, name)

  def params(self, prim_name: str, params: dict, path: str) -> dict:
    """Adapts the params (decoded, in a fresh dict) of one eqn of `prim_name`
    (this JAX's name), then refuses a param this JAX's primitive does not take."""
    for c in self._by_prim.get(_newest_name(prim_name), ()):
      where = f"{path}.params" if c.kind == "rewrite" else f"{path}.params.{c.param}"
      try:
        if not self.newer:
          self._up(c, params, where)
        else:
          self._down(c, prim_name, params, where)
      except VersionError as e:
        raise VersionError(f"primitive {prim_name}: {e.message} ({self.describe()})",
                           e.path or where) from None
    if self.closes_jaxprs:
      self._open_jaxprs(prim_name, params, path)
    refuse_stand_ins(prim_name, params, path, f" ({self.describe()})")
    known = _known_params(self.reader).get(prim_name)
    if known is not None:
      for name in params:
        if name not in known:
          raise VersionError(
              f"primitive {prim_name} has param {name!r}, which the {prim_name} of "
              f"JAX {_fmt(self.reader)} does not take ({self.describe()}"
              f"{'' if self.newer else '; no upgrader knows it'})", f"{path}.params.{name}")
    return params

  def _open_jaxprs(self, prim_name: str, params: dict, path: str) -> None:
    """Files of JAX >= 0.11 hold every jaxpr closed; an older JAX wants some
    params open (a Jaxpr without consts)."""
    for name in param_tables.open_jaxpr_params(self.reader).get(prim_name, ()):
      v = params.get(name)
      if isinstance(v, compat.ClosedJaxpr):
        if v.consts:
          raise VersionError(
              f"primitive {prim_name} param {name} is a jaxpr with constants, which the "
              f"{prim_name} of JAX {_fmt(self.reader)} cannot hold ({self.describe()})",
              f"{path}.params.{name}")
        params[name] = v.jaxpr

  def _up(self, c: Change, params: dict, where: str) -> None:
    if c.kind == "add_param":
      if c.param not in params:
        params[c.param] = c.default(params) if callable(c.default) else c.default
    elif c.kind == "remove_param":
      params.pop(c.param, None)
    elif c.kind == "rename_param":
      if c.param in params:
        v = params.pop(c.param)
        params[c.new] = c.up(v, params) if c.up else v
    elif c.kind == "convert_param":
      if c.param in params and c.up is not None:
        params[c.param] = c.up(params[c.param], params)
    elif c.kind == "rewrite":
      c.up(params)

  def _down(self, c: Change, prim_name: str, params: dict, where: str) -> None:
    if c.kind == "add_param":
      v = params.get(c.param, _MISSING)
      if v is _MISSING:
        return
      default = c.default(params) if callable(c.default) else c.default
      if not same_value(v, default):
        raise VersionError(
            f"primitive {prim_name} has param {c.param}={v!r}, which needs JAX >= "
            f"{_fmt(c.since)} ({self.describe()}); only the default "
            f"{c.param}={default!r} can be read here", where)
      del params[c.param]
    elif c.kind == "remove_param":
      if c.param not in params:
        params[c.param] = c.default(params) if callable(c.default) else c.default
    elif c.kind == "rename_param":
      if c.new in params:
        v = params.pop(c.new)
        params[c.param] = c.down(v, params) if c.down else v
    elif c.kind == "convert_param":
      if c.param in params:
        if c.down is None:
          raise VersionError(
              f"primitive {prim_name} param {c.param} has the type of JAX >= "
              f"{_fmt(c.since)} ({self.describe()})", where)
        params[c.param] = c.down(params[c.param], params)
    elif c.kind == "rewrite":
      c.down(params)


def for_module(m) -> Upgrader | None:
  """The Upgrader for a Module, or None when it was written by this JAX's changes."""
  file = compat.parse_version(jax_version_of(m))
  if not file:
    return None
  up = Upgrader(file)
  return up if up else None
