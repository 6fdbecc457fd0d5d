"""The size of the program XLA would compile, bounded on the message alone;
and the longest chain of dependent ops, which XLA's CPU compiler crashes on.

A file shares sub-jaxprs by reference, so a few kilobytes can describe a
program of 2**30 eqns (a jit that calls the one below it twice, 30 deep), and
XLA inlines calls. So a file is refused when its program, with every use of
a sub-jaxpr counted, has more than MAX_INLINED_EQNS eqns (`check_bounds`).
(`check_tokens` refuses the one other program shape seen to abort XLA: a
token returned twice.) The bound is far beyond real programs (a 175k-eqn
unrolled model is 1% of it), and below what XLA compiles in reasonable time
and memory. The custom rules' jaxprs are not counted: XLA sees them only
through a transformation, which traces a new program.

A chain of dependent eqns is never refused on load: unrolled models are the
programs people save, and a file of a 100k-eqn chain loads, prints and
checks as the original. XLA's CPU compiler, though, recurses along such a
chain and crashes (SIGSEGV) past about 21,000 chained ops (measured on JAX
0.10.2, docs/limits.md: 21,000 sins compiled in 20 s, 22,000 crashed, as
did 5,500 logistics, four ops each): its fusion pass
(SortTiledHloInstructionsInPostOrder, a frame per op) runs in a thread of
XLA's pool, whose stack XLA fixes at 2 MiB, so neither `ulimit -s` nor the
calling thread's stack size moves the limit. Where this package compiles a
program itself (the CLI's `run`; the fuzzer), `compiled_chain` of the
lowered program is checked first and a chain past XLA_CPU_CHAIN is refused
with a message instead of a crash; a user's own `jax.jit` of a loaded
program is theirs to compile, as for the original.
"""
from __future__ import annotations

import collections

MAX_INLINED_EQNS = 1 << 24
# The longest chain of dependent ops (`compiled_chain`) that we hand XLA's
# CPU compiler (JAX 0.10.2: 21,000 compiled, 22,000 crashed; docs/limits.md).
XLA_CPU_CHAIN = 20_000


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
  Structure `st`'s module that breaks the size bound. Call it only on a
  module whose structure is sound (no cycles, references in range)."""
  m = st.m
  subs_of_param: dict[int, list[int]] = {}

  def param_subs(q: int) -> list[int]:
    out = subs_of_param.get(q)
    if out is None:  # (the structure stage walked the param's value)
      out = subs_of_param[q] = [i if kind == "jaxpr" else m.closed_jaxprs[i].jaxpr
                                for kind, i in st.param_subs[q]]
    return out

  size: dict[int, int] = {}   # jaxpr -> eqns, each use of a sub-jaxpr counted
  root = m.closed_jaxprs[m.root].jaxpr
  # Post-order over the jaxprs the root reaches (structure ruled out cycles).
  # jaxpr -> {sub-jaxpr: its uses by the jaxpr's eqns}, counted per distinct
  # param (Counter counts in C: no Python step per eqn)
  subs_of_jaxpr: dict[int, collections.Counter] = {}
  stack = [(root, False)]
  while stack:
    i, ready = stack.pop()
    if i in size:
      continue
    subs = subs_of_jaxpr.get(i)
    if subs is None:
      subs = subs_of_jaxpr[i] = collections.Counter()
      for q, uses in collections.Counter(st.columns[i].params).items():
        for s in param_subs(q):
          subs[s] += uses
    if not ready:
      stack.append((i, True))
      stack.extend((s, False) for s in subs if s not in size)
      continue
    size[i] = min(st.columns[i].n + sum(size[s] * uses for s, uses in subs.items()),
                  MAX_INLINED_EQNS + 1)  # no big ints from 2**100
    if size[i] > MAX_INLINED_EQNS:
      err(st.path_of(("j", i)), f"more than {MAX_INLINED_EQNS} eqns once each use of a "
                                "sub-jaxpr is counted (sub-jaxprs shared and nested)")
      return


_CALLS = {"func.call": "callee", "stablehlo.composite": "decomposition"}


def compiled_chain(module) -> int:
  """The longest chain of dependent ops that XLA compiles in one
  computation of the StableHLO `module` (`jax.jit(f).lower(...)
  .compiler_ir("stablehlo")`): a func.call counts as the longest chain of
  the function it calls (XLA inlines calls), another op as 1, and the
  regions of the others (loop bodies, branches, reducers) are computations
  of their own. Each function is walked once, without recursion.

  This is what XLA_CPU_CHAIN bounds: an eqn lowers to one op or several (a
  logistic to four), and XLA's CPU compiler crashes by ops."""
  from jaxlib.mlir import ir
  funcs = {}
  for op in module.body.operations:
    op = op.operation
    if op.name == "func.func":
      funcs[ir.StringAttr(op.attributes["sym_name"]).value] = op

  def nested(op):
    return [b for r in op.regions for b in r.blocks]

  def callee(op) -> str | None:
    """The function a func.call calls, or a composite stands for (XLA calls
    its decomposition)."""
    attr = _CALLS.get(op.name)
    return ir.FlatSymbolRefAttr(op.attributes[attr]).value if attr else None

  calls: dict[str, set[str]] = {}  # function -> the functions it calls, anywhere in it
  for name, f in funcs.items():
    out, blocks = set(), nested(f)
    while blocks:
      for op in blocks.pop().operations:
        op = op.operation
        if op.name in _CALLS:
          out.add(callee(op))
        blocks.extend(nested(op))
    calls[name] = out & funcs.keys()

  chain: dict[str, int] = {}  # function -> the longest chain of its body, calls inlined
  deepest = 0
  stack = [(name, False) for name in funcs]
  while stack:
    name, ready = stack.pop()
    if name in chain:
      continue
    if not ready:
      stack.append((name, True))
      stack.extend((c, False) for c in calls[name] if c not in chain and c != name)
      continue
    chain[name] = 0  # (a cycle, which JAX never lowers, counts as no chain)
    blocks, first = nested(funcs[name]), True
    while blocks:
      depth: dict = {}
      longest = 0
      for op in blocks.pop().operations:
        op = op.operation
        d = max([depth.get(v, 0) for v in op.operands], default=0)
        if op.name in _CALLS:
          d += chain.get(callee(op), 1)
        elif op.name in ("func.return", "stablehlo.return"):
          pass
        else:
          d += 1
          blocks.extend(nested(op))
        for r in op.results:
          depth[r] = d
        if d > longest:
          longest = d
      if first:
        chain[name], first = longest, False
      deepest = max(deepest, longest)
  return deepest
