"""Statistics of a Module, read from the message alone (nothing is decoded).

`module_info(m)` gives a JSON-ready dict: versions and producer, table sizes,
eqn counts (overall and by primitive), bytes by section, and how sub-jaxprs
are shared among eqns. Because it never builds a jaxpr, it works on files
whose primitives are not registered in this process, and it is what the
cross-language tests compare other readers against.

Eqn counts come in three flavours:

* `root`: the eqns of the root jaxpr itself;
* `stored`: the eqns of every jaxpr in `Module.jaxprs`, each stored jaxpr once
  (custom-rule jaxprs included). `by_primitive` counts these;
* `expanded`: the eqns of the program with every sub-jaxpr reference counted
  again, as walking the decoded program eqn by eqn would see them (custom-rule
  jaxprs are not part of the program and are left out).
"""
from __future__ import annotations

import collections
from typing import Callable

from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns, dtypes, walk

# The sections of `bytes`, each a group of Module fields; together they cover
# the whole file, so the section sizes add up to the file size.
SECTIONS = {
    "eqns": "the eqns of all jaxprs (literals included; params are indices)",
    "params": "the interned eqn params (names and values)",
    "jaxprs": "the rest of the jaxprs: variables, outputs, effects, debug info",
    "constants": "closed jaxprs: the values of constvars",
    "source_info": "source frames, tracebacks, name stacks and their strings",
    "tables": "avals, primitives, eqn contexts, custom rules",
    "header": "versions, producer, root, function signature, symbolic scope",
}
_FIELD_SECTION = {
    "params": "params",
    "closed_jaxprs": "constants",
    "strings": "source_info", "frames": "source_info", "tracebacks": "source_info",
    "name_stacks": "source_info",
    "avals": "tables", "primitives": "tables", "contexts": "tables", "rules": "tables",
}


def _varint_size(n: int) -> int:
  size = 1
  while n >= 0x80:
    n >>= 7
    size += 1
  return size


def _field_size(number: int, payload: int) -> int:
  """Bytes of one length-delimited field: tag, length, payload."""
  return _varint_size(number << 3) + _varint_size(payload) + payload


def _field_bytes(m, field) -> int:
  """Bytes that one top-level field of `m` takes in the serialized message."""
  if field.is_repeated:
    items = getattr(m, field.name)
    if field.type == field.TYPE_MESSAGE:
      return sum(_field_size(field.number, x.ByteSize()) for x in items)
    if field.type == field.TYPE_STRING:
      return sum(_field_size(field.number, len(x.encode("utf-8"))) for x in items)
    probe = type(m)()
    getattr(probe, field.name).extend(items)
    return probe.ByteSize()
  if not m.HasField(field.name) if field.has_presence else not getattr(m, field.name):
    return 0
  probe = type(m)()
  if field.type == field.TYPE_MESSAGE:
    return _field_size(field.number, getattr(m, field.name).ByteSize())
  setattr(probe, field.name, getattr(m, field.name))
  return probe.ByteSize()


def section_bytes(m: pb.Module, progress: Callable[[int], None] | None = None) -> dict[str, int]:
  """Bytes by section (see SECTIONS); the values add up to m.ByteSize()."""
  out = dict.fromkeys(SECTIONS, 0)
  eqns_number = pb.Jaxpr.DESCRIPTOR.fields_by_name["eqns"].number
  columns_number = pb.Jaxpr.DESCRIPTOR.fields_by_name["columns"].number
  for field in m.DESCRIPTOR.fields:
    if field.name == "jaxprs":
      for k, j in enumerate(m.jaxprs):
        size = j.ByteSize()
        e = sum(_field_size(eqns_number, x.ByteSize()) for x in j.eqns)
        if j.HasField("columns"):
          e += _field_size(columns_number, j.columns.ByteSize())
        out["eqns"] += e
        out["jaxprs"] += _field_size(field.number, size) - e
        if progress is not None:
          progress(k + 1)
    else:
      out[_FIELD_SECTION.get(field.name, "header")] += _field_bytes(m, field)
  # Unknown fields (written by a newer minor version) are counted in the header.
  out["header"] += m.ByteSize() - sum(out.values())
  return out


