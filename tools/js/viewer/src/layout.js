// What is expanded, and the layout (dagre) of what that makes visible.
//
// Each graph is laid out on its own: a jaxpr's or a block's inputs, items and
// outputs; an expanded item is one big node of its parent's graph, holding its
// own layout. Layouts are cached by key and redone only up the chain of
// parents of what changed, so expanding a group lays out that group and its
// ancestors, never the whole program.
import * as dagre from "@dagrejs/dagre";
import { eqnPath } from "./program.js";

const n = (x) => x ?? 0;
export const CHAR_W = 7.2;  // px per character of the 12px monospace font
export const PAD = 10, HEAD = 24, SUBHEAD = 20;
const textW = (s, cw = CHAR_W) => s.length * cw;
const clip = (s, len) => (s.length > len ? s.slice(0, len - 1) + "…" : s);

// Params that are rarely what one looks for on a node (the panel shows all).
const QUIET = new Set(["sharding", "out_sharding", "precision", "preferred_element_type",
  "unroll", "donated_invars", "in_shardings", "out_shardings", "in_layouts", "out_layouts",
  "ctx_mesh", "compiler_options_kvs", "keep_unused", "inline", "symbolic_zeros",
  "num_consts", "num_carry", "linear", "jaxpr", "out_dtype", "accumulation_type"]);

export class View {
  constructor(prog) {
    this.p = prog;
    this.expanded = new Set();  // keys of expanded eqns (their paths) and blocks
    this.owner = new Map([[prog.root, "root"]]);  // jaxpr -> the eqn that shows it
    this.cache = new Map();
    this.parent = new Map();    // layout key -> the key of the layout it is in
    this.active = new Set();    // the jaxprs being laid out
  }

  // --- state -------------------------------------------------------------------

  toggle(key) {
    if (this.expanded.has(key)) {
      this.expanded.delete(key);
      this._release(key);
    } else {
      this.expanded.add(key);
    }
    this._invalidate(key);
  }

  // Show shared jaxpr `s` inside eqn `key` rather than at its other use.
  showHere(s, key) {
    for (let k = key; k; k = this.parent.get(k)) if (k === `J${s}`) return;  // not inside itself
    const old = this.owner.get(s);
    if (old === "root") return;
    if (old) this._invalidate(old);
    this.owner.set(s, key);
    this.expanded.add(key);
    this._invalidate(key);
  }

  expandAll() {
    const p = this.p;
    p.m.jaxprs.forEach((jx, j) => {
      (jx.eqns ?? []).forEach((e, k) => { if (p.subs(e).length) this.expanded.add(eqnPath(j, k)); });
      for (const b of p.allBlocks(j)) this.expanded.add(b.key);
    });
    this.reset(false);
  }

  reset(collapse = true) {
    if (collapse) this.expanded.clear();
    this.owner = new Map([[this.p.root, "root"]]);
    this.cache.clear();
  }

  // Make eqn k of jaxpr j visible: expand the uses from the root to it and
  // the blocks that hold it.
  reveal(j, k) {
    const chain = [];
    const par = this.p.parents();
    for (let s = j; s !== this.p.root; s = par.get(s).j) {
      if (!par.has(s) || chain.length > this.p.m.jaxprs.length) return false;  // unreachable
      chain.push({ s, use: par.get(s) });
    }
    for (const { s, use } of chain.reverse()) {
      for (const b of this.p.blocksOf(use.j, use.k)) this.expanded.add(b.key);
      const key = eqnPath(use.j, use.k);
      this.expanded.add(key);
      this.owner.set(s, key);
    }
    for (const b of this.p.blocksOf(j, k)) this.expanded.add(b.key);
    this.cache.clear();
    return true;
  }

  _invalidate(key) {
    for (let k = key; k; k = this.parent.get(k)) this.cache.delete(k);
  }

  // A collapsed eqn no longer shows its jaxprs (nor what they show): others may.
  _release(key) {
    const todo = [key];
    while (todo.length) {
      const k = todo.pop();
      for (const [s, o] of this.owner) {
        if (o !== k) continue;
        this.owner.delete(s);
        const prefix = `jaxprs[${s}].`;
        for (const c of [...this.cache.keys()]) if (c === `J${s}` || c.startsWith(prefix) || c.startsWith(`jaxprs[${s}]#`)) this.cache.delete(c);
        for (const o2 of new Set(this.owner.values())) if (o2.startsWith(prefix)) todo.push(o2);
      }
    }
  }

  // --- layouts -----------------------------------------------------------------

  root() { return this._jaxpr(this.p.root, null); }

  _cached(key, parentKey, make) {
    this.parent.set(key, parentKey);
    let box = this.cache.get(key);
    if (!box) { box = make(); this.cache.set(key, box); }
    return box;
  }

  _jaxpr(j, parentKey) {
    const key = `J${j}`;
    return this._cached(key, parentKey, () => {
      this.active.add(j);  // (a jaxpr never shows inside itself, whatever a file says)
      try {
        return this._graph(key, j, this.p.groups(j), 0, (this.p.m.jaxprs[j].eqns ?? []).length, true);
      } finally {
        this.active.delete(j);
      }
    });
  }

