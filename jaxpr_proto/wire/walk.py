"""The one walker of a Module's references, on the message alone.

Values nest (tuples, dicts, records, extensions, pytree structures) and refer
to the Module's tables by index. `value_refs` finds those references without
recursion, so that a file cannot exhaust the stack; the checker's structure
stage and `info` both use it, as they use `rule_jaxprs` for the custom rules.

The rules of a jaxpr's variables (`Scope`: SSA, define before use), of its
operands and binders, and of a closed jaxpr's consts are here too, with their
messages: the decoder raises them as it builds a jaxpr, the checker collects
them all.
"""
from __future__ import annotations

from collections.abc import Iterator

from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

# The fields of each kind of custom rule (Module.rules) that hold a closed jaxpr.
RULE_JAXPRS: dict[str, tuple[str, ...]] = {"jvp": ("jvp",), "vjp": ("fwd", "bwd"), "lin": ("bwd",)}

# Value kinds that refer to a table, and the field of the Value that holds the index.
_REFS = {"jaxpr": lambda v: v.jaxpr, "closed_jaxpr": lambda v: v.closed_jaxpr,
         "primitive": lambda v: v.primitive.index, "rule": lambda v: v.rule,
         "aval": lambda v: v.aval, "traceback": lambda v: v.traceback}
_SEQUENCES = ("tuple", "list", "frozenset")
# Value kinds that refer to a table or hold other values: `value_refs` finds
# nothing in a Value of any other kind (an array, a number, a string...).
NESTING = frozenset((*_REFS, *_SEQUENCES, "dict", "record", "extension", "treedef"))
_WALKED = NESTING | {None}  # (and an empty Value, a problem)

MAX_VALUE_DEPTH = 90  # below protobuf's own parse limit (100 nested messages)
# The most items of one tuple, list, frozenset or dict Value, refused before
# anything is done per item: params hold an item per axis, per operand (an
# eqn has at most columns.MAX_PER_EQN) or per branch; a file of 8 MB could
# give one 2M items, each dear to check (13 s to refuse a 2M-axis reduce_sum).
MAX_VALUE_ITEMS = 1 << 20

PROBLEM = "problem"


def value_refs(v: pb.Value, path: str, depth: int = 0) -> Iterator[tuple[str, object, str]]:
  """(kind, index, path) of each table reference in `v`, where kind is a
  Value kind of `_REFS` ("jaxpr", "closed_jaxpr", "primitive", "rule",
  "aval", "traceback"); and (PROBLEM, message, path) for an empty value or one nested
  deeper than MAX_VALUE_DEPTH, which is not walked further."""
  if depth < MAX_VALUE_DEPTH and v.WhichOneof("kind") not in _WALKED:
    return iter(())  # (a leaf: most params, an int, a dtype, a string)
  return _walk([(v, path, depth)])


def treedef_refs(t: pb.TreeDef, path: str, depth: int = 0) -> Iterator[tuple[str, object, str]]:
  """`value_refs` of the values in a pytree structure (its keys and aux data)."""
  return _walk([(t.root, path, depth)])


def value_arrays(v: pb.Value) -> Iterator[pb.Array]:
  """The Array messages in `v`, nested ones included (as far as `value_refs` walks)."""
  return (a for kind, a, _ in _walk([(v, "", 0)], arrays=True) if kind == "array")


