"""`jp.check`: a checker for .jaxpb files, like `onnx.checker`.

`check(x)` takes .jaxpb bytes, a `Module` message, a file path, or a
ClosedJaxpr / `jp.Function` (which it encodes first), and returns a
`CheckReport` whose `.errors` lists every problem found as `(path, message)`.
The paths are the decoder's: `eqn[12].params.branches[0].eqn[3]`, or a table
entry such as `avals[7]` for what the program does not reach.

It checks, in this order:

1. **structure**, on the message alone (no JAX): SSA (each variable defined
   once), define-before-use, every index into a table in range, no jaxpr that
   contains itself, nesting within the decoder's limits;
2. **params**: each eqn's params decode through their codec (the
   per-primitive codecs of `param_codecs`, else the allow-listed value
   codec), as do the avals, literals and constants; all errors are collected;
3. **versions**: the format version and required features
   (`versions.check_version`), the namespace versions, and the adaptation of
   each primitive and param to this JAX (`upgraders`);
4. **types**: JAX's abstract evaluation of each eqn of each jaxpr (the
   decoded program, and the custom differentiation rules' jaxprs, which
   decoding builds lazily) must give the stored output types
   (`jax.extend.core.check_jaxpr`), constants must match their variables,
   and custom_jvp/vjp calls must match their jaxpr's signature.

A stage runs only when the stages before it found nothing that would make it
meaningless: structure errors stop the check; params and versions both run;
types run when all three passed. A file of another format major is reported
as such and nothing else, since its structure is not this reader's.

`decoder.decode` runs stage 4 too (see `raise_first_type_error`), so that
loading refuses what the checker would reject; `check` reports all errors.
"""
from __future__ import annotations

import dataclasses
import os
import re

from jaxpr_proto import _jax, decoder as _decoder, upgraders, versions
from jaxpr_proto.errors import CheckError, DecodeError, Error, VersionError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

STAGES = ("structure", "params", "versions", "types")
_MAX_VALUE_DEPTH = 90  # below protobuf's own parse limit (100 nested messages)


@dataclasses.dataclass
class CheckReport:
  """What `check` found. `errors` is a list of (path, message)."""
  errors: list[tuple[str, str]] = dataclasses.field(default_factory=list)
  stages: list[str] = dataclasses.field(default_factory=list)  # the stages that ran
  # The stage of each error, parallel to `errors`.
  error_stages: list[str] = dataclasses.field(default_factory=list)
  truncated: int = 0  # errors left out beyond max_errors

  @property
  def ok(self) -> bool:
    return not self.errors

  def __bool__(self) -> bool:
    return self.ok

  def by_stage(self, stage: str) -> list[tuple[str, str]]:
    return [e for e, s in zip(self.errors, self.error_stages) if s == stage]

  def format(self) -> str:
    if self.ok:
      return f"ok ({', '.join(self.stages)})"
    lines = [f"{len(self.errors) + self.truncated} error(s):"]
    for (path, msg), stage in zip(self.errors, self.error_stages):
      lines.append(f"  [{stage}] {path or '<module>'}: {msg}")
    if self.truncated:
      lines.append(f"  ... and {self.truncated} more")
    return "\n".join(lines)

  __str__ = format

  def raise_on_error(self) -> None:
    if not self.ok:
      first_path = self.errors[0][0]
      raise CheckError(self.format(), first_path, self.errors)


class _Collector:

  def __init__(self, report: CheckReport, max_errors: int):
    self.report, self.max_errors = report, max_errors
    self.stage = ""
    self._seen: set[tuple[str, str]] = set()
    self.count = 0

  def __call__(self, path: str, message: str) -> None:
    key = (path, message)
    if key in self._seen:
      return
    self._seen.add(key)
    self.count += 1
    if len(self.report.errors) >= self.max_errors:
      self.report.truncated += 1
      return
    self.report.errors.append(key)
    self.report.error_stages.append(self.stage)


def check(x, *, raise_on_error: bool = False, max_errors: int = 200) -> CheckReport:
  """Checks a .jaxpb (bytes, Module, file path, or ClosedJaxpr / jp.Function).

  Returns a CheckReport; with raise_on_error, raises a CheckError (a
  DecodeError) listing all errors instead of returning a failed report.
  A file that cannot be read raises OSError, as `open` does.
  """
  report = CheckReport()
  err = _Collector(report, max_errors)
  m = _as_module(x, err)
  if m is not None:
    _run(m, err, report)
  if raise_on_error:
    report.raise_on_error()
  return report


