"""A jp.Function's signature as the commands show and take it: each leaf of
its arguments and outputs by path (`p/w`, `batch/x`, `loss`), as
`jax.tree_util.keystr(..., simple=True, separator="/")` spells a key path,
with the argument's name in front where the file's debug info says it.

`dump` and `load` print the rows, `diff` compares them, and `run` takes its
inputs and writes its outputs by these paths.
"""
from __future__ import annotations

import dataclasses
import re

from jaxpr_proto.cli.printing import aval_str, without_addresses

# The name an output that is the whole result (not in a tuple or dict) goes by.
ROOT_OUTPUT = "out"
_HEAD = re.compile(r"[A-Za-z_]\w*")
# jp.trace(filter=True) traces a function of the flat inputs, named so by JAX.
_FLAT_INPUT = re.compile(r"inputs\[\d+\]")


@dataclasses.dataclass(frozen=True)
class Signature:
  name: str
  inputs: tuple[tuple[str, str], ...]     # (path, type) of each input, in flat order
  static: tuple[tuple[str, str], ...]     # (path, value) of each leaf fixed when traced
  outputs: tuple[tuple[str, str], ...]    # (path, type) of each output

  @property
  def input_paths(self) -> list[str]:
    return [p for p, _ in self.inputs]

  @property
  def output_paths(self) -> list[str]:
    return [p for p, _ in self.outputs]

  def rows(self) -> list[tuple[str, str, str]]:
    """(kind, path, type or value), in the order dump prints them."""
    return ([("in", p, t) for p, t in self.inputs] + [("static", p, v) for p, v in self.static]
            + [("out", p, t) for p, t in self.outputs])

  def lines(self, head: str = "function ", indent: str = "  ") -> list[str]:
    """`function NAME` and one aligned line per row (dump, load)."""
    rows = self.rows()
    width = max((len(p) for _, p, _ in rows), default=0)
    return [head + self.name] + [f"{indent}{k:<6} {p:<{width}}  {t}" for k, p, t in rows]

  def diff_lines(self) -> list[str]:
    """One unpadded line per row and the name (diff compares these)."""
    return [f"function {self.name}"] + [f"{k} {p} {t}" for k, p, t in self.rows()]


def of(function) -> Signature:
  """The signature of a jp.Function."""
  n = function.in_tree.num_leaves
  static = dict(function.static_leaves)
  paths = input_paths(function)
  inputs = [i for i in range(n) if i not in static]
  return Signature(
      function.name,
      tuple((paths[i], aval_str(a)) for i, a in zip(inputs, function.in_avals)),
      tuple((paths[i], static_str(v)) for i, v in sorted(static.items())),
      tuple(zip(leaf_paths(function.out_tree, ROOT_OUTPUT),
                map(aval_str, function.out_avals))))


def input_paths(function) -> list[str]:
  """The path of each leaf of `in_tree` (static ones included): the argument
  (its name where the debug info says it, else its position; a keyword
  argument's key), then the path inside it."""
  import jax
  args_tree, kwargs_tree = jax.tree_util.treedef_children(function.in_tree)
  names = _arg_names(function, args_tree)
  paths = [_join(names[k], p) for k, sub in enumerate(jax.tree_util.treedef_children(args_tree))
           for p in leaf_paths(sub, "")]
  kw = kwargs_tree.node_data()
  for key, sub in zip(kw[1] if kw else (), jax.tree_util.treedef_children(kwargs_tree)):
    paths.extend(_join(str(key), p) for p in leaf_paths(sub, ""))
  return paths if len(set(paths)) == len(paths) else [f"leaf{i}" for i in range(len(paths))]


def leaf_paths(tree, root: str) -> list[str]:
  """The key path of each leaf of `tree`, `root` for a tree that is one leaf."""
  import jax
  try:
    example = jax.tree.unflatten(tree, range(tree.num_leaves))
    keyed = jax.tree_util.tree_flatten_with_path(example)[0]
    paths = [jax.tree_util.keystr(k, simple=True, separator="/") or root for k, _ in keyed]
  except Exception:  # a node class whose unflatten wants real leaves
    return [f"{root or 'leaf'}{i}" for i in range(tree.num_leaves)]
  if len(set(paths)) != len(paths):  # (a dict key "0" beside an index 0)
    paths = [jax.tree_util.keystr(k) or root for k, _ in keyed]
  return paths


def _join(head: str, rest: str) -> str:
  return f"{head}/{rest}" if rest else head


def _arg_names(function, args_tree) -> list[str]:
  """The positional arguments' names: the one name that JAX's debug info
  (`arg_names`, `p['w']`) gives each argument's traced leaves, when every
  argument has its own; else their positions."""
  import jax
  subs = jax.tree_util.treedef_children(args_tree)
  positions = [str(k) for k in range(len(subs))]
  dbg = function.closed_jaxpr.jaxpr.debug_info
  names = list(dbg.arg_names) if dbg is not None and dbg.arg_names else []
  if len(names) != len(function.in_avals) or not all(names):
    return positions
  if all(_FLAT_INPUT.fullmatch(n) for n in names):  # (filter=True: the flat inputs)
    return positions
  static = {i for i, _ in function.static_leaves}
  it, heads, start = iter(names), [], 0
  for sub in subs:
    leaves = [next(it) for i in range(start, start + sub.num_leaves) if i not in static]
    start += sub.num_leaves
    found = {(_HEAD.match(n) or [""])[0] for n in leaves}
    if len(found) != 1 or "" in found:  # (an argument of no traced leaves has no name)
      return positions
    heads.append(found.pop())
  return heads if len(set(heads)) == len(heads) else positions


def static_str(v) -> str:
  """A static leaf as dump shows it: a function by the name the file holds it
  by, anything else by its repr (without addresses)."""
  from jaxpr_proto.codec import names
  if callable(v) and not isinstance(v, type):
    name = names.function_name(v) or getattr(v, "__qualname__", None)
    if name:
      return name
  text = without_addresses(repr(v))
  return text if len(text) <= 80 else text[:77] + "..."
