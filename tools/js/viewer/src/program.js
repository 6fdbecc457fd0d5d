// The decoded Module with what the views ask of it: the sub-jaxprs of each
// eqn, the uses of each jaxpr, variable names and definitions, and eqns
// grouped into blocks so that no graph that is laid out at once is large.
import { avalStr, nameStackStr, primName, valueStr, varName } from "./format.js";

const n = (x) => x ?? 0;

// The most items (eqns, blocks) one graph shows; bigger jaxprs are grouped.
export const MAX_ITEMS = 120;

export const eqnPath = (j, k) => `jaxprs[${j}].eqns[${k}]`;

// A part of the text as if printed at the left margin: its lines after the
// first lose the indent they were laid out at.
function dedent(s, indent) {
  const [first, ...rest] = s.split("\n");
  return [first, ...rest.map((l) => l.slice(Math.min(indent, /^ */.exec(l)[0].length)))].join("\n");
}

export class Program {
  // `text`: the program's jaxpr text as `jaxpr-proto view` embeds it
  // ({text, jaxprs, eqns, names}, or {error}), or null.
  constructor(m, text = null) {
    this.m = m;
    this.text = text && typeof text.text === "string" ? text : null;
    this.textError = text && typeof text.error === "string" ? text.error : null;
    const root = m.closed_jaxprs[n(m.root)];
    this.root = root && m.jaxprs[n(root.jaxpr)] ? n(root.jaxpr) : -1;
    this._paramRefs = new Map();
    this._names = new Map();
    this._vars = new Map();
    this._groups = new Map();
    this.uses = this._findUses();
  }

  eqn(j, k) { return this.m.jaxprs[j].eqns[k]; }
  prim(e) { return primName(this.m, e.primitive); }
  aval(i) { return avalStr(this.m, i); }
  params(e) { return (e.params ?? []).map((k) => this.m.params[n(k)] ?? { name: `<param ${k}?>` }); }
  paramStr(p) { return valueStr(this.m, p.value); }
  nameStack(e) { return nameStackStr(this.m, e.name_stack); }

  // The jaxprs an eqn's params hold: [{label, jaxpr}], by param name and
  // place ("branches[1]"), custom rules included ("jvp_jaxpr_fun.jvp").
  subs(e) {
    const out = [];
    for (const k of e.params ?? []) {
      if (!this._paramRefs.has(k)) {
        const refs = [];
        const p = this.m.params[n(k)];
        if (p) this._refs(p.value, p.name ?? "", refs, 0);
        this._paramRefs.set(k, refs);
      }
      out.push(...this._paramRefs.get(k));
    }
    return out;
  }

  _refs(v, label, out, depth) {
    if (!v || !v.kind || depth > 16) return;
    const m = this.m;
    const x = v[v.kind];
    const add = (cj, l) => {
      const c = m.closed_jaxprs[n(cj)];
      if (c && m.jaxprs[n(c.jaxpr)]) out.push({ label: l, jaxpr: n(c.jaxpr) });
    };
    switch (v.kind) {
      case "jaxpr": if (m.jaxprs[n(x)]) out.push({ label, jaxpr: n(x) }); break;
      case "closed_jaxpr": add(x, label); break;
      case "tuple": case "list": case "frozenset":
        (x.items ?? []).forEach((y, i) => this._refs(y, `${label}[${i}]`, out, depth + 1)); break;
      case "dict":
        for (const e of x.entries ?? []) this._refs(e.value, `${label}[${valueStr(m, e.key)}]`, out, depth + 1);
        break;
      case "record": case "extension":
        for (const f of x.fields ?? []) this._refs(f.value, `${label}.${f.name}`, out, depth + 1);
        break;
      case "rule": {
        const r = m.rules[n(x)];
        if (r?.jvp && r.jvp.jvp !== undefined) add(r.jvp.jvp, `${label}.jvp`);
        if (r?.vjp && r.vjp.fwd !== undefined) add(r.vjp.fwd, `${label}.fwd`);
        if (r?.vjp && r.vjp.bwd !== undefined) add(r.vjp.bwd, `${label}.bwd`);
        if (r?.lin && r.lin.bwd !== undefined) add(r.lin.bwd, `${label}.bwd`);
        break;
      }
      default: break;
    }
  }

  // jaxpr index -> [{j, k, label}]: the eqns whose params hold it.
  _findUses() {
    const uses = new Map();
    this.m.jaxprs.forEach((jx, j) => (jx.eqns ?? []).forEach((e, k) => {
      for (const s of this.subs(e)) {
        if (!uses.has(s.jaxpr)) uses.set(s.jaxpr, []);
        uses.get(s.jaxpr).push({ j, k, label: s.label });
      }
    }));
    return uses;
  }