def _as_module(x, err):
  if isinstance(x, pb.Module):
    return x
  if isinstance(x, (str, os.PathLike)):
    with open(x, "rb") as f:
      x = f.read()
  if isinstance(x, (bytes, bytearray, memoryview)):
    from jaxpr_proto.api import parse
    err.stage = "structure"
    try:
      return parse(x)
    except DecodeError as e:
      err(e.path, e.message)
      return None
  from jaxpr_proto.function import Function
  if isinstance(x, (_jax.ClosedJaxpr, Function)):
    from jaxpr_proto.api import encode
    return encode(x)
  raise TypeError(f"cannot check a {type(x).__name__}: expected .jaxpb bytes, a Module, "
                  "a file path or a ClosedJaxpr")


def _check_versions(m, err, report) -> None:
  err.stage = "versions"
  report.stages.append("versions")
  try:
    versions.check_version(m)
  except VersionError as e:
    err(e.path, e.message)


def _run(m, err, report) -> None:
  # A file of another major has another structure: say only that.
  if m.format_version.major != versions.FORMAT_MAJOR:
    _check_versions(m, err, report)
    return

  err.stage = "structure"
  report.stages.append("structure")
  before = err.count
  _Structure(m, err).run()
  if err.count > before:
    return

  err.stage = "params"
  report.stages.append("params")
  dec = _CheckingDecoder(m, err)
  params_before = err.count
  roots = dec.decode_all()

  _check_versions(m, err, report)
  _check_namespaces(m, err)
  for path, message in dec.version_errors:
    err(path, message)
  if err.count > params_before or roots is None:
    return

  err.stage = "types"
  report.stages.append("types")
  for path, message in type_errors(dec):
    err(path, message)
  if m.HasField("function"):
    _check_function(m, dec, roots, err)


# --- 1. structure ---------------------------------------------------------------

