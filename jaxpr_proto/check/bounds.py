"""The size of the program XLA would compile, bounded on the message alone.

A file shares sub-jaxprs by reference, so a few kilobytes can describe a
program of 2**30 eqns (a jit that calls the one below it twice, 30 deep), and
XLA inlines calls. XLA also recurses along chains of dependent eqns: on the
CPU a chain of 26k elementwise eqns crashes its fusion pass (SIGSEGV, JAX
0.10.2, a stack overflow in SortTiledHloInstructionsInPostOrder), and a
chain of 20k takes minutes to compile. So a file is refused when

* its program, with every use of a sub-jaxpr counted, has more than
  MAX_INLINED_EQNS eqns; or
* a jaxpr has a chain of more than MAX_CHAIN dependent eqns, where a call
  that XLA inlines (`INLINED`) counts as the longest chain of the jaxpr it
  calls.

(`check_tokens` refuses the one other program shape seen to abort XLA: a
token returned twice.) The bounds are far beyond real programs (a 175k-eqn unrolled model has chains of
a few thousand eqns). The custom rules' jaxprs are not counted: XLA sees them
only through a transformation, which traces a new program.
"""
from __future__ import annotations

from jaxpr_proto.wire import walk

MAX_INLINED_EQNS = 1 << 24
MAX_CHAIN = 1 << 14

# Primitives whose sub-jaxprs XLA inlines into the caller's computation. The
# others' (loop bodies, branches) are computations of their own.
INLINED = frozenset({
    "pjit", "jit", "closed_call", "core_call", "remat", "remat2", "checkpoint",
    "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin",
    "shard_map", "custom_transpose_call", "run_state",
})


def check_tokens(st, err) -> None:
  """The program may not return one token twice: XLA's CPU client aborts
  ("Unexpected duplicate", JAX 0.10-0.12), as it does for `jax.jit` of
  `lambda: (t, t)` with `t = lax.create_token()`."""
  m = st.m
  if not any(a.WhichOneof("kind") == "token" for a in m.avals):
    return
  i = m.closed_jaxprs[m.root].jaxpr
  root, c = m.jaxprs[i], st.columns[i]
  avals = {v.id: v.aval for v in (*root.constvars, *root.invars)}
  avals.update((x - 1, a) for x, a in zip(c.results, c.result_avals) if x)
  seen = set()
  for k, a in enumerate(root.outvars):
    if not a.HasField("var") or a.var not in avals:
      continue
    if m.avals[avals[a.var]].WhichOneof("kind") == "token":
      if a.var in seen:
        err(f"outvars[{k}]", "the program returns one token twice, which XLA aborts on")
        return
      seen.add(a.var)


def check_bounds(st, err) -> None:
  """Reports, through `err`, the first jaxpr (innermost first) of the
  Structure `st`'s module that breaks a bound. Call it only on a module whose
  structure is sound (no cycles, references in range)."""
  m = st.m
  subs_of_param: dict[int, list[int]] = {}

  def param_subs(q: int) -> list[int]:
    out = subs_of_param.get(q)
    if out is None:
      out = []
      for kind, i, _ in walk.value_refs(m.params[q].value, ""):
        if kind == "jaxpr":
          out.append(i)
        elif kind == "closed_jaxpr":
          out.append(m.closed_jaxprs[i].jaxpr)
      subs_of_param[q] = out
    return out

  size: dict[int, int] = {}   # jaxpr -> eqns, each use of a sub-jaxpr counted
  chain: dict[int, int] = {}  # jaxpr -> its longest chain of dependent eqns
  prim_names = [p.name for p in m.primitives]
  root = m.closed_jaxprs[m.root].jaxpr
  # Post-order over the jaxprs the root reaches (structure ruled out cycles).
  subs_of_jaxpr: dict[int, dict[int, list[int]]] = {}  # jaxpr -> {eqn: its sub-jaxprs}
  stack = [(root, False)]
  while stack:
    i, ready = stack.pop()
    if i in size:
      continue
    c = st.columns[i]
    eqn_subs = subs_of_jaxpr.get(i)
    if eqn_subs is None:
      eqn_subs = subs_of_jaxpr[i] = {}
      with_subs = {q for q in set(c.params) if param_subs(q)}
      if with_subs:
        at = 0
        for k, n in enumerate(c.param_count):
          qs = c.params[at:at + n]
          at += n
          if not with_subs.isdisjoint(qs):
            eqn_subs[k] = [s for q in qs for s in param_subs(q)]
    if not ready:
      stack.append((i, True))
      stack.extend((s, False) for subs in eqn_subs.values() for s in subs if s not in size)
      continue
    # (the hot loop of this stage: plain loops; variables by id + 1, as in the
    # columns, their depths in a list where the ids are dense enough)
    ops, results = c.operands, c.results
    top = max(max(ops, default=0), max(results, default=0))
    depth = [0] * (top + 1) if top <= 4 * (len(ops) + len(results)) + 64 else _Depths()
    total, longest, o, r = c.n, 0, 0, 0
    for k, (n_ops, n_res, p) in enumerate(zip(c.operand_count, c.result_count, c.primitive)):
      if n_ops == 1:
        d = depth[ops[o]]
      else:
        d = max([depth[x] for x in ops[o:o + n_ops]], default=0)
      o += n_ops
      subs = eqn_subs.get(k) if eqn_subs else None
      if subs:
        total += sum(size[s] for s in subs)
        d += max(chain[s] for s in subs) if prim_names[p] in INLINED else 1
      else:
        d += 1
      if n_res == 1:
        x = results[r]
        if x:
          depth[x] = d
      else:
        for x in results[r:r + n_res]:
          if x:
            depth[x] = d
      r += n_res
      if d > longest:
        longest = d
    size[i] = min(total, MAX_INLINED_EQNS + 1)  # no big ints from 2**100
    chain[i] = min(longest, MAX_CHAIN + 1)
    where = st.path_of(("j", i))
    if chain[i] > MAX_CHAIN:
      err(where, f"a chain of more than {MAX_CHAIN} dependent eqns (calls counted as "
                 "the chains of the jaxprs they call), more than XLA compiles safely")
      return
    if size[i] > MAX_INLINED_EQNS:
      err(where, f"more than {MAX_INLINED_EQNS} eqns once each use of a sub-jaxpr is "
                 "counted (sub-jaxprs shared and nested)")
      return


class _Depths(dict):
  """The depths of sparse variable ids: 0 for an id not seen."""

  def __missing__(self, key):
    return 0