  _block(j, block, parentKey) {
    return this._cached(block.key, parentKey, () => this._graph(block.key, j, block.items(), block.lo, block.hi, false));
  }

  // One graph: inputs, items and outputs of a jaxpr (whole: true) or of a
  // block of its eqns [lo, hi) (whose inputs and outputs are the values that
  // cross the block's border).
  _graph(key, j, items, lo, hi, whole) {
    const p = this.p, jx = p.m.jaxprs[j], eqns = jx.eqns ?? [];
    const vars = p.vars(j), names = p.names(j);
    const nodes = [], inputOf = new Map();
    const addNode = (nd) => nodes.push(nd) - 1;
    const ioNode = (kind, label, id) => addNode({ kind, j, id, label: clip(label, 36), w: Math.max(44, textW(clip(label, 36)) + 20), h: 22 });

    if (whole) {
      const di = jx.debug_info?.arg_names;
      const argName = (i) => (di && !(di.missing ?? []).includes(i) ? di.values?.[i] : undefined);
      for (const v of jx.constvars ?? []) inputOf.set(n(v.id), ioNode("const", `const ${names.get(n(v.id))}`, n(v.id)));
      (jx.invars ?? []).forEach((v, i) => {
        const a = argName(i);
        inputOf.set(n(v.id), ioNode("in", `in ${names.get(n(v.id))}${a ? ` · ${a}` : ""}`, n(v.id)));
      });
    }
    const itemNode = items.map((it) => addNode(this._item(key, j, it)));
    const los = items.map((it) => it.lo);
    const itemAt = (k) => {  // the item holding eqn k: the last whose lo <= k
      let a = 0, b = los.length - 1;
      while (a < b) { const mid = (a + b + 1) >> 1; if (los[mid] <= k) a = mid; else b = mid - 1; }
      return itemNode[a];
    };
    // Every use of a value: [variable, the node that uses it].
    const uses = [];
    items.forEach((it, i) => {
      for (let k = it.lo; k < it.hi; k++) {
        for (const a of eqns[k].invars ?? []) if (a.kind === "var") uses.push([n(a.var), itemNode[i]]);
      }
    });
    if (whole) {
      const rp = jx.debug_info?.result_paths;
      (jx.outvars ?? []).forEach((a, i) => {
        const path = rp && !(rp.missing ?? []).includes(i) ? rp.values?.[i] : "";
        const what = a.kind === "var" ? names.get(n(a.var)) : p.atomStr(j, a);
        const o = ioNode("out", `out ${what}${path ? ` · ${path}` : ""}`, a.kind === "var" ? n(a.var) : undefined);
        if (a.kind === "var") uses.push([n(a.var), o]);
      });
    } else {
      items.forEach((it, i) => {
        for (let k = it.lo; k < it.hi; k++) {
          for (const b of eqns[k].outvars ?? []) {
            const v = b.kind === "var" ? n(b.var.id) : undefined;
            if (v !== undefined && (vars.last.get(v) ?? -1) >= hi) uses.push([v, ioNode("out", `to ${names.get(v)}`, v)]);
          }
        }
      });
    }
    // An input that many nodes use gets a copy beside each of them: one node
    // with long edges to all would make dagre route them through every rank.
    const fanout = new Map();
    const inside = (v) => { const d = vars.def.get(v); return d !== undefined && d >= lo && d < hi; };
    for (const [v, d] of uses) if (!inside(v)) { const s = fanout.get(v) ?? new Set(); s.add(d); fanout.set(v, s); }
    const copies = new Map();  // input variable -> (user node -> its copy)
    const source = (v, d) => {
      if (inside(v)) return itemAt(vars.def.get(v));
      if (!inputOf.has(v)) inputOf.set(v, ioNode("in", `${whole ? "?" : "from"} ${names.get(v) ?? `<var ${v}>`}`, v));
      const first = inputOf.get(v);
      if (fanout.get(v).size <= 2) return first;
      const c = copies.get(v) ?? new Map();
      copies.set(v, c);
      if (!c.size) c.set(d, first);
      if (!c.has(d)) c.set(d, addNode({ ...nodes[first] }));
      return c.get(d);
    };
    const edges = new Map();
    for (const [v, d] of uses) {
      const s = source(v, d);
      if (s === d) continue;
      const ek = `${s}>${d}`;
      if (!edges.has(ek)) edges.set(ek, { s, d, vars: [] });
      edges.get(ek).vars.push(v);
    }
    return this._dagre(nodes, [...edges.values()].map((e) => ({ ...e, label: this._edgeLabel(vars, e.vars) })));
  }

  _edgeLabel(vars, vs) {
    const first = this.p.aval(vars.aval.get(vs[0]));
    return vs.length > 1 ? `${first} +${vs.length - 1}` : first;
  }