class _Structure:
  """Checks references, SSA and define-before-use on the message alone."""

  def __init__(self, m, err):
    self.m, self.err = m, err
    self.n = {name: len(getattr(m, name)) for name in (
        "jaxprs", "closed_jaxprs", "avals", "strings", "frames", "tracebacks",
        "name_stacks", "contexts", "primitives", "rules", "params")}
    # Reference graph for cycles and nesting depth: node -> [(node, path)].
    self.edges: dict[tuple, list] = {}
    self.paths: dict[tuple, str] = {}

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
    self.ref("closed_jaxprs", m.root, "root", "root closed jaxpr")
    for i, f in enumerate(m.frames):
      self.ref("strings", f.file, f"frames[{i}].file", "string")
      self.ref("strings", f.function, f"frames[{i}].function", "string")
    for i, tb in enumerate(m.tracebacks):
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
    for i, p in enumerate(m.params):
      self.values(("p", i), p.value, f"params[{i}]({p.name})")
    for i, r in enumerate(m.rules):
      self.rule(i, r)
    for i, c in enumerate(m.closed_jaxprs):
      if self.ref("jaxprs", c.jaxpr, f"closed_jaxprs[{i}].jaxpr", "jaxpr"):
        self.edge(("c", i), ("j", c.jaxpr), "")
        n_const = len(m.jaxprs[c.jaxpr].constvars)
        if len(c.consts) != n_const:
          self.err(f"closed_jaxprs[{i}]", f"{len(c.consts)} consts for {n_const} constvars")
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
    self.assign_paths()
    for i, j in enumerate(m.jaxprs):
      self.jaxpr(i, j)
    self.cycles_and_depth()

  def edge(self, a, b, path) -> None:
    self.edges.setdefault(a, []).append((b, path))

  def rule(self, i, r) -> None:
    kind = r.WhichOneof("kind")
    where = f"rules[{i}]"
    if kind is None:
      self.err(where, "empty custom rule")
      return
    msg = getattr(r, kind)
    fields = {"jvp": ("jvp",), "vjp": ("fwd", "bwd"), "lin": ("bwd",)}[kind]
    if kind in ("jvp", "vjp") and msg.trace_error:
      return  # the rule could not be traced when saved; its jaxprs are unset
    for f in fields:
      self.ref("closed_jaxprs", getattr(msg, f), f"{where}.{kind}.{f}", "closed jaxpr")
    if kind == "vjp":
      self.treedef(("r", i), msg.out_tree, f"{where}.vjp.out_tree", 0)
      self.treedef(("r", i), msg.res_tree, f"{where}.vjp.res_tree", 0)

  def treedef(self, node, t, path, depth) -> None:
    stack = [(t.root, path, depth)]
    while stack:
      n, p, d = stack.pop()
      if d > _MAX_VALUE_DEPTH:
        self.err(p, "pytree structure nested too deeply")
        continue
      for k, v in enumerate(n.keys):
        self.values(node, v, f"{p}.keys[{k}]", d + 1)
      if n.HasField("aux"):
        self.values(node, n.aux, f"{p}.aux", d + 1)
      for k, c in enumerate(n.children):
        stack.append((c, f"{p}.children[{k}]", d + 1))

  def values(self, node, v, path, depth=0) -> None:
    """Checks the references in a Value, iteratively."""
    stack = [(v, path, depth)]
    while stack:
      v, p, d = stack.pop()
      if d > _MAX_VALUE_DEPTH:
        self.err(p, "value nested too deeply")
        continue
      kind = v.WhichOneof("kind")
      if kind is None:
        self.err(p, "empty value")
      elif kind in ("tuple", "list", "frozenset"):
        items = getattr(v, kind).items
        stack.extend((x, f"{p}[{k}]", d + 1) for k, x in reversed(list(enumerate(items))))
      elif kind == "dict":
        for k, e in enumerate(v.dict.entries):
          stack.append((e.key, f"{p}.key", d + 1))
          stack.append((e.value, f"{p}[{k}]", d + 1))
      elif kind in ("record", "extension"):
        for f in getattr(v, kind).fields:
          stack.append((f.value, f"{p}.{f.name}", d + 1))
      elif kind == "treedef":
        self.treedef(node, v.treedef, p, d + 1)
      elif kind == "jaxpr":
        if self.ref("jaxprs", v.jaxpr, p, "jaxpr"):
          self.edge(node, ("j", v.jaxpr), p)
      elif kind == "closed_jaxpr":
        if self.ref("closed_jaxprs", v.closed_jaxpr, p, "closed jaxpr"):
          self.edge(node, ("c", v.closed_jaxpr), p)
      elif kind == "primitive":
        self.ref("primitives", v.primitive.index, p, "primitive")
      elif kind == "rule":
        self.ref("rules", v.rule, p, "rule")
      elif kind == "aval":
        if self.ref("avals", v.aval, p, "aval"):
          self.edge(node, ("a", v.aval), p)

  def assign_paths(self) -> None:
    """The decoder-style path of each node, from the first reference that
    reaches it from the root (depth first, in order), else its table entry."""
    # Edges of jaxprs to what their eqns use are added by `jaxpr`; the paths of
    # sub-jaxprs need them, so collect the eqn-level references first.
    m = self.m
    self._eqn_refs: dict[int, list] = {}
    for i, j in enumerate(m.jaxprs):
      refs = []
      for k, e in enumerate(j.eqns):
        for q in e.params:
          if 0 <= q < self.n["params"]:
            refs.append((("p", q), k, m.params[q].name))
      self._eqn_refs[i] = refs
    paths = self.paths
    limit = _decoder._MAX_DEPTH  # deeper nodes keep their table paths (a path grows with depth)
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
          for child, sub in self.edges.get(pnode, ()):
            if child[0] in "jc":
              rel = sub.split(")", 1)[1] if ")" in sub else ""
              nxt.append((child, f"{prefix}eqn[{k}].params.{name}{rel}", depth + 1))
      else:
        for child, sub in self.edges.get(node, ()):
          if child[0] in "jc":
            nxt.append((child, sub if node[0] != "c" or sub else path, depth))
      stack.extend(reversed(nxt))
    for node in list(paths):
      if node[0] in "jc" and paths[node].count(".params.") > limit:
        del paths[node]

  def path_of(self, node) -> str:
    p = self.paths.get(node)
    if p is not None:
      return p
    return {"j": "jaxprs", "c": "closed_jaxprs"}[node[0]] + f"[{node[1]}]"

  def jaxpr(self, i: int, j) -> None:
    node = ("j", i)
    path = self.path_of(node)
    prefix = f"{path}." if path else ""
    env: set[int] = set()
    err, ref = self.err, self.ref

    def define(v, where):
      if v.id in env:
        err(where, f"variable id {v.id} is defined twice (not SSA)")
      env.add(v.id)
      if ref("avals", v.aval, where, "aval"):
        self.edge(node, ("a", v.aval), where)

    def atom(a, where):
      kind = a.WhichOneof("kind")
      if kind == "var":
        if a.var not in env:
          err(where, f"variable id {a.var} is used before it is defined")
      elif kind == "literal":
        if ref("avals", a.literal.aval, where, "aval"):
          self.edge(node, ("a", a.literal.aval), where)
        if a.literal.HasField("value"):
          self.values(node, a.literal.value, where)
        else:
          err(where, "literal without a value")
      else:
        err(where, "empty operand")

    def effects(effs, where):
      for k, e in enumerate(effs):
        if e.HasField("input_var") and e.input_var not in env:
          err(f"{where}[{k}]", f"effect {e.name} refers to an undefined variable {e.input_var}")

    for k, v in enumerate(j.constvars):
      define(v, f"{prefix}constvars[{k}]")
    for k, v in enumerate(j.invars):
      define(v, f"{prefix}invars[{k}]")
    for k, e in enumerate(j.eqns):
      where = f"{prefix}eqn[{k}]"
      ref("primitives", e.primitive, f"{where}.primitive", "primitive")
      for q, p in enumerate(e.params):
        if ref("params", p, f"{where}.params[{q}]", "param"):
          self.edge(node, ("p", p), where)
      names = [self.m.params[p].name for p in e.params if 0 <= p < self.n["params"]]
      if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        err(f"{where}.params", f"params given twice: {', '.join(dup)}")
      for q, a in enumerate(e.invars):
        atom(a, f"{where}.invars[{q}]")
      effects(e.effects, f"{where}.effects")
      if e.traceback:
        ref("tracebacks", e.traceback, f"{where}.traceback", "traceback")
      ref("name_stacks", e.name_stack, f"{where}.name_stack", "name stack")
      if ref("contexts", e.context, f"{where}.context", "context"):
        self.edge(node, ("x", e.context), where)
      for q, b in enumerate(e.outvars):
        kind = b.WhichOneof("kind")
        if kind == "var":
          define(b.var, f"{where}.outvars[{q}]")
        elif kind == "drop":
          ref("avals", b.drop.aval, f"{where}.outvars[{q}]", "aval")
        else:
          err(f"{where}.outvars[{q}]", "empty output binder")
    for k, a in enumerate(j.outvars):
      atom(a, f"{prefix}outvars[{k}]")
    effects(j.effects, f"{prefix}effects")

  def cycles_and_depth(self) -> None:
    """No node may reach itself; jaxprs nest at most decoder._MAX_DEPTH deep."""
    WHITE, GREY, BLACK = 0, 1, 2
    color: dict[tuple, int] = {}
    depth: dict[tuple, int] = {}  # the most jaxprs on a path starting here
    limit = _decoder._MAX_DEPTH
    names = {"j": "jaxpr", "c": "closed jaxpr", "a": "aval", "p": "param",
             "x": "context", "r": "rule", "f": "function"}
    for start in list(self.edges):
      if color.get(start, WHITE) != WHITE:
        continue
      stack = [(start, iter(self.edges.get(start, ())))]
      index = {start: 0}
      color[start] = GREY
      while stack:
        node, it = stack[-1]
        advanced = False
        for child, _ in it:
          c = color.get(child, WHITE)
          if c == WHITE:
            color[child] = GREY
            index[child] = len(stack)
            stack.append((child, iter(self.edges.get(child, ()))))
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
        d = max((depth.get(ch, 0) for ch, _ in self.edges.get(node, ())), default=0)
        depth[node] = d + (node[0] == "j")
    for i in range(self.n["closed_jaxprs"]):
      d = depth.get(("c", i), 0)
      if d > limit + 1:
        self.err(self.path_of(("c", i)), f"sub-jaxprs nested {d - 1} deep, deeper than {limit}")
        break


