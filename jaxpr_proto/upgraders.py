"""Adapting files written under another JAX release: per-primitive upgraders.

JAX changes its primitives between releases: params are added (often with a
default that means "as before"), removed, renamed or change type, and
primitives are renamed. `CHANGES` lists these changes, each with the first
JAX release that has the new form. A file records the JAX release that wrote
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

Changes are keyed by the primitive's newest name. The table covers the
releases the project supports (JAX 0.9.x and 0.10.x); tests/test_cross_jax.py
checks it against both.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax

from jaxpr_proto import _jax, _param_tables, values
from jaxpr_proto.errors import DecodeError, VersionError

Version = tuple[int, ...]

_MISSING = object()


@dataclasses.dataclass(frozen=True)
class Change:
  """One change of a primitive in JAX release `since`."""
  since: Version
  primitive: str       # the primitive's name as of `since`
  kind: str            # add_param | remove_param | rename_param | convert_param | rename_primitive | rewrite
  param: str = ""      # the param (the old name, for rename_param)
  new: str = ""        # the new name (rename_param, rename_primitive)
  # add_param: the value that means "as before" (a callable gets the params);
  # remove_param: the value to restore when downgrading.
  default: Any = None
  # convert_param/rename_param: old value -> new value (and back);
  # rewrite: changes the params dict in place, old form -> new form (and back).
  up: Callable | None = None
  down: Callable | None = None
  note: str = ""


class FlatTreeStandIn:
  """A FlatTree (JAX >= 0.11's scan ft_in/ft_out) read by a JAX without
  FlatTrees: just enough of it for the upgraders, mirroring JAX's
  jax._src.flattree (`vals`, `unpack`)."""
  __slots__ = ("kind", "fields")

  def __init__(self, kind: str, fields: dict):
    self.kind, self.fields = kind, fields

  def vals(self) -> list:
    """The leaves, as FlatTree.vals (a filtered tree's: its Right values)."""
    k, f = self.kind, self.fields
    if k in ("tuple", "dict"):
      return [x for e in f["elts" if k == "tuple" else "vals"] for x in _node(e).vals()]
    if k == "pytree":
      return list(f["xs"])
    if k == "singleton":
      return [f["val"]]
    if k == "static":
      return []
    if k == "filtered":
      eithers = [_node(x) for x in _node(f["val"]).vals()]
      if any(e.kind != "either" for e in eithers):
        raise VersionError("a filtered FlatTree whose leaves are not Eithers")
      return [e.fields["val"] for e in eithers if e.fields["is_right"]]
    raise VersionError(f"a FlatTree {k} has no leaves")

  def __len__(self) -> int:
    return len(self.vals())

  def unpack(self) -> list[FlatTreeStandIn]:
    """The children of a tuple node, as FlatTree.unpack."""
    k, f = self.kind, self.fields
    if k == "tuple":
      return [_node(e) for e in f["elts"]]
    if k == "pytree":
      try:
        children = f["tree"].children()
      except Exception:
        raise VersionError("a FlatTree pytree without a tuple tree") from None
      out, xs = [], list(f["xs"])
      for c in children:
        out.append(FlatTreeStandIn("pytree", {"xs": tuple(xs[:c.num_leaves]), "tree": c}))
        xs = xs[c.num_leaves:]
      return out
    if k == "filtered":
      return [FlatTreeStandIn("filtered", {"val": t}) for t in _node(f["val"]).unpack()]
    raise VersionError(f"expected a FlatTree of parts, got a {k}")

  def part_sizes(self) -> list[int]:
    return [len(p) for p in self.unpack()]

  def __repr__(self) -> str:
    return f"FlatTree.{self.kind}({self.fields})"


def _node(x) -> FlatTreeStandIn:
  if isinstance(x, FlatTreeStandIn):
    return x
  raise VersionError(f"expected a FlatTree, got a {type(x).__name__}")


# Primitives of a newer JAX that an older JAX lacks but can compute: an older
# reader replaces each such eqn by a closed_call of this function's jaxpr.
# {primitive: (first JAX release that has it, function of the operands and params)}
def _one_minus_square(x):
  """1 - x**2 as JAX 0.11 lowers one_minus_square: (1 + x) * (1 - x)."""
  one = jax.lax.full_like(x, 1)
  return jax.lax.mul(jax.lax.add(one, x), jax.lax.sub(one, x))


def _polynomial(x, *coeffs, unroll=None):
  """Horner's rule, as JAX 0.12 lowers polynomial (a scan past `unroll` terms)."""
  import jax.numpy as jnp
  threshold = 8 if unroll is None else unroll
  if len(coeffs) <= threshold:
    acc = coeffs[-1]
    for c in reversed(coeffs[:-1]):
      acc = jnp.add(jnp.multiply(acc, x), c)
    return acc
  shape = jnp.broadcast_shapes(x.shape, *(c.shape for c in coeffs))
  cshape = jnp.broadcast_shapes(*(c.shape for c in coeffs))
  stacked = jnp.stack([jnp.broadcast_to(c, cshape) for c in reversed(coeffs)])
  y, _ = jax.lax.scan(lambda acc, c: (jnp.add(jnp.multiply(acc, x), c), None),
                      jnp.zeros(shape, x.dtype), stacked, unroll=threshold)
  return y


EXPANSIONS: dict[str, tuple[Version, Callable]] = {
    "one_minus_square": ((0, 11, 0), _one_minus_square),
    "polynomial": ((0, 12, 0), _polynomial),
}


class Expanded:
  """Stands for a primitive of EXPANSIONS while its eqn is decoded."""
  __slots__ = ("name",)

  def __init__(self, name: str):
    self.name = name


class EnumStandIn:
  """A member of an enum type of a newer JAX (`FOREIGN_ENUMS`), read by a JAX
  without that type: the upgraders convert it or refuse it."""
  __slots__ = ("type", "member")

  def __init__(self, type_name: str, member: str):
    self.type, self.member = type_name, member

  def __repr__(self) -> str:
    return f"{self.type}.{self.member}"


# Enum types of newer JAX releases that an older JAX can read as EnumStandIn.
FOREIGN_ENUMS = frozenset({"jax::api.Inline"})


def _inline_up(v, params):
  """jit's inline: a bool before JAX 0.11, then a jax.Inline."""
  return {True: _jax.Inline.JAX_LATE, False: _jax.Inline.AUTO}.get(v, v) if isinstance(v, bool) else v


def _inline_down(v, params):
  if isinstance(v, bool):
    return v
  member = v.member if isinstance(v, EnumStandIn) else getattr(v, "name", None)
  if member == "JAX_LATE":
    return True
  if member == "AUTO":
    return False
  raise VersionError(f"inline={v!r} has no equivalent before JAX 0.11")


def refuse_stand_ins(prim_name: str, params: dict, path: str, why: str) -> None:
  """A param still holding a newer JAX's value that no upgrader converted."""
  for name, v in params.items():
    if isinstance(v, (FlatTreeStandIn, EnumStandIn)):
      raise VersionError(
          f"primitive {prim_name} param {name} is a {v!r}, which JAX "
          f"{_jax.jax.__version__} lacks{why}", f"{path}.params.{name}")


def _v(s: str) -> Version:
  return _jax.parse_version(s)


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


def _scan_flattrees_up(params):
  """JAX 0.11's scan groups its operands with FlatTrees instead of counts."""
  if "num_consts" not in params or "num_carry" not in params or "jaxpr" not in params:
    return  # not the old form: the type check will tell
  nc, nk = params.pop("num_consts"), params.pop("num_carry")
  jaxpr = params["jaxpr"]
  nx, ny = len(jaxpr.in_avals) - nc - nk, len(jaxpr.out_avals) - nk
  params["ft_in"], params["ft_out"] = _jax.scan_flattrees(nc, nk, nx, ny)


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


CHANGES: list[Change] = [
    # --- JAX 0.10.0 ---------------------------------------------------------
    Change(_v("0.10.0"), "mul", "add_param", "out_dtype", default=None),
    Change(_v("0.10.0"), "eig", "add_param", "enable_eigvec_derivs", default=False,
           note="JAX 0.9 never differentiates eigenvectors"),
    Change(_v("0.10.0"), "tridiagonal_solve", "add_param", "perturb_singular", default=False),
    Change(_v("0.10.0"), "ragged_dot_general", "add_param", "out_sharding", default=None),
    Change(_v("0.10.0"), "scan", "remove_param", "linear", default=_scan_linear),
    Change(_v("0.10.0"), "scan", "remove_param", "_split_transpose", default=False),
    Change(_v("0.10.0"), "shard_map", "rename_param", "manual_axes", new="newly_manual_axes",
           up=_newly_manual_up, down=_newly_manual_down),
    Change(_v("0.10.0"), "ag_start", "rename_primitive", new="all_gather_start"),
    Change(_v("0.10.0"), "ag_done", "rename_primitive", new="all_gather_done"),
    # --- JAX 0.11.0 ---------------------------------------------------------
    Change(_v("0.11.0"), "scan", "rewrite", "num_consts,num_carry -> ft_in,ft_out",
           up=_scan_flattrees_up, down=_scan_flattrees_down),
    Change(_v("0.11.0"), "composite", "rename_param", "jaxpr", new="call_jaxpr"),
    Change(_v("0.11.0"), "jit", "convert_param", "inline", up=_inline_up, down=_inline_down,
           note="True/False became Inline.JAX_LATE/AUTO"),
    Change(_v("0.11.0"), "reduce_max", "add_param", "out_sharding", default=None),
    Change(_v("0.11.0"), "reduce_min", "add_param", "out_sharding", default=None),
    Change(_v("0.11.0"), "top_k", "add_param", "is_stable", default=True,
           note="JAX 0.10's top_k was stable"),
    Change(_v("0.11.0"), "new_ref", "add_param", "pin", default=False),
    Change(_v("0.11.0"), "empty_ref", "add_param", "pin", default=False),
    Change(_v("0.11.0"), "closed_call", "rename_primitive", new="eval_jaxpr",
           note="JAX 0.11 deleted closed_call_p; it is an alias of eval_jaxpr_p"),
    Change(_v("0.11.0"), "eval_jaxpr", "rewrite", "drop closed_call's name",
           up=lambda p: p.pop("name", None), down=lambda p: None),
    # --- JAX 0.12.0 ---------------------------------------------------------
    Change(_v("0.12.0"), "erfc", "add_param", "accuracy", default=None),
]

# Allow-listed param types (enums, records) that moved between modules, and
# so between registered names: old name <-> new name.
TYPE_RENAMES: dict[str, str] = {
    "jax::memory.Space": "jax::core.MemorySpace",
}


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
  return _jax.closure_policy(name)


# --- the adapter -------------------------------------------------------------

def _known_params(version: Version) -> dict[str, frozenset]:
  """{primitive: param names} of a JAX minor (tools/param_names.py), or {}
  for a JAX minor without a table."""
  return _param_tables.param_names(version)


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

  def __init__(self, file: Version, reader: Version = _jax.JAX_VERSION):
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

    # Every jaxpr is closed from JAX 0.11 (see _jax.UNIFIED_JAXPR).
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
    return _jax.closed_call_p, {"call_jaxpr": cj}

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
    for name in _param_tables.open_jaxpr_params(self.reader).get(prim_name, ()):
      v = params.get(name)
      if isinstance(v, _jax.ClosedJaxpr):
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
      if not values.same_value(v, default):
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
  from jaxpr_proto.versions import jax_version_of
  file = _jax.parse_version(jax_version_of(m))
  if not file:
    return None
  up = Upgrader(file)
  return up if up else None