  _dagre(nodes, edges) {
    const g = new dagre.graphlib.Graph({ multigraph: false });
    g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 26, edgesep: 8, marginx: 4, marginy: 4 });
    g.setDefaultEdgeLabel(() => ({}));
    nodes.forEach((nd, i) => g.setNode(String(i), { width: nd.w, height: nd.h }));
    for (const e of edges) {
      g.setEdge(String(e.s), String(e.d), { width: textW(e.label, 6) + 6, height: 12, labelpos: "c" });
    }
    dagre.layout(g);
    nodes.forEach((nd, i) => { const l = g.node(String(i)); nd.x = l.x - nd.w / 2; nd.y = l.y - nd.h / 2; });
    for (const e of edges) {
      const l = g.edge(String(e.s), String(e.d));
      e.points = l.points;
      e.lx = l.x;
      e.ly = l.y;
    }
    const gr = g.graph();
    return { w: Math.max(gr.width ?? 0, 40), h: Math.max(gr.height ?? 0, 20), nodes, edges };
  }

  // --- items -------------------------------------------------------------------

  _item(parentKey, j, it) {
    if (it.t === "block") {
      this.parent.set(it.key, parentKey);  // so that toggling it relays out its parents
      const count = `${it.hi - it.lo} eqns`;
      if (!this.expanded.has(it.key)) {
        return { kind: "block", j, block: it, label: clip(it.label, 40), sub: count,
          w: Math.max(textW(clip(it.label, 40)) + 40, textW(count, 6.6) + 24), h: 40 };
      }
      const inner = this._block(j, it, parentKey);
      const title = `▾ ${clip(it.label, 60)} · ${count}`;
      return { kind: "xblock", j, block: it, title, inner,
        w: Math.max(inner.w + 2 * PAD, textW(title) + 2 * PAD), h: inner.h + HEAD + PAD };
    }
    const k = it.lo, e = this.p.eqn(j, k), path = eqnPath(j, k);
    const subs = this.p.subs(e);
    const prim = this.p.prim(e);
    const params = this.keyParams(e);
    if (subs.length) this.parent.set(path, parentKey);
    if (subs.length && this.expanded.has(path)) return this._eqnGroup(parentKey, j, k, prim, params, subs);
    const l1 = subs.length ? `▸ ${prim}` : prim;
    const l2 = subs.length ? clip(`${params ? params + " · " : ""}${this._innerCount(subs)} eqns`, 44) : params;
    return { kind: "eqn", j, k, path, l1, l2, subs: subs.length > 0,
      w: Math.max(56, textW(l1) + 20, textW(l2, 6.6) + 20), h: l2 ? 38 : 24 };
  }

  _innerCount(subs) {
    return [...new Set(subs.map((s) => s.jaxpr))].reduce((t, s) => t + (this.p.m.jaxprs[s].eqns ?? []).length, 0);
  }

  // A few short params for a node's second line: `name` first (jit's).
  keyParams(e) {
    const out = [];
    const ps = this.p.params(e);
    ps.sort((a, b) => (b.name === "name") - (a.name === "name"));
    for (const q of ps) {
      if (QUIET.has(q.name) || out.length >= 2) continue;
      const s = this.p.paramStr(q);
      if (s === "None" || s.length > 26 || /jaxprs\[|rules\[/.test(s)) continue;
      out.push(q.name === "name" ? s : `${q.name}=${s}`);
    }
    return clip(out.join(" "), 44);
  }

  // An expanded eqn: a frame with one panel per jaxpr its params hold, side
  // by side. A jaxpr that another eqn shows already is a stub ("show here").
  _eqnGroup(parentKey, j, k, prim, params, subs) {
    const key = eqnPath(j, k);
    this.parent.set(key, parentKey);
    const cached = this.cache.get(key);
    if (cached) return cached;
    const panels = [];
    const here = new Set();
    let x = PAD;
    let h = 0;
    for (const s of subs) {
      const S = s.jaxpr;
      if (!this.owner.has(S)) this.owner.set(S, key);
      const uses = (this.p.uses.get(S) ?? []).length;
      const title = clip(`${s.label} · jaxprs[${S}]${uses > 1 ? ` · ${uses} uses` : ""}`, 70);
      let panel;
      if (this.owner.get(S) === key && !here.has(S) && !this.active.has(S)) {
        here.add(S);
        const box = this._jaxpr(S, key);
        panel = { S, title, box, w: Math.max(box.w, textW(title) + 8), h: box.h + SUBHEAD };
      } else {
        const text = here.has(S) ? "the same jaxpr as above" : "shown at another use: click to show here";
        panel = { S, title, stub: text, w: Math.max(textW(title), textW(text)) + 16, h: SUBHEAD + 30 };
      }
      panel.x = x;
      panel.y = HEAD;
      x += panel.w + PAD;
      h = Math.max(h, panel.h);
      panels.push(panel);
    }
    const title = `▾ ${prim}${params ? " " + params : ""}`;
    const box = { kind: "egroup", j, k, path: key, title, panels,
      w: Math.max(x, textW(title) + 2 * PAD), h: HEAD + h + PAD };
    this.cache.set(key, box);
    return box;
  }
}