  // jaxpr index -> {j, k} of one use on a shortest path from the root.
  parents() {
    if (this._parents) return this._parents;
    const par = new Map();
    const seen = new Set([this.root]);
    const queue = [this.root];
    while (queue.length) {
      const j = queue.shift();
      (this.m.jaxprs[j]?.eqns ?? []).forEach((e, k) => {
        for (const s of this.subs(e)) {
          if (!seen.has(s.jaxpr)) { seen.add(s.jaxpr); par.set(s.jaxpr, { j, k }); queue.push(s.jaxpr); }
        }
      });
    }
    return (this._parents = par);
  }

  // The eqns of a jaxpr and of the jaxprs inside it, each stored jaxpr once.
  innerEqns(j) {
    const seen = new Set([j]);
    const stack = [j];
    let total = 0;
    while (stack.length) {
      const eqns = this.m.jaxprs[stack.pop()].eqns ?? [];
      total += eqns.length;
      for (const e of eqns) for (const s of this.subs(e)) if (!seen.has(s.jaxpr)) { seen.add(s.jaxpr); stack.push(s.jaxpr); }
    }
    return total;
  }

  // The jaxpr text (jp.format(m, debug_info=False)) of eqn k of jaxpr j, or
  // of jaxpr j: what pastes back into a .jaxpr file; null without the text.
  eqnText(j, k) { return this._part(this.text?.eqns?.[j]?.[k]); }
  jaxprText(j) { return this._part(this.text?.jaxprs?.[j]); }
  _part(span) {
    if (!Array.isArray(span)) return null;
    const [a, b, indent] = span;
    return dedent(this.text.text.slice(a, b), indent);
  }

  // Variable id -> name: the text's (its names run on through the program,
  // as JAX's printout names them), else JAX-style in order of definition
  // within jaxpr j.
  names(j) {
    let names = this._names.get(j);
    if (!names) {
      names = new Map(Object.entries(this.text?.names?.[j] ?? {}).map(([id, s]) => [+id, s]));
      const jx = this.m.jaxprs[j];
      const def = (v) => { if (!names.has(n(v.id))) names.set(n(v.id), varName(names.size)); };
      (jx.constvars ?? []).forEach(def);
      (jx.invars ?? []).forEach(def);
      for (const e of jx.eqns ?? []) for (const b of e.outvars ?? []) if (b.kind === "var") def(b.var);
      this._names.set(j, names);
    }
    return names;
  }

  // Where each variable of jaxpr j is defined (eqn index; -1 input, -2
  // constant), its aval, and the last eqn that uses it (eqns.length: an output).
  vars(j) {
    let info = this._vars.get(j);
    if (!info) {
      const jx = this.m.jaxprs[j];
      const eqns = jx.eqns ?? [];
      const def = new Map(), aval = new Map(), last = new Map();
      for (const v of jx.constvars ?? []) { def.set(n(v.id), -2); aval.set(n(v.id), n(v.aval)); }
      for (const v of jx.invars ?? []) { def.set(n(v.id), -1); aval.set(n(v.id), n(v.aval)); }
      eqns.forEach((e, k) => {
        for (const a of e.invars ?? []) if (a.kind === "var") last.set(n(a.var), k);
        for (const b of e.outvars ?? []) {
          if (b.kind === "var") { def.set(n(b.var.id), k); aval.set(n(b.var.id), n(b.var.aval)); }
        }
      });
      for (const a of jx.outvars ?? []) if (a.kind === "var") last.set(n(a.var), eqns.length);
      info = { def, aval, last };
      this._vars.set(j, info);
    }
    return info;
  }

  atomStr(j, a) {
    if (a.kind === "literal") return `${valueStr(this.m, a.literal.value)}:${this.aval(a.literal.aval)}`;
    return this.names(j).get(n(a.var)) ?? `<var ${n(a.var)}?>`;
  }

  // `c:f32[3] = mul a b`, params in brackets as JAX prints them.
  eqnStr(j, k, { params = true } = {}) {
    const e = this.eqn(j, k);
    const names = this.names(j);
    const outs = (e.outvars ?? []).map((b) => (b.kind === "drop"
      ? `_:${this.aval(b.drop.aval)}` : `${names.get(n(b.var.id))}:${this.aval(b.var.aval)}`));
    const ps = params ? this.params(e).map((p) => `${p.name}=${this.paramStr(p)}`) : [];
    const short = `${this.prim(e)}[${ps.join(" ")}]`;  // one line where short, as JAX does
    const head = !ps.length ? this.prim(e)
      : short.length <= 60 ? short : `${this.prim(e)}[\n    ${ps.join("\n    ")}\n  ]`;
    const args = (e.invars ?? []).map((a) => this.atomStr(j, a)).join(" ");
    return `${outs.join(" ")} = ${head}${args ? " " + args : ""}`;
  }