# --- 2. params, and what else decoding builds -------------------------------------

class _Bad:
  """Stands in for a value that failed to decode, so that checking goes on."""

  def __repr__(self):
    return "<undecodable>"


_BAD = _Bad()


class _VersionCollector:
  """Wraps the decoder's Upgrader: records its VersionErrors and goes on."""

  def __init__(self, upgrader, sink):
    self._u, self._sink = upgrader, sink

  def __bool__(self):
    return bool(self._u)

  def __getattr__(self, name):
    return getattr(self._u, name)

  def params(self, prim_name, params, path):
    try:
      return self._u.params(prim_name, params, path)
    except VersionError as e:
      self._sink.append((e.path, e.message))
      return params


class _CheckingDecoder(_decoder.Decoder):
  """A Decoder that records errors in params, avals, literals and constants
  and goes on, so that one pass finds them all."""

  def __init__(self, m, err):
    super().__init__(m)
    self._err = err
    self.version_errors: list[tuple[str, str]] = []
    if self.upgrader:
      self.upgrader = _VersionCollector(self.upgrader, self.version_errors)
    self._failed_params: set[tuple] = set()
    self._placeholder_aval = None

  def param(self, i, prim_name, path):
    try:
      return super().param(i, prim_name, path)
    except Error as e:
      key = (i, prim_name)
      if key not in self._failed_params:
        self._failed_params.add(key)
        self._record(e)
      return (self.m.params[i].name, _BAD)

  def _record(self, e: Error) -> None:
    if isinstance(e, VersionError):
      self.version_errors.append((e.path, e.message))
    else:
      self._err(e.path, e.message)

  def primitive(self, i, path):
    try:
      return super().primitive(i, path)
    except Error as e:
      self._record(e)
      self._prims[i] = p = _jax.Primitive(f"<unknown primitive {i}>")
      return p

  def aval(self, i, path):
    try:
      return super().aval(i, path)
    except Error as e:
      self._record(e)
      self._avals[i] = a = self._placeholder()
      return a

  def _placeholder(self):
    if self._placeholder_aval is None:
      import numpy as np
      self._placeholder_aval = _jax.ShapedArray((), np.dtype("float32"))
    return self._placeholder_aval

  def literal(self, msg, aval, path):
    try:
      return super().literal(msg, aval, path)
    except Error as e:
      self._record(e)
      return 0

  def const(self, msg, aval, path):
    try:
      return super().const(msg, aval, path)
    except Error as e:
      self._record(e)
      return 0

  def decode_all(self):
    """Decodes the root, the function signature's avals and every rule's
    jaxprs; returns the root ClosedJaxpr, or None after an error that stopped it."""
    m = self.m
    try:
      root = self.closed_jaxpr(m.root, "")
    except Error as e:
      self._record(e)
      return None
    except RecursionError:
      self._err(self.where, "structure nested too deeply")
      return None
    except Exception as e:  # a gap in the decoder's checks or a bug: still reported
      self._err(self.where, _decoder.internal_error(e, self.where).message)
      return None
    for i, r in enumerate(m.rules):  # decoded lazily on load; here now
      kind = r.WhichOneof("kind")
      msg = getattr(r, kind)
      if kind in ("jvp", "vjp") and msg.trace_error:
        continue
      fields = {"jvp": ("jvp",), "vjp": ("fwd", "bwd"), "lin": ("bwd",)}[kind]
      for f in fields:
        where = f"rules[{i}].{kind}.{f}"
        try:
          self.closed_jaxpr(getattr(msg, f), where)
        except Error as e:
          self._record(e)
        except Exception as e:
          self._err(where, _decoder.internal_error(e, where).message)
    return root


