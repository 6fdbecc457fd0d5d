"""Stand-ins for values of a newer JAX that this JAX lacks, read from a file so
that the upgraders can convert them, or refuse them by name."""
from __future__ import annotations

from jaxpr_proto import compat
from jaxpr_proto.errors import VersionError


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


def refuse_stand_ins(prim_name: str, params: dict, path: str, why: str) -> None:
  """A param still holding a newer JAX's value that no upgrader converted."""
  for name, v in params.items():
    if isinstance(v, (FlatTreeStandIn, EnumStandIn)):
      raise VersionError(
          f"primitive {prim_name} param {name} is a {v!r}, which JAX "
          f"{compat.jax.__version__} lacks{why}", f"{path}.params.{name}")
