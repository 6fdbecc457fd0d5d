"""custom_vmap's batching rule, a Python function of the batch size, saved
as the jaxprs it computes: traced at encode time for each pattern of batched
operands (`in_batched`), with a symbolic batch size, and specialised to the
real batch size when the loaded program is vmapped (where the rule uses the
size as a value, in its jaxpr or any inside it, that value is then the size:
Decoder.with_dims).

The `rule` param is a `jax::custom_vmap_rule` extension: the rule's name, and
for each pattern it could be traced for, the pattern, which outputs the rule
batches, and the rule's closed jaxpr (inputs batched on axis 0 of size
VMAP_AXIS_SIZE, a symbolic dim). A pattern the rule could not be traced for
(Python control flow on the batch size, say), or a pattern beyond the
MAX_OPERANDS limit, is missing: vmap of the loaded program with that pattern
raises RuleNotSavedError naming the rule, and never batches otherwise than
the original would.
"""
from __future__ import annotations

import itertools

import jax

from jaxpr_proto import compat
from jaxpr_proto.codec import extensions, pytrees
from jaxpr_proto.errors import DecodeError, RuleNotSavedError

CODEC = "jax::custom_vmap_rule"
VMAP_AXIS_SIZE = "vmap_axis_size"  # the symbolic batch size of the saved rule jaxprs
MAX_OPERANDS = 4  # every pattern of up to this many operands; beyond, all batched only


# --- encode: the rule traced for each pattern ---------------------------------------

def encode(enc, value, eqn, path):
  """JAX's custom_vmap makes the param a ClosedRule around the user's rule,
  which JAX calls without the call's consts; the custom_vmap of a jvp has
  a plain function, called with all operands."""
  closed = compat.is_closed_rule(value)
  fn = value.rule if closed else value
  name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
  saved = getattr(fn, "saved_patterns", None)  # a loaded rule: as it was loaded
  if saved is None:
    avals, tree = _operands(eqn.params, closed)
    saved = _trace_patterns(enc, fn, avals, eqn.params["call"].out_avals, tree,
                            eqn.params["out_tree"])
  fields = [("name", name), ("closed", closed),
            ("patterns", tuple((p, ob, cj) for p, (ob, cj) in sorted(saved.items())))]
  return extensions.param_value(enc, CODEC, fields, path)


def _operands(params, closed):
  """(the avals of the operands the rule takes, their pytree structure)."""
  call, in_tree = params["call"], params["in_tree"]
  if not closed:
    return list(call.in_avals), in_tree
  consts, args = jax.tree_util.treedef_children(in_tree)
  return list(call.in_avals)[consts.num_leaves:], args


def _trace_patterns(enc, fn, avals, outs, tree, out_tree) -> dict:
  n = len(avals)
  patterns = ([p for p in itertools.product((False, True), repeat=n) if any(p)]
              if n <= MAX_OPERANDS else [(True,) * n])
  size = _axis_size(enc)
  saved = {}
  for p in patterns:
    got = _trace(fn, avals, outs, tree, out_tree, p, size)
    if got is not None:
      saved[p] = got
  return saved


def _axis_size(enc):
  """The symbolic batch size, in the scope of the module's other symbolic dims."""
  scope = enc.state.symbolic_scope or jax.export.SymbolicScope()
  (size,) = jax.export.symbolic_shape(VMAP_AXIS_SIZE, scope=scope)
  return size


def _trace(fn, avals, outs, tree, out_tree, pattern, size):
  """(out_batched, closed jaxpr) of the rule for one pattern, or None where it
  cannot be traced for it."""
  out_batched = []

  def flat_rule(*flat):
    args = jax.tree.unflatten(tree, flat)
    in_batched = jax.tree.unflatten(tree, list(pattern))
    out, batched = compat.call_custom_vmap_rule(fn, size, in_batched, args)
    flat_out, t = jax.tree.flatten(out)
    flat_b, t_b = jax.tree.flatten(batched)
    if t != out_tree or t_b != out_tree or not all(type(b) is bool for b in flat_b):
      raise ValueError("the rule's outputs do not have the function's structure")
    out_batched[:] = flat_b
    return flat_out

  specs = [jax.ShapeDtypeStruct((size, *a.shape) if b else a.shape, a.dtype)
           for a, b in zip(avals, pattern)]
  try:
    cj = jax.make_jaxpr(flat_rule)(*specs)
  except Exception:  # (Python control flow on the batch size, a tracer leak, ...)
    return None
  if _misfit(cj, avals, outs, pattern, out_batched):  # (JAX would refuse it too)
    return None
  return tuple(out_batched), cj


# --- decode: a rule that specialises the saved jaxprs ---------------------------------

def decode(dec, msg, path):
  fields = extensions.param_fields(dec, msg, CODEC, ("name", "closed", "patterns"), path)
  name, closed, patterns = fields.get("name"), fields.get("closed"), fields.get("patterns", ())
  if not isinstance(name, str) or type(closed) is not bool or not isinstance(patterns, tuple) \
      or not all(isinstance(p, tuple) and len(p) == 3 and isinstance(p[0], tuple)
                 and isinstance(p[1], tuple) and isinstance(p[2], compat.ClosedJaxpr)
                 and all(type(b) is bool for b in (*p[0], *p[1])) for p in patterns):
    raise DecodeError(f"{CODEC} needs a str name, a bool closed and patterns of "
                      "(in_batched, out_batched, closed jaxpr)", path)
  saved = {p: (ob, cj) for p, ob, cj in patterns}
  if len(saved) != len(patterns):
    raise DecodeError(f"{CODEC} lists a pattern twice", path)
  rule = _saved_rule(name, saved, type(dec).with_dims)
  return compat.custom_vmap_rule(rule) if closed else rule


