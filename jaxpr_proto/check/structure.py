"""Stage 1 of the checker: the references, SSA and define-before-use of a
Module, on the message alone (no JAX), reporting every error it finds.

The decoder finds the same problems, one at a time, as it builds the jaxpr;
this stage lists them all, with the paths the decoder would give them.
"""
from __future__ import annotations

import bisect
import collections
import itertools
import operator

import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.errors import DecodeError
from jaxpr_proto.codec.state import MAX_DEPTH
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns, walk


# Eqns of a jaxpr (in the eqns form) up to which they are checked one by one
# (`_fast_eqn`), not as columns: NumPy's fixed cost per jaxpr (some 15 calls,
# dearer still at their first use in a process) outweighs a Python step for
# each of a few eqns (a custom_jvp rule's, a pjit's small body).
_SMALL = 16
# Eqns of a jaxpr (read as columns) from which the column checks run as NumPy
# arrays; below, a Python step per eqn costs less than NumPy's fixed cost.
_NUMPY_FROM = 512


def _ids(col) -> np.ndarray:
  """A column of variable ids (+ 1) as an array."""
  return np.array(col, np.int64) if col else np.zeros(0, np.int64)


class Structure:
  """Checks references, SSA and define-before-use on the message alone."""

  def __init__(self, m, err):
    self.m, self.err = m, err
    self.n = {name: len(getattr(m, name)) for name in (
        "jaxprs", "closed_jaxprs", "avals", "strings", "frames", "tracebacks",
        "name_stacks", "contexts", "primitives", "rules", "params")}
    # Reference graph for cycles and nesting depth: node -> {node: path of its first reference}.
    self.edges: dict[tuple, dict] = {}
    self.paths: dict[tuple, str] = {}
    self.param_names = [p.name for p in m.params]  # of each entry of Module.params
    self.n_param_names = len(set(self.param_names))  # (an eqn has at most one param of each)
    self._name_ids = None  # each param's name as an int, made where needed (_distinct_names)

  def ref(self, table: str, i: int, path: str, what: str | None = None) -> bool:
    n = self.n[table]
    if not 0 <= i < n:
      self.err(path, f"{what or table[:-1].replace('_', ' ')} index {i} is out of range "
                     f"(table {table} has {n})")
      return False
    return True

  def run(self) -> None:
    m = self.m
    if not self.n["closed_jaxprs"]:
      self.err("root", "the module has no closed jaxprs")
      return
    if self.ref("closed_jaxprs", m.root, "root", "root closed jaxpr"):
      self.root_inputs()
    n_strings, n_frames = self.n["strings"], self.n["frames"]
    for i, f in enumerate(m.frames):  # (the paths made where one is out of range)
      if not (0 <= f.file < n_strings and 0 <= f.function < n_strings):
        self.ref("strings", f.file, f"frames[{i}].file", "string")
        self.ref("strings", f.function, f"frames[{i}].function", "string")
    for i, tb in enumerate(m.tracebacks):
      if tb.frames and max(tb.frames) >= n_frames:  # (uint32: none below 0)
        for k, j in enumerate(tb.frames):
          self.ref("frames", j, f"tracebacks[{i}].frames[{k}]", "frame")
    for i, ctx in enumerate(m.contexts):
      if ctx.HasField("xla_metadata"):
        self.values(("x", i), ctx.xla_metadata, f"contexts[{i}].xla_metadata")
    for i, a in enumerate(m.avals):
      if a.WhichOneof("kind") == "ref":
        if self.ref("avals", a.ref.inner, f"avals[{i}].ref.inner", "aval"):
          self.edge(("a", i), ("a", a.ref.inner), f"avals[{i}]")
        self.values(("a", i), a.ref.memory_space, f"avals[{i}].ref.memory_space")
        self.values(("a", i), a.ref.kind, f"avals[{i}].ref.kind")
    # A param's errors wait for the paths: they are told at the first eqn using it.
    err, param_errors = self.err, []
    self.err = lambda path, message: param_errors.append((path, message))
    self.param_subs: list[list[tuple[str, int]]] = []  # for bounds: each param's references
    nesting = walk.NESTING
    for i, p in enumerate(m.params):  # to jaxprs and closed jaxprs, each use counted
      kind = p.value.WhichOneof("kind")
      if kind is not None and kind not in nesting:  # (a leaf, as most params: nothing to walk)
        self.param_subs.append(())
        continue
      refs = list(walk.value_refs(p.value, f"params[{i}]({p.name})"))
      self.param_subs.append([(kind, j) for kind, j, _ in refs
                              if kind == "jaxpr" or kind == "closed_jaxpr"])
      self._refs(("p", i), refs)
    self.err = err
    self.rules()
    for i, c in enumerate(m.closed_jaxprs):
      if self.ref("jaxprs", c.jaxpr, f"closed_jaxprs[{i}].jaxpr", "jaxpr"):
        self.edge(("c", i), ("j", c.jaxpr), "")
        self.collect(walk.check_consts, m, c, f"closed_jaxprs[{i}]")
      for k, v in enumerate(c.consts):
        self.values(("c", i), v, f"closed_jaxprs[{i}].consts[{k}]")
    if m.HasField("function"):
      sig = m.function
      for k, a in enumerate(sig.in_avals):
        self.ref("avals", a, f"function.in_avals[{k}]", "aval")
      for k, a in enumerate(sig.out_avals):
        self.ref("avals", a, f"function.out_avals[{k}]", "aval")
      self.treedef(("f", 0), sig.in_tree, "function.in_tree", 0)
      self.treedef(("f", 0), sig.out_tree, "function.out_tree", 0)
      for k, leaf in enumerate(sig.static_leaves):
        self.values(("f", 0), leaf.value, f"function.static_leaves[{k}].value")
    self.assign_paths()
    for path, message in param_errors:
      self.err(self.param_path(path), message)
    for i, j in enumerate(m.jaxprs):
      self.jaxpr(i, j)
    self.cycles_and_depth()

  def root_inputs(self) -> None:
    """The program's inputs are in the memory spaces that tracing gives them.

    JAX checks every other variable's memory space against its type rules
    (stage 4: an eqn's results, a cond branch's or scan body's inputs against
    the operands), but takes a program's inputs as they are. Tracing gives an
    input the memory space of its argument's sharding, device or host
    (`core.mem_kind_to_space`: `pinned_host` is host, anything else device);
    `jax.memory.Space.Any` is only what `device_put` makes inside a program
    (whose jit JAX 0.10-0.12 cannot lower), and a PRNG key placed in host
    memory is still typed as in device memory (`jax.typeof`), as JAX's
    lowering of random bits needs (its loop's carry mixes the two
    otherwise). Such inputs (issue 30: a key and a cond's operand in memory
    space any) fail inside JAX when compiled or differentiated."""
    m = self.m
    j = m.closed_jaxprs[m.root].jaxpr
    if not 0 <= j < self.n["jaxprs"]:
      return  # (told where the closed jaxpr is checked)
    for k, v in enumerate(m.jaxprs[j].invars):
      a = m.avals[v.aval] if 0 <= v.aval < self.n["avals"] else None
      if a is None or a.WhichOneof("kind") != "shaped_array":
        continue
      space, dtype = a.shaped_array.memory_space, a.shaped_array.dtype
      if space == pb.MEMORY_SPACE_ANY:
        self.err(f"invars[{k}]", f"an input of the program in memory space any (avals[{v.aval}]): "
                                 "tracing gives inputs device or host memory only")
      elif space != pb.MEMORY_SPACE_DEVICE_UNSPECIFIED and dtype == pb.DTYPE_KEY:
        self.err(f"invars[{k}]", f"a PRNG key input of the program in host memory "
                                 f"(avals[{v.aval}]): tracing gives a key input device memory")

  def edge(self, a, b, path) -> None:
    out = self.edges.get(a)
    if out is None:
      out = self.edges[a] = {}
    if b not in out:
      out[b] = path

  def collect(self, rule, *args):
    """rule(*args), or None after reporting the DecodeError it raises."""
    try:
      return rule(*args)
    except DecodeError as e:
      self.err(e.path, e.message)
      return None

  def rules(self) -> None:
    for i, r in enumerate(self.m.rules):
      if r.WhichOneof("kind") is None:
        self.err(f"rules[{i}]", "empty custom rule")
    for i, kind, f, j in walk.rule_jaxprs(self.m):
      self.ref("closed_jaxprs", j, f"rules[{i}].{kind}.{f}", "closed jaxpr")
      if kind == "vjp" and f == "fwd":
        vjp = self.m.rules[i].vjp
        self.treedef(("r", i), vjp.out_tree, f"rules[{i}].vjp.out_tree", 0)
        self.treedef(("r", i), vjp.res_tree, f"rules[{i}].vjp.res_tree", 0)
        self.closed_over_inputs(i, vjp)

  def closed_over_inputs(self, i, vjp) -> None:
    """A custom_vjp rule's closed_over_inputs counts leading primal inputs:
    at most as many as its fwd takes."""
    c = vjp.fwd
    j = self.m.closed_jaxprs[c].jaxpr if c < self.n["closed_jaxprs"] else -1
    if not 0 <= j < self.n["jaxprs"]:
      return  # (told where the closed jaxpr is checked)
    n = len(self.m.jaxprs[j].invars)
    if vjp.closed_over_inputs > n:
      self.err(f"rules[{i}].vjp.closed_over_inputs",
               f"closed_over_inputs is {vjp.closed_over_inputs}, more than the {n} inputs of the rule's fwd")

  def treedef(self, node, t, path, depth) -> None:
    self._refs(node, walk.treedef_refs(t, path, depth))

  def values(self, node, v, path, depth=0) -> None:
    """Checks the references in a Value."""
    self._refs(node, walk.value_refs(v, path, depth))

  _TABLES = {"jaxpr": ("jaxprs", "j"), "closed_jaxpr": ("closed_jaxprs", "c"), "aval": ("avals", "a"),
             "primitive": ("primitives", None), "rule": ("rules", None),
             "traceback": ("tracebacks", None)}

  def _refs(self, node, refs) -> None:
    for kind, i, p in refs:
      if kind == walk.PROBLEM:
        self.err(p, i)
        continue
      table, to = self._TABLES[kind]
      if self.ref(table, i, p, kind.replace("_", " ")) and to:
        self.edge(node, (to, i), p)

  def assign_paths(self) -> None:
    """The decoder-style path of each node, from the first reference that
    reaches it from the root (depth first, in order), else its table entry."""
    # Edges of jaxprs to what their eqns use are added by `jaxpr`; the paths of
    # sub-jaxprs need them, so collect the eqn-level references first.
    m = self.m
    self._eqn_refs: dict[int, list] = {}
    self.columns: dict[int, columns.Columns] = {}  # of each jaxpr whose columns are consistent
    names = self.param_names
    for i, j in enumerate(m.jaxprs):
      try:
        c = self.columns[i] = columns.of(j)
      except DecodeError:
        continue  # told by `jaxpr`
      # (a param's path is that of its first use: later uses reach nothing new)
      ps = c.params
      first = dict(zip(reversed(ps), range(len(ps) - 1, -1, -1)))  # param -> its first position
      ends = list(itertools.accumulate(c.param_count))  # eqn k's params end before ends[k]
      self._eqn_refs[i] = [(("p", q), bisect.bisect_right(ends, pos), names[q])
                           for pos, q in sorted((pos, q) for q, pos in first.items())
                           if 0 <= q < self.n["params"]]
    paths = self.paths
    self.param_paths: dict[int, str] = {}
    limit = MAX_DEPTH  # deeper nodes keep their table paths (a path grows with depth)
    stack = [(("c", m.root), "", 0)] if 0 <= m.root < self.n["closed_jaxprs"] else []
    while stack:
      node, path, depth = stack.pop()
      if node in paths:
        continue
      paths[node] = path
      if depth > limit:
        continue
      nxt = []
      if node[0] == "j":
        prefix = f"{path}." if path else ""
        for pnode, k, name in self._eqn_refs.get(node[1], ()):
          self.param_paths.setdefault(pnode[1], f"{prefix}eqn[{k}].params.{name}")
          for child, sub in self.edges.get(pnode, {}).items():
            if child[0] in "jc":
              rel = sub.split(")", 1)[1] if ")" in sub else ""
              nxt.append((child, f"{prefix}eqn[{k}].params.{name}{rel}", depth + 1))
      else:
        for child, sub in self.edges.get(node, {}).items():
          if child[0] in "jc":
            nxt.append((child, sub if node[0] != "c" or sub else path, depth))
      stack.extend(reversed(nxt))
    for node in list(paths):
      if node[0] in "jc" and paths[node].count(".params.") > limit:
        del paths[node]

  def param_path(self, path: str) -> str:
    """`params[i](name)...` as the path of the first eqn that has the param."""
    head, sep, rest = path.partition(")")
    i = int(head[len("params["):].split("]")[0]) if head.startswith("params[") else None
    at = self.param_paths.get(i)
    return f"{at}{rest}" if sep and at is not None else path

  def path_of(self, node) -> str:
    p = self.paths.get(node)
    if p is not None:
      return p
    return {"j": "jaxprs", "c": "closed_jaxprs"}[node[0]] + f"[{node[1]}]"

  def jaxpr(self, i: int, j) -> None:
    node = ("j", i)
    path = self.path_of(node)
    prefix = f"{path}." if path else ""
    scope = walk.Scope()  # the decoder's rules, each error collected
    err, ref, collect = self.err, self.ref, self.collect

    def define(v, where):
      collect(scope.define, v, where)  # defined twice: reported, and still defined
      if ref("avals", v.aval, where, "aval"):
        self.edge(node, ("a", v.aval), where)

    def atom(a, where):
      kind = collect(walk.operand_kind, a, where)
      if kind == "var":
        collect(scope.use, a.var, where)
      elif kind == "literal":
        if ref("avals", a.literal.aval, where, "aval"):
          self.edge(node, ("a", a.literal.aval), where)
        if a.literal.HasField("value"):
          self.values(node, a.literal.value, where)
        else:
          err(where, "literal without a value")

    def effects(effs, where):
      for k, e in enumerate(effs):
        if e.HasField("input_var"):
          collect(scope.effect_input, e, f"{where}[{k}]")
        if e.HasField("value"):
          self.values(node, e.value, f"{where}[{k}].value")

    def binders(e, where):
      for q, b in enumerate(e.outvars):
        at = f"{where}.outvars[{q}]"
        kind = collect(walk.binder_kind, b, at)
        if kind == "var":
          define(b.var, at)
        elif kind == "drop":
          ref("avals", b.drop.aval, at, "aval")

    for k, v in enumerate(j.constvars):
      define(v, f"{prefix}constvars[{k}]")
    for k, v in enumerate(j.invars):
      define(v, f"{prefix}invars[{k}]")
    eqns = j.eqns
    c = self.columns.get(i)
    if j.HasField("columns"):
      if j.eqns:
        err(f"{prefix}columns", f"a jaxpr with {len(j.eqns)} eqns and columns too")
      if c is None:
        collect(columns.of, j, prefix)  # tells why
        eqns = ()
    if c is not None and (c.n > _SMALL or j.HasField("columns")):
      # (the ids the jaxpr's outputs and effects use after its eqns)
      later = [a.var for a in j.outvars if a.WhichOneof("kind") == "var"]
      later += [e.input_var for e in j.effects if e.HasField("input_var")]
      if self._fast_columns(node, scope.vars, c, prefix, later):
        eqns = ()
      elif j.HasField("columns"):  # checked eqn by eqn, to report each problem at its path
        eqns = columns.as_eqns(j, prefix)
    fast = self._fast_eqn(node, scope.vars, prefix)
    n_names = self.n_param_names
    for k, e in enumerate(eqns):
      if too_many := self._too_many(e, n_names):  # (before anything per operand or param)
        err(f"{prefix}eqn[{k}]", too_many)
        if len(e.outvars) <= columns.MAX_PER_EQN:  # (defined: no errors where they are used)
          binders(e, f"{prefix}eqn[{k}]")
        continue
      if fast(k, e):
        continue
      where = f"{prefix}eqn[{k}]"
      ref("primitives", e.primitive, f"{where}.primitive", "primitive")
      for q, p in enumerate(e.params):
        if ref("params", p, f"{where}.params[{q}]", "param"):
          self.edge(node, ("p", p), where)
      names = [self.param_names[p] for p in e.params if 0 <= p < self.n["params"]]
      if len(set(names)) != len(names):
        dup = sorted(n for n, count in collections.Counter(names).items() if count > 1)
        err(f"{where}.params", f"params given twice: {', '.join(dup)}")
      for q, a in enumerate(e.invars):
        atom(a, f"{where}.invars[{q}]")
      effects(e.effects, f"{where}.effects")
      if e.traceback:
        ref("tracebacks", e.traceback, f"{where}.traceback", "traceback")
      ref("name_stacks", e.name_stack, f"{where}.name_stack", "name stack")
      if ref("contexts", e.context, f"{where}.context", "context"):
        self.edge(node, ("x", e.context), where)
      binders(e, where)
    for k, a in enumerate(j.outvars):
      atom(a, f"{prefix}outvars[{k}]")
    effects(j.effects, f"{prefix}effects")

  @staticmethod
  def _too_many(e, n_names: int) -> str | None:
    """Why the eqn `e` has too many operands, results or params to check
    each, or None: a count bound, checked before anything per item (an eqn
    of 2M params, all one, took 20 s to refuse as given twice)."""
    for n, what in ((len(e.invars), "operands"), (len(e.outvars), "results")):
      if n > columns.MAX_PER_EQN:
        return columns.too_many(n, what)
    if len(e.params) > n_names:
      return (f"{len(e.params)} params, where the module's params have only {n_names} "
              "distinct names: params given twice")
    if len(e.params) > columns.MAX_PARAMS_PER_EQN:
      return f"{len(e.params)} params, more than an eqn may have ({columns.MAX_PARAMS_PER_EQN})"
    return None

  def _fast_columns(self, node, defined, c: columns.Columns, prefix: str, later=()) -> bool:
    """The checks of `jaxpr` for its eqns (in either form, read as columns),
    column by column (as NumPy arrays from _NUMPY_FROM eqns): True when
    they all passed (their variables now defined in `defined`), else False,
    to check them eqn by eqn, which reports what is wrong (nothing is left
    done here then). Of the variables the eqns define, only those in `later`
    (ids the jaxpr uses after them) join `defined`: no dict of every one."""
    n = self.n
    if c.effects or c.unset:
      return False
    for col, size in ((c.primitive, n["primitives"]), (c.name_stack, n["name_stacks"]),
                      (c.context, n["contexts"]), (c.traceback, max(n["tracebacks"], 1)),
                      (c.params, n["params"]), (c.result_avals, n["avals"])):
      if col and max(col) >= size:  # (uint32: none below 0)
        return False
    nested, avals = [], set(c.result_avals)  # (nested: literals whose values may hold references)
    n_avals, add, NESTING = n["avals"], avals.add, walk.NESTING
    for i, lit in enumerate(c.literals):
      kind, a = lit.value.WhichOneof("kind"), lit.aval  # (kind None: unset or empty)
      if kind is None or a >= n_avals:
        return False
      add(a)
      if kind in NESTING:
        nested.append(i)
    if c.params and max(c.param_count) > columns.MAX_PARAMS_PER_EQN:
      return False  # (told eqn by eqn, before anything per param)
    check = self._uses_numpy if c.n >= _NUMPY_FROM else self._uses_plain
    if not check(node, defined, c, prefix, later, nested):
      return False
    edges = self.edges.setdefault(node, {})
    for p in set(c.params):
      edges.setdefault(("p", p), "")
    for x in set(c.context):
      edges.setdefault(("x", x), "")
    for a in avals:
      edges.setdefault(("a", a), "")
    return True

  def _uses_plain(self, node, defined, c: columns.Columns, prefix: str, later, nested) -> bool:
    """`_uses_numpy`'s checks for a jaxpr too small to repay NumPy's fixed
    cost (dearer still at its first use in a process), with the loops in C
    (map, zip, itertools): the same verdicts, nothing reported."""
    def eqn_of(counts):
      """The eqn index of each entry of a column whose per-eqn counts are `counts`."""
      return itertools.chain.from_iterable(map(itertools.repeat, range(c.n), counts))

    if c.params and max(c.param_count) > 1:  # (a param name given twice in an eqn)
      pairs = set(zip(eqn_of(c.param_count), map(self.param_names.__getitem__, c.params)))
      if len(pairs) != len(c.params):
        return False
    # id + 1 -> the eqn defining it (-1: before them all); 0 (a literal
    # operand, a dropped output) is defined before every eqn.
    at = dict.fromkeys((v + 1 for v in defined), -1)
    bound = len(at) + len(c.results) - c.results.count(0)
    at.update(zip(c.results, eqn_of(c.result_count)))
    at[0] = -1
    if len(at) != bound + 1:
      return False  # (defined twice)
    # Each operand defined before its eqn (an undefined one: at the end, c.n).
    if not all(map(operator.lt, map(at.get, c.operands, itertools.repeat(c.n)), eqn_of(c.operand_count))):
      return False
    if nested:
      literals, ops, pos = [], c.operands, 0  # (eqn, operand position) of each literal operand
      for k, n in enumerate(c.operand_count):
        literals += [(k, q) for q in range(n) if not ops[pos + q]]
        pos += n
      if not self._literal_values(node, c, nested, literals, prefix):
        return False
    defined.update(dict.fromkeys(v for v in later if v + 1 in at))
    return True

  def _uses_numpy(self, node, defined, c: columns.Columns, prefix: str, later, nested) -> bool:
    """Distinct param names in each eqn, SSA, define-before-use and the
    literals' values, as NumPy arrays: True when they passed (the ids in
    `later` that are defined now joining `defined`), else False."""
    ops, results = _ids(c.operands), _ids(c.results)  # (uint32 + 1: within int64)
    op_eqn = np.repeat(np.arange(c.n), c.operand_count)
    if c.params and max(c.param_count) > 1 and not self._distinct_names(c):
      return False  # (a param name given twice in an eqn)
    # SSA, and each variable defined before its use (ids + 1 in the columns; 0,
    # a literal operand or a dropped output, is defined before every eqn):
    # the defined ids sorted, with the eqn defining each (-1: before them all).
    bound = results != 0
    before = np.fromiter((v + 1 for v in defined), np.int64, len(defined))
    ids = np.concatenate((before, results[bound]))
    at = np.concatenate((np.full(len(before), -1),
                         np.repeat(np.arange(c.n), c.result_count)[bound]))
    order = np.argsort(ids, kind="stable")
    ids, at = ids[order], at[order]
    if len(ids) > 1 and not np.all(ids[1:] != ids[:-1]):
      return False  # (defined twice)
    used = ops != 0
    where = np.searchsorted(ids, ops[used])
    where[where == len(ids)] = 0
    if len(ids) == 0 and used.any():
      return False
    if used.any() and not (np.all(ids[where] == ops[used])
                           and np.all(at[where] < op_eqn[used])):
      return False
    if nested:
      starts = np.concatenate(([0], np.cumsum(c.operand_count)[:-1]))
      is_literal = ~used
      eqns = op_eqn[is_literal]
      positions = np.flatnonzero(is_literal) - starts[eqns]
      where = list(zip(eqns.tolist(), positions.tolist()))
      if not self._literal_values(node, c, nested, where, prefix):
        return False
    if later and len(ids):
      wanted = np.array(later, np.int64) + 1
      hit = ids[np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)] == wanted
      defined.update(dict.fromkeys((wanted[hit] - 1).tolist()))
    return True

  def _distinct_names(self, c: columns.Columns) -> bool:
    """No eqn has two params of one name: (eqn, name) pairs are distinct."""
    names = self._name_ids
    if names is None:
      index: dict[str, int] = {}
      names = self._name_ids = np.array([index.setdefault(x, len(index))
                                         for x in self.param_names], np.int64)
    pairs = np.repeat(np.arange(c.n), c.param_count) * max(len(names), 1) + names[c.params]
    # (in eqn order already: a stable sort, a merge of runs, is some 100x
    # faster here than np.unique's hashing)
    pairs = np.sort(pairs, kind="stable")
    return not np.any(pairs[1:] == pairs[:-1])

  def _literal_values(self, node, c: columns.Columns, nested, where, prefix) -> bool:
    """Checks the references in the values of the literals `nested` (their
    indices; `where`: the (eqn, operand position) of each literal), each
    distinct value once (a model repeats its literals). False, with nothing
    reported, where one fails: the eqn-by-eqn path reports it at each use."""
    found = []
    err, self.err = self.err, lambda path, message: found.append((path, message))
    try:
      seen = set()
      for i in nested:
        lit, (k, q) = c.literals[i], where[i]
        key = lit.value.SerializeToString(deterministic=True)
        if key not in seen:
          seen.add(key)
          self.values(node, lit.value, f"{prefix}eqn[{k}].invars[{q}]")
    finally:
      self.err = err
    return not found

  def _fast_eqn(self, node, defined, prefix):
    """The checks of `jaxpr` for an eqn without effects, building only the
    paths that its literals' values need: True when the eqn passed (its
    variables now defined), else False, to check it on the slow path, which
    reports what is wrong (nothing is left done here then)."""
    n = self.n
    n_prims, n_params, n_avals = n["primitives"], n["params"], n["avals"]
    n_tracebacks, n_stacks, n_contexts = n["tracebacks"], n["name_stacks"], n["contexts"]
    names = self.param_names
    edges = self.edges.get(node)
    if edges is None:
      edges = self.edges[node] = {}

    def fast(k, e) -> bool:
      if not (0 <= e.primitive < n_prims and 0 <= e.name_stack < n_stacks
              and 0 <= e.context < n_contexts) or e.effects:
        return False
      if e.traceback and not 0 <= e.traceback < n_tracebacks:
        return False
      ps = e.params
      if ps:
        if not all(0 <= p < n_params for p in ps):
          return False
        if len(ps) > 1 and len({names[p] for p in ps}) != len(ps):
          return False
      literals = []
      for q, a in enumerate(e.invars):
        kind = a.WhichOneof("kind")
        if kind == "var":
          if a.var not in defined:
            return False
        elif kind == "literal" and 0 <= a.literal.aval < n_avals and a.literal.HasField("value"):
          literals.append((q, a.literal))
        else:
          return False
      out_ids, out_avals = [], []
      for b in e.outvars:
        kind = b.WhichOneof("kind")
        if kind == "var":
          v = b.var
          if v.id in defined or v.id in out_ids or not 0 <= v.aval < n_avals:
            return False
          out_ids.append(v.id)
          out_avals.append(v.aval)
        elif kind != "drop" or not 0 <= b.drop.aval < n_avals:
          return False
      for p in ps:
        edges.setdefault(("p", p), "")
      edges.setdefault(("x", e.context), "")
      for q, lit in literals:
        edges.setdefault(("a", lit.aval), "")
        self.values(node, lit.value, f"{prefix}eqn[{k}].invars[{q}]")
      for i, a in zip(out_ids, out_avals):
        defined[i] = None
        edges.setdefault(("a", a), "")
      return True
    return fast

  def cycles_and_depth(self) -> None:
    """No node may reach itself; jaxprs nest at most decoder._MAX_DEPTH deep."""
    WHITE, GREY, BLACK = 0, 1, 2
    color: dict[tuple, int] = {}
    depth: dict[tuple, int] = {}  # the most jaxprs on a path starting here
    limit = MAX_DEPTH
    names = {"j": "jaxpr", "c": "closed jaxpr", "a": "aval", "p": "param",
             "x": "context", "r": "rule", "f": "function"}
    edges = self.edges
    for start in list(edges):
      if color.get(start, WHITE) != WHITE:
        continue
      stack = [(start, iter(edges.get(start, {})))]
      index = {start: 0}
      color[start] = GREY
      while stack:
        node, it = stack[-1]
        advanced = False
        for child in it:
          if not edges.get(child):  # (refers to nothing, as most avals and params: no
            continue                # cycle through it, and its depth is its own)
          c = color.get(child, WHITE)
          if c == WHITE:
            color[child] = GREY
            index[child] = len(stack)
            stack.append((child, iter(self.edges.get(child, {}))))
            advanced = True
            break
          if c == GREY:
            cycle = [n for n, _ in stack[index[child]:]]
            at = next((n for n in cycle if n[0] == "j"), cycle[0])
            via = " -> ".join(f"{names[n[0]]} {n[1]}" for n in cycle + [cycle[0]])
            where = self.path_of(at) if at[0] in "jc" else f"{names[at[0]]}s[{at[1]}]"
            self.err(where, f"{names[at[0]]} {at[1]} contains itself ({via})")
        if advanced:
          continue
        stack.pop()
        del index[node]
        color[node] = BLACK
        d = max((depth.get(ch, ch[0] == "j") for ch in edges.get(node, ())), default=0)
        depth[node] = d + (node[0] == "j")
    for i in range(self.n["closed_jaxprs"]):
      d = depth.get(("c", i), 0)
      if d > limit + 1:
        self.err(self.path_of(("c", i)), f"sub-jaxprs nested {d - 1} deep, deeper than {limit}")
        break


def check_namespaces(m, err) -> None:
  seen: dict[str, str] = {}
  for k, ns in enumerate(m.namespaces):
    where = f"namespaces[{k}]"
    if not ns.namespace:
      err(where, "namespace without a name")
      continue
    old = seen.get(ns.namespace)
    if old is not None and old != ns.version:
      err(where, f"namespace {ns.namespace} has two versions: {old!r} and {ns.version!r}")
    seen[ns.namespace] = ns.version
    if ns.namespace.split(".")[0] == "jax" and not compat.parse_version(ns.version):
      err(where, f"namespace {ns.namespace} has no JAX version (got {ns.version!r})")
  used = {p.namespace for p in m.primitives}
  for name in sorted(used - set(seen)):
    err("namespaces", f"primitive namespace {name!r} has no version entry")