def _check_namespaces(m, err) -> None:
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
    if ns.namespace.split(".")[0] == "jax" and not _jax.parse_version(ns.version):
      err(where, f"namespace {ns.namespace} has no JAX version (got {ns.version!r})")
  used = {p.namespace for p in m.primitives}
  for name in sorted(used - set(seen)):
    err("namespaces", f"primitive namespace {name!r} has no version entry")


# --- 4. types ---------------------------------------------------------------------

_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")
_MISSING = re.compile(r"missing \d+ required (?:keyword-only |positional )?arguments?: (.+)$")


def _first_paragraph(msg: str) -> str:
  head, _, rest = msg.partition("\n\nin equation:\n\n")
  if rest:
    eqn_text = rest.split("\n\nfrom source")[0].strip()
    return f"{head.strip()} (in: {' '.join(eqn_text.split())[:300]})"
  return " ".join(msg.split())[:500]


def _explain(eqn, e: Exception, upgrader) -> tuple[str, bool]:
  """(message, whether a newer JAX is the cause) for an exception of JAX's
  type check of `eqn`."""
  text = str(e)
  prim = eqn.primitive.name if eqn is not None else "?"
  newer = upgrader is not None and upgrader.newer
  m = _UNEXPECTED.search(text)
  if m and isinstance(e, TypeError):
    if newer:
      return (f"primitive {prim} has param {m.group(1)!r}, which this JAX's {prim} lacks "
              f"({upgrader.describe()})"), True
    return f"primitive {prim} does not take a param {m.group(1)!r}", False
  m = _MISSING.search(text.splitlines()[0] if text else "")
  if m and isinstance(e, TypeError):
    return f"primitive {prim} lacks the param(s) {m.group(1)}", False
  if isinstance(e, _jax.JaxprTypeError):
    return _first_paragraph(e.args[0] if e.args else text), False
  return f"{prim}: {type(e).__name__}: {_first_paragraph(text)}", False