def fixup(params, path) -> None:
  """Checks custom_vmap_call's trees and each saved pattern's jaxpr against
  the call (the fixup of custom_vmap_call, which has all its params): each
  jaxpr takes the rule's operands, batched as the pattern says, and gives the
  call's outputs, batched as the rule said; and gives the rule the output
  structure it returns."""
  value = params.get("rule")
  closed = compat.is_closed_rule(value)
  fn = value.rule if closed else value
  saved = getattr(fn, "saved_patterns", None)
  call, in_tree, out_tree = params.get("call"), params.get("in_tree"), params.get("out_tree")
  if not isinstance(call, compat.ClosedJaxpr) or not isinstance(in_tree, compat.PyTreeDef) \
      or not isinstance(out_tree, compat.PyTreeDef):
    return  # (the param checks report what is missing)
  # JAX unflattens the operands and outputs with these trees, the consts and
  # args (the primals and tangents of a jvp) apart.
  parts = jax.tree_util.treedef_children(in_tree) if in_tree.node_data() else []
  if pytrees.node_type(in_tree) is not tuple or len(parts) != 2 \
      or in_tree.num_leaves != len(call.in_avals) or out_tree.num_leaves != len(call.out_avals):
    raise DecodeError(f"custom_vmap_call's in_tree {in_tree} and out_tree {out_tree} do not fit "
                      f"its call of {len(call.in_avals)} inputs and {len(call.out_avals)} "
                      "outputs (in_tree: a pair)", f"{path}.params.in_tree")
  if saved is None:
    return
  ins, _ = _operands(params, closed)
  outs = call.out_avals
  for p, (ob, cj) in saved.items():
    problem = _misfit(cj, ins, outs, p, ob)
    if problem:
      raise DecodeError(problem, f"{path}.params.rule.patterns[{list(p)}]")
  fn.out_tree = out_tree


def _misfit(cj, ins, outs, pattern, out_batched) -> str | None:
  """What is wrong with a pattern's jaxpr for a rule of operand types `ins`
  and output types `outs`, or None."""
  if len(pattern) != len(ins) or len(out_batched) != len(outs):
    return (f"a pattern of {len(pattern)} operands and {len(out_batched)} outputs, for a "
            f"rule of {len(ins)} and {len(outs)}")
  for what, avals, want, batched in (("input", cj.in_avals, ins, pattern),
                                     ("output", cj.out_avals, outs, out_batched)):
    if len(avals) != len(want):
      return f"the rule's jaxpr has {len(avals)} {what}s, not {len(want)}"
    for k, (a, w, b) in enumerate(zip(avals, want, batched)):
      shape = tuple(getattr(a, "shape", ()))
      n = 1 if b else 0
      if (getattr(a, "dtype", None) != w.dtype or shape[n:] != tuple(w.shape)
          or (b and (not shape or str(shape[0]) != VMAP_AXIS_SIZE))):
        return (f"the rule's {what} {k} is {a.str_short()}, not the call's "
                f"{w.str_short()}{' batched' if b else ''}")
  return None


def _saved_rule(name: str, saved: dict, with_dims):
  """The loaded rule, called by JAX as the original (rule(axis_size,
  in_batched, *args)): it runs the jaxpr saved for the pattern, specialised
  to the batch size by `with_dims` (Decoder.with_dims). A function (as the
  original), holding what it saved."""
  specialised: dict = {}

  def rule(axis_size, in_batched, *args):
    flat_args = jax.tree.leaves(args)
    pattern = tuple(jax.tree.leaves(in_batched))
    got = saved.get(pattern)
    if got is None:
      raise RuleNotSavedError(
          f"vmap of a loaded custom_vmap function: its batching rule {name} was not saved "
          f"for operands batched as {list(pattern)} (it could not be traced for them with a "
          "symbolic batch size when the program was saved)")
    out_batched, cj = got
    key = (pattern, int(axis_size))
    if key not in specialised:
      specialised[key] = _specialise(cj, int(axis_size), name, with_dims)
    out_tree = rule.out_tree
    return (jax.tree.unflatten(out_tree, specialised[key](*flat_args)),
            jax.tree.unflatten(out_tree, list(out_batched)))

  rule.__qualname__ = rule.__name__ = name  # printed as the original's
  rule.saved_patterns = saved
  return rule


def _specialise(cj, axis_size: int, name: str, with_dims):
  """The saved jaxpr at a batch size, checked by JAX's type rules."""
  try:
    concrete = with_dims(cj, {VMAP_AXIS_SIZE: axis_size})
    jax.extend.core.check_jaxpr(concrete.jaxpr)
  except Exception as e:
    raise DecodeError(f"custom_vmap rule {name} at batch size {axis_size}: "
                      f"{type(e).__name__}: {e}", "") from None
  return compat.jaxpr_as_fun(concrete)