# --- references among jaxprs ------------------------------------------------

def eqn_refs(eqn: pb.Eqn, m: pb.Module, _cache: dict | None = None) -> set[int]:
  """The indices into m.jaxprs that one eqn's params refer to (rules left out)."""
  out: set[int] = set()
  for i in eqn.params:  # indices into the interned m.params
    if _cache is not None and i in _cache:
      out.update(_cache[i])
      continue
    refs: set[int] = set()
    if i < len(m.params):
      for kind, j, _ in walk.value_refs(m.params[i].value, ""):
        if kind == "jaxpr":
          refs.add(j)
        elif kind == "closed_jaxpr" and j < len(m.closed_jaxprs):
          refs.add(m.closed_jaxprs[j].jaxpr)
    if _cache is not None:
      _cache[i] = refs
    out.update(refs)
  return out


def _eqns(j: pb.Jaxpr):
  """The eqns of `j` as messages (none where its columns are inconsistent)."""
  try:
    return columns.as_eqns(j)
  except DecodeError:
    return []


def _literals(j: pb.Jaxpr):
  """The literal operands of `j`'s eqns (in columns: as stored, no eqns made)."""
  if j.HasField("columns"):
    return j.columns.literals
  return [a.literal for e in j.eqns for a in e.invars if a.WhichOneof("kind") == "literal"]


def rule_jaxprs(m: pb.Module) -> set[int]:
  """The indices into m.jaxprs of custom-rule jaxprs (jvp; fwd and bwd; lin's bwd)."""
  return {m.closed_jaxprs[c].jaxpr for _, _, _, c in walk.rule_jaxprs(m) if c < len(m.closed_jaxprs)}


def root_jaxpr(m: pb.Module) -> int | None:
  if m.root < len(m.closed_jaxprs):
    return m.closed_jaxprs[m.root].jaxpr
  return None


def expanded_eqns(m: pb.Module, start: int, refs: list[list[set[int]]] | None = None) -> int:
  """Eqns of jaxpr `start`, counting every sub-jaxpr reference again."""
  if refs is None:
    cache: dict = {}
    refs = [[eqn_refs(e, m, cache) for e in _eqns(j)] for j in m.jaxprs]
  def count(i: int) -> int:  # iterative post-order: files may nest deeply
    memo: dict[int, int] = {}
    visiting: set[int] = set()
    stack = [(i, False)]
    while stack:
      j, ready = stack.pop()
      if j in memo or not 0 <= j < len(m.jaxprs):
        continue
      subs = [s for per_eqn in refs[j] for s in per_eqn]
      if ready:  # a reference back to an ancestor (a malformed file) counts 0
        memo[j] = columns.eqn_count(m.jaxprs[j]) + sum(memo.get(s, 0) for s in subs)
        visiting.discard(j)
      elif j not in visiting:
        visiting.add(j)
        stack.append((j, True))
        stack.extend((s, False) for s in subs if s not in memo and s not in visiting)
    return memo.get(i, 0)

  return count(start)


# --- summary ----------------------------------------------------------------

def primitive_names(m: pb.Module) -> list[str]:
  """`name` for JAX's own primitives, `namespace::name` for others."""
  return [p.name if p.namespace == "jax" else f"{p.namespace}::{p.name}" for p in m.primitives]