def _extra_checks(jaxpr):
  """Checks JAX's own rules leave out. Yields (eqn index, message)."""
  for k, eqn in enumerate(jaxpr.eqns):
    name = eqn.primitive.name
    if name in ("custom_jvp_call", "custom_vjp_call"):
      cj = eqn.params.get("call_jaxpr")
      if not isinstance(cj, _jax.ClosedJaxpr):
        continue
      if len(eqn.invars) != len(cj.in_avals):
        yield k, f"{name} has {len(eqn.invars)} operands for a call_jaxpr of {len(cj.in_avals)} inputs"
        continue
      for q, (x, a) in enumerate(zip(eqn.invars, cj.in_avals)):
        if not _jax.typecompat(a, x.aval):
          yield k, f"{name} operand {q} has type {x.aval.str_short()}, its call_jaxpr expects {a.str_short()}"
          break


def _check_one(jaxpr, upgrader, contexts=()):
  """(eqn index or None, (message, is_version)) of the first type error of one
  jaxpr, checked inside `contexts` (see _jax.sub_jaxpr_contexts), or None."""
  import contextlib
  try:
    with contextlib.ExitStack() as stack:
      for make in contexts:
        stack.enter_context(make())
      _jax.check_jaxpr_eqns(jaxpr)
  except _jax.JaxprTypeError as e:
    k = e.args[1] if len(e.args) == 2 else None
    eqn = jaxpr.eqns[k] if isinstance(k, int) and 0 <= k < len(jaxpr.eqns) else None
    return k, _explain(eqn, e, upgrader)
  except RecursionError:
    return None, ("type check nested too deeply", False)
  except Exception as e:  # a rule of JAX that raised on bad input
    k = _jax.check_jaxpr_frame_eqn_index(e.__traceback__)
    eqn = jaxpr.eqns[k] if isinstance(k, int) and 0 <= k < len(jaxpr.eqns) else None
    return k, _explain(eqn, e, upgrader)
  for k, msg in _extra_checks(jaxpr):
    return k, (msg, False)
  return None


def _contexts(dec) -> dict[int, tuple]:
  """_jax.jaxpr_key(jaxpr) -> the contexts its parents' eqns bind, from the root down."""
  out: dict[int, tuple] = {}
  for i in reversed(list(dec.jaxpr_paths)):  # outer jaxprs finish decoding last
    jaxpr = dec._jaxprs.get(i)
    if not isinstance(jaxpr, _jax.Jaxpr):
      continue
    ctx = out.setdefault(_jax.jaxpr_key(jaxpr), ())
    for eqn in jaxpr.eqns:
      try:
        subs = list(_jax.jaxprs_in_params(eqn.params))
      except Exception:
        continue
      if subs:
        extra = ctx + tuple(_jax.sub_jaxpr_contexts(eqn))
        for sub in subs:
          out.setdefault(_jax.jaxpr_key(sub), extra)
  return out