  jaxprStr(j, maxEqns = 400) {
    const jx = this.m.jaxprs[j];
    const names = this.names(j);
    const def = (v) => `${names.get(n(v.id))}:${this.aval(v.aval)}`;
    const consts = (jx.constvars ?? []).map(def).join(" ");
    const lines = [`{ lambda ${consts}${consts ? " " : ""}; ${(jx.invars ?? []).map(def).join(" ")}. let`];
    const eqns = jx.eqns ?? [];
    for (let k = 0; k < Math.min(eqns.length, maxEqns); k++) {
      lines.push("    " + this.eqnStr(j, k, { params: false }));
    }
    if (eqns.length > maxEqns) lines.push(`    ... ${eqns.length - maxEqns} more eqns`);
    const outs = (jx.outvars ?? []).map((a) => this.atomStr(j, a));
    lines.push(`  in (${outs.join(", ")}${outs.length === 1 ? "," : ""}) }`);
    return lines.join("\n");
  }

  // The top-level items of jaxpr j's graph: eqns, and blocks of eqns where
  // the jaxpr has more than MAX_ITEMS (by name scope, else by position).
  groups(j) {
    if (!this._groups.has(j)) {
      this._groups.set(j, this._group(j, 0, (this.m.jaxprs[j].eqns ?? []).length, 0, 0));
    }
    return this._groups.get(j);
  }

  _scopeAt(e, level) {
    const s = this.m.name_stacks[n(e.name_stack)]?.scopes?.[level];
    return s ? (s.transform ? `${s.name}()` : s.name ?? "") : undefined;
  }

  _group(j, lo, hi, level, depth) {
    const eqnItems = (a, b) => Array.from({ length: b - a }, (_, i) => ({ t: "eqn", lo: a + i, hi: a + i + 1 }));
    if (hi - lo <= MAX_ITEMS) return eqnItems(lo, hi);
    const eqns = this.m.jaxprs[j].eqns;
    const runs = [];
    for (let k = lo; k < hi; k++) {
      const s = this._scopeAt(eqns[k], level);
      const last = runs[runs.length - 1];
      if (last && last.name === s) last.hi = k + 1;
      else runs.push({ name: s, lo: k, hi: k + 1 });
    }
    // All in one scope at this level: look one level deeper.
    if (runs.length === 1 && runs[0].name !== undefined && level < 64) return this._group(j, lo, hi, level + 1, depth);
    let items = [];
    for (const r of runs) {
      if (r.name !== undefined && r.hi - r.lo > 1 && runs.length > 1) {
        const block = { t: "block", lo: r.lo, hi: r.hi, label: r.name, key: `jaxprs[${j}]#${r.lo}-${r.hi}@${depth + 1}` };
        block.items = () => (block._items ??= this._group(j, r.lo, r.hi, level + 1, depth + 1));
        items.push(block);
      } else {
        items.push(...eqnItems(r.lo, r.hi));
      }
    }
    return this._chunk(j, items, depth);
  }

  // Consecutive items in blocks of about MAX_ITEMS, nested until few enough.
  _chunk(j, items, depth) {
    if (items.length <= MAX_ITEMS) return items;
    let size = MAX_ITEMS;  // the fewest levels, then blocks of even size
    while (Math.ceil(items.length / size) > MAX_ITEMS) size *= MAX_ITEMS;
    size = Math.ceil(items.length / Math.ceil(items.length / size));
    const out = [];
    for (let i = 0; i < items.length; i += size) {
      const part = items.slice(i, i + size);
      const lo = part[0].lo, hi = part[part.length - 1].hi;
      const block = { t: "block", lo, hi, label: `eqns ${lo}–${hi - 1}`, key: `jaxprs[${j}]#${lo}-${hi}@${depth + 1}c` };
      block.items = () => (block._items ??= this._chunk(j, part, depth + 1));
      out.push(block);
    }
    return out;
  }

  // The chain of blocks of jaxpr j that hold eqn k, outermost first.
  blocksOf(j, k) {
    const out = [];
    let items = this.groups(j);
    for (;;) {
      const b = items.find((it) => it.t === "block" && it.lo <= k && k < it.hi);
      if (!b) return out;
      out.push(b);
      items = b.items();
    }
  }

  // Every block of jaxpr j, for "expand all".
  allBlocks(j) {
    const out = [];
    const walk = (items) => { for (const it of items) if (it.t === "block") { out.push(it); walk(it.items()); } };
    walk(this.groups(j));
    return out;
  }
}