def aval_str(m: pb.Module, i: int) -> str:
  """An aval as JAX prints it, such as `f32[8,3]`."""
  if not 0 <= i < len(m.avals):
    return f"<aval {i}?>"
  a = m.avals[i]
  kind = a.WhichOneof("kind")
  if kind == "token":
    return "Token"
  if kind == "ref":
    return f"Ref{{{aval_str(m, a.ref.inner)}}}" if a.ref.inner != i else "Ref{?}"
  if kind != "shaped_array":
    return "<unknown aval>"
  s = a.shaped_array
  dims = ",".join(str(d.constant) if d.WhichOneof("kind") == "constant" else d.symbolic
                  for d in s.shape)
  name = dtypes.short_name(dtypes.NAMES[s.dtype]) if s.dtype in dtypes.NAMES else f"dtype{s.dtype}"
  if s.dtype == pb.DTYPE_KEY:
    name = f"key<{s.key_impl}>"
  return f"{name}[{dims}]"


def external_data(m: pb.Module) -> dict[str, dict]:
  """{location: {"arrays": n, "bytes": b}} of the arrays whose bytes are
  outside the message: constants, literals and params, nested values
  included; an array stored once and referred to again counts once."""
  out: dict[str, dict] = {}
  seen = set()
  values = [v for c in m.closed_jaxprs for v in c.consts] + [p.value for p in m.params]
  values += [lit.value for j in m.jaxprs for lit in _literals(j)]
  for a in (a for v in values for a in walk.value_arrays(v)):
    if not a.HasField("external"):
      continue
    e = a.external
    if (e.location, e.offset, e.length) not in seen:
      seen.add((e.location, e.offset, e.length))
      entry = out.setdefault(e.location, {"arrays": 0, "bytes": 0})
      entry["arrays"] += 1
      entry["bytes"] += e.length
  return dict(sorted(out.items()))


def module_info(m: pb.Module, *, progress: Callable[[int], None] | None = None) -> dict:
  """A JSON-ready summary of `m`; see the module docstring."""
  names = primitive_names(m)
  by_prim: collections.Counter = collections.Counter()
  refs: list[list[set[int]]] = []
  cache: dict = {}
  eqns_of = [_eqns(j) for j in m.jaxprs]  # (made once: columns become messages)
  for eqns in eqns_of:
    by_prim.update(names[e.primitive] if e.primitive < len(names) else f"<primitive {e.primitive}?>"
                   for e in eqns)
    refs.append([eqn_refs(e, m, cache) for e in eqns])

  # Sharing: how many distinct eqns refer to each jaxpr.
  referrers: collections.Counter = collections.Counter()
  for per_eqn in refs:
    for r in per_eqn:
      referrers.update(r)
  rules = rule_jaxprs(m)
  root = root_jaxpr(m)
  shared = sorted((i for i, n in referrers.items() if n > 1 and 0 <= i < len(m.jaxprs)),
                  key=lambda i: (-referrers[i], i))

  def in_avals(i):
    if i is None or not 0 <= i < len(m.jaxprs):
      return []
    return [aval_str(m, v.aval) for v in m.jaxprs[i].invars]

  def out_avals(i):
    if i is None or not 0 <= i < len(m.jaxprs):
      return []
    j, ids = m.jaxprs[i], {}
    for v in (*j.constvars, *j.invars):
      ids[v.id] = v.aval
    for e in eqns_of[i]:
      for b in e.outvars:
        if b.WhichOneof("kind") == "var":
          ids[b.var.id] = b.var.aval
    return [aval_str(m, ids.get(a.var, -1)) if a.WhichOneof("kind") == "var"
            else aval_str(m, a.literal.aval) for a in j.outvars]

  stored = sum(columns.eqn_count(j) for j in m.jaxprs)
  return {
      "format_version": f"{m.format_version.major}.{m.format_version.minor}",
      "producer": {
          "jaxpr_proto": m.producer.jaxpr_proto_version,
          "jax": m.producer.jax_version,
          "jaxlib": m.producer.jaxlib_version,
      },
      "namespaces": {n.namespace: n.version for n in m.namespaces},
      "required_features": list(m.required_features),
      "in_avals": in_avals(root),
      "out_avals": out_avals(root),
      "eqns": {
          "root": columns.eqn_count(m.jaxprs[root]) if root is not None and root < len(m.jaxprs) else 0,
          "stored": stored,
          "expanded": expanded_eqns(m, root, refs) if root is not None else 0,
      },
      "by_primitive": dict(sorted(by_prim.items(), key=lambda kv: (-kv[1], kv[0]))),
      "tables": {
          "jaxprs": len(m.jaxprs), "closed_jaxprs": len(m.closed_jaxprs),
          "avals": len(m.avals), "primitives": len(m.primitives),
          "strings": len(m.strings), "frames": len(m.frames),
          "tracebacks": len(m.tracebacks), "name_stacks": len(m.name_stacks),
          "contexts": len(m.contexts), "rules": len(m.rules), "params": len(m.params),
      },
      "bytes": {"total": m.ByteSize(), **section_bytes(m, progress)},
      "external": external_data(m),
      "sharing": {
          "sub_jaxprs": sum(1 for i in range(len(m.jaxprs)) if i != root and i not in rules),
          "rule_jaxprs": len(rules),
          "shared": len(shared),
          "referring_eqns": sum(referrers[i] for i in shared),
          "eqns_saved": sum((referrers[i] - 1) * columns.eqn_count(m.jaxprs[i]) for i in shared),
          "top": [{"jaxpr": i, "eqns": columns.eqn_count(m.jaxprs[i]), "referring_eqns": referrers[i]}
                  for i in shared[:10]],
      },
      "function": m.function.name if m.HasField("function") else None,
  }