def _walk(stack: list[tuple[object, str, int]],
          arrays: bool = False) -> Iterator[tuple[str, object, str]]:
  while stack:  # depth first, in order
    x, p, d = stack.pop()
    if isinstance(x, pb.TreeNode):
      if d > MAX_VALUE_DEPTH:
        yield PROBLEM, "pytree structure nested too deeply", p
        continue
      stack.extend((c, f"{p}.children[{k}]", d + 1) for k, c in reversed(list(enumerate(x.children))))
      if x.HasField("aux"):
        stack.append((x.aux, f"{p}.aux", d + 1))
      stack.extend((k, f"{p}.keys[{i}]", d + 1) for i, k in reversed(list(enumerate(x.keys))))
      continue
    if d > MAX_VALUE_DEPTH:
      yield PROBLEM, "value nested too deeply", p
      continue
    kind = x.WhichOneof("kind")
    if kind is None:
      yield PROBLEM, "empty value", p
    elif kind in _REFS:
      yield kind, _REFS[kind](x), p
    elif kind == "array" and arrays:
      yield kind, x.array, p
    elif kind in _SEQUENCES or kind == "dict":
      items = x.dict.entries if kind == "dict" else getattr(x, kind).items
      if len(items) > MAX_VALUE_ITEMS:
        yield PROBLEM, f"a {kind} of {len(items)} items, more than a value may have ({MAX_VALUE_ITEMS})", p
      elif kind != "dict":
        # (leaves within the depth bound hold nothing to find: not pushed,
        # and no path made for them; `arrays` wants the array leaves)
        walked = _WALKED if d < MAX_VALUE_DEPTH and not arrays else None
        stack.extend((y, f"{p}[{k}]", d + 1) for k, y in reversed(list(enumerate(items)))
                     if walked is None or y.WhichOneof("kind") in walked)
      else:
        for k, e in enumerate(items):
          stack.append((e.key, f"{p}.key", d + 1))
          stack.append((e.value, f"{p}[{k}]", d + 1))
    elif kind in ("record", "extension"):
      walked = _WALKED if d < MAX_VALUE_DEPTH and not arrays else None
      for f in getattr(x, kind).fields:
        if walked is None or f.value.WhichOneof("kind") in walked:
          stack.append((f.value, f"{p}.{f.name}", d + 1))
    elif kind == "treedef":
      stack.append((x.treedef.root, p, d + 1))


def rule_jaxprs(m: pb.Module) -> Iterator[tuple[int, str, str, int]]:
  """(rule index, kind, field, index into m.closed_jaxprs) of each closed jaxpr
  a custom rule holds; rules saved with a trace error hold none, and an empty
  rule is left out."""
  for i, r in enumerate(m.rules):
    kind = r.WhichOneof("kind")
    if kind is None:
      continue
    rule = getattr(r, kind)
    if kind in ("jvp", "vjp") and rule.trace_error:
      continue  # the rule could not be traced when saved; its jaxprs are unset
    for f in RULE_JAXPRS[kind]:
      yield i, kind, f, getattr(rule, f)


# --- the variables of a jaxpr -----------------------------------------------------

class Scope:
  """The variables of one jaxpr: each defined once, and used only after it is
  defined. The decoder keeps the variables it makes; the checker, none."""

  def __init__(self):
    self.vars: dict[int, object] = {}

  def define(self, v: pb.Var, where: str, make=lambda: None):
    if v.id in self.vars:
      raise DecodeError(f"variable id {v.id} is defined twice (not SSA)", where)
    var = self.vars[v.id] = make()
    return var

  def use(self, var_id: int, where: str):
    try:
      return self.vars[var_id]
    except KeyError:
      raise DecodeError(f"variable id {var_id} is used before it is defined", where) from None

  def effect_input(self, e: pb.Effect, where: str):
    """The variable an effect refers to (an input effect's)."""
    if not e.HasField("input_var") or e.input_var not in self.vars:
      raise DecodeError(f"effect {e.name} refers to an undefined variable"
                        f"{f' {e.input_var}' if e.HasField('input_var') else ''}", where)
    return self.vars[e.input_var]


def operand_kind(a: pb.Atom, where: str) -> str:
  """"var" or "literal"."""
  kind = a.WhichOneof("kind")
  if kind is None:
    raise DecodeError("empty operand", where)
  return kind


def binder_kind(b: pb.Binder, where: str) -> str:
  """"var" or "drop"."""
  kind = b.WhichOneof("kind")
  if kind is None:
    raise DecodeError("empty output binder", where)
  return kind


def check_consts(m: pb.Module, c: pb.ClosedJaxpr, where: str) -> None:
  """A closed jaxpr has one const for each constvar of its jaxpr (in range)."""
  n = len(m.jaxprs[c.jaxpr].constvars)
  if len(c.consts) != n:
    raise DecodeError(f"{len(c.consts)} consts for {n} constvars", where)
