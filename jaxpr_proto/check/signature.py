"""A saved function's pytree signature (`Module.function`) against its jaxpr:
checked the same way for a loaded file and for a jp.Function built in Python."""
from __future__ import annotations

import jax

from jaxpr_proto.errors import Error


def problems(in_tree, out_tree, n_in: int, n_out: int, static=()):
  """Messages for each way the trees do not fit a jaxpr of n_in inputs and
  n_out outputs (in_tree must be the structure of (args, kwargs); `static`
  are the positions of its leaves that are not inputs)."""
  if len(set(static)) != len(static) or not all(0 <= i < in_tree.num_leaves for i in static):
    yield f"static leaves {sorted(static)} are not distinct leaves of in_tree"
  elif in_tree.num_leaves - len(static) != n_in:
    yield (f"in_tree has {in_tree.num_leaves} leaves, {len(static)} of them static, "
           f"the jaxpr {n_in} inputs")
  if out_tree.num_leaves != n_out:
    yield f"out_tree has {out_tree.num_leaves} leaves, the jaxpr {n_out} outputs"
  if in_tree.node_data() is None or in_tree.node_data()[0] is not tuple \
      or len(jax.tree_util.treedef_children(in_tree)) != 2:
    yield f"in_tree must be the structure of (args, kwargs), got {in_tree}"


def check_function(m, dec, root, err):
  """(in_tree, out_tree, static leaves) of the Module's function, or None
  after reporting to `err` what is wrong with it."""
  sig = m.function
  try:
    in_tree = dec.treedef(sig.in_tree, "function.in_tree")
    out_tree = dec.treedef(sig.out_tree, "function.out_tree")
    static = tuple((s.index, dec.value(s.value, f"function.static_leaves[{k}]"))
                   for k, s in enumerate(sig.static_leaves))
    ins = [dec.aval(i, f"function.in_avals[{k}]") for k, i in enumerate(sig.in_avals)]
    outs = [dec.aval(i, f"function.out_avals[{k}]") for k, i in enumerate(sig.out_avals)]
  except Error as e:
    err(e.path, e.message, e)
    return None
  ok = True
  if ins != list(root.in_avals):
    err("function.in_avals", "the function's input types do not match the jaxpr's inputs")
    ok = False
  if outs != list(root.out_avals):
    err("function.out_avals", "the function's output types do not match the jaxpr's outputs")
    ok = False
  for msg in problems(in_tree, out_tree, len(root.in_avals), len(root.out_avals),
                      [i for i, _ in static]):
    err("function", f"bad function signature: {msg}")
    ok = False
  return (in_tree, out_tree, static) if ok else None