def format_info(info: dict, file: str | None = None, size: int | None = None) -> str:
  """The human-readable form of module_info's dict."""
  lines = []
  add = lines.append
  if file is not None:
    add(f"file          {file}" + (f" ({size:,} bytes)" if size is not None else ""))
  p = info["producer"]
  add(f"format        {info['format_version']}")
  add(f"producer      jaxpr_proto {p['jaxpr_proto'] or '?'}, jax {p['jax'] or '?'}, "
      f"jaxlib {p['jaxlib'] or '?'}")
  if info["namespaces"]:
    add("namespaces    " + ", ".join(f"{k} {v}".rstrip() for k, v in info["namespaces"].items()))
  if info["required_features"]:
    add("features      " + ", ".join(info["required_features"]))
  if info["function"]:
    add(f"function      {info['function']}")
  add(f"in avals      {', '.join(info['in_avals']) or '-'}")
  add(f"out avals     {', '.join(info['out_avals']) or '-'}")
  e = info["eqns"]
  add(f"eqns          {e['root']} in the root jaxpr, {e['expanded']} counting each "
      f"sub-jaxpr use, {e['stored']} stored")
  add("by primitive (stored eqns):")
  width = max((len(k) for k in info["by_primitive"]), default=0)
  for k, v in info["by_primitive"].items():
    add(f"  {k:<{width}}  {v:>6}")
  b = info["bytes"]
  add(f"bytes by section (total {b['total']:,}):")
  for k in SECTIONS:
    pct = 100.0 * b[k] / b["total"] if b["total"] else 0.0
    add(f"  {k:<12} {b[k]:>10,}  {pct:5.1f}%")
  for loc, x in info.get("external", {}).items():
    add(f"external      {loc}: {x['arrays']} arrays, {x['bytes']:,} bytes")
  t = info["tables"]
  add("tables        " + ", ".join(f"{k} {v}" for k, v in t.items()))
  s = info["sharing"]
  add(f"sharing       {s['sub_jaxprs']} sub-jaxprs ({s['rule_jaxprs']} more in custom rules); "
      f"{s['shared']} shared by {s['referring_eqns']} eqns, saving {s['eqns_saved']} eqns")
  for x in s["top"]:
    add(f"  jaxprs[{x['jaxpr']}]: {x['eqns']} eqns, used by {x['referring_eqns']} eqns")
  return "\n".join(lines)