def _not_reached(dec) -> set[int]:
  """ids of the decoded jaxprs that JAX's check of their parent does not check
  (such as cond branches and scan bodies), and the root."""
  reached: set[int] = set()
  alone: set[int] = set()
  for i in reversed(list(dec.jaxpr_paths)):  # from the root down
    jaxpr = dec._jaxprs.get(i)
    if not isinstance(jaxpr, _jax.Jaxpr):
      continue
    if _jax.jaxpr_key(jaxpr) not in reached:
      alone.add(_jax.jaxpr_key(jaxpr))
    for eqn in jaxpr.eqns:
      try:
        subs = list(_jax.jaxprs_in_params(eqn.params))
        recurses = subs and _jax.typecheck_reaches_sub_jaxprs(eqn)
      except Exception:
        continue
      for sub in subs:
        if recurses:
          reached.add(_jax.jaxpr_key(sub))
  return alone


def _iter_type_errors(dec):
  """(path, message, is_version) of the type errors of all jaxprs that `dec`
  decoded, innermost first; an eqn that only fails because a jaxpr it holds
  does is not reported again.

  A first pass checks only the jaxprs that JAX's checks of their parents do
  not reach; only when it fails is every jaxpr checked on its own, to find
  the innermost place of each error."""
  upgrader = dec.upgrader
  contexts = _contexts(dec)
  alone = _not_reached(dec)
  clean = True
  for i in dec.jaxpr_paths:
    jaxpr = dec._jaxprs.get(i)
    if isinstance(jaxpr, _jax.Jaxpr) and _jax.jaxpr_key(jaxpr) in alone:
      if _check_one(jaxpr, upgrader, contexts.get(_jax.jaxpr_key(jaxpr), ())) is not None:
        clean = False
        break
  if clean:
    yield from _const_errors(dec)
    return
  failed: set[int] = set()
  for i, path in list(dec.jaxpr_paths.items()):  # in the order decoding finished: inner first
    jaxpr = dec._jaxprs.get(i)
    if not isinstance(jaxpr, _jax.Jaxpr):
      continue
    found = _check_one(jaxpr, upgrader, contexts.get(_jax.jaxpr_key(jaxpr), ()))
    if found is None:
      continue
    failed.add(_jax.jaxpr_key(jaxpr))
    k, (msg, is_version) = found
    prefix = f"{path}." if path else ""
    if k is not None:
      subs = {_jax.jaxpr_key(j) for j in _jax.jaxprs_in_params(jaxpr.eqns[k].params)}
      if subs & failed:
        continue
      yield f"{prefix}eqn[{k}]", msg, is_version
    else:
      yield path, msg, is_version
  yield from _const_errors(dec)


def _const_errors(dec):
  """Constants against their variables."""
  for i, cj in list(dec._closed.items()):
    if not isinstance(cj, _jax.ClosedJaxpr):
      continue
    jpath = dec.jaxpr_paths.get(dec.m.closed_jaxprs[i].jaxpr, f"closed_jaxprs[{i}]")
    for k, (v, c) in enumerate(zip(cj.jaxpr.constvars, cj.consts)):
      try:
        ok = _jax.core.typecheck(v.aval, c)
      except Exception:
        ok = False
      if not ok:
        prefix = f"{jpath}." if jpath else ""
        yield f"{prefix}consts[{k}]", f"constant does not match its variable's type {v.aval.str_short()}", False


def type_errors(dec) -> list[tuple[str, str]]:
  """All type errors (path, message) of what `dec` decoded."""
  return [(p, m) for p, m, _ in _iter_type_errors(dec)]


def raise_first_type_error(dec) -> None:
  """For decoding: raises the first type error as a DecodeError (a
  VersionError when a newer JAX's param is the cause)."""
  for path, msg, is_version in _iter_type_errors(dec):
    raise (VersionError if is_version else DecodeError)(msg, path)


def _check_function(m, dec, root, err) -> None:
  sig = m.function
  try:
    dec.treedef(sig.in_tree, "function.in_tree")
    dec.treedef(sig.out_tree, "function.out_tree")
    ins = [dec.aval(i, f"function.in_avals[{k}]") for k, i in enumerate(sig.in_avals)]
    outs = [dec.aval(i, f"function.out_avals[{k}]") for k, i in enumerate(sig.out_avals)]
  except Error as e:
    err(e.path, e.message)
    return
  if ins != list(root.in_avals):
    err("function.in_avals", "the function's input types do not match the jaxpr's inputs")
  if outs != list(root.out_avals):
    err("function.out_avals", "the function's output types do not match the jaxpr's outputs")
