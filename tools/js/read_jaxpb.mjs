#!/usr/bin/env node
// A small reader of jaxpr-proto `.jaxpb` files in JavaScript, with protobufjs.
//
// It loads the schema (proto/jaxpr_proto/v1/jaxpr.proto) at run time, decodes
// a file, prints every stored jaxpr in jaxpr-like syntax, and reports the eqn
// counts that `jaxpr-proto info` reports: the eqns of the root jaxpr, the eqns
// stored in Module.jaxprs, the eqns counting every sub-jaxpr use again, and
// the stored eqns by primitive. It needs nothing but docs/schema.md to write.
//
//   npm ci                                   # once, in tools/js
//   node read_jaxpb.mjs FILE.jaxpb           # print the program and the counts
//   node read_jaxpb.mjs --json FILE.jaxpb    # the counts only, as JSON
//   node read_jaxpb.mjs --proto PATH ...     # use another copy of jaxpr.proto
//
// Exit status: 0 success, 1 unreadable file, 2 usage error.

import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";

import * as fmt from "./viewer/src/format.js";

// Quietly stop when the reader of our output goes away (`... | head`).
process.stdout.on("error", (e) => process.exit(e.code === "EPIPE" ? 0 : 1));

const HERE = dirname(fileURLToPath(import.meta.url));
const DEFAULT_PROTO = resolve(HERE, "../../proto/jaxpr_proto/v1/jaxpr.proto");

// --- arguments -----------------------------------------------------------------

function usage(msg) {
  if (msg) process.stderr.write(`read_jaxpb: error: ${msg}\n`);
  process.stderr.write("usage: node read_jaxpb.mjs [--json] [--proto PATH] FILE.jaxpb\n");
  process.exit(2);
}

let asJson = false;
let protoPath = DEFAULT_PROTO;
const files = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--json") asJson = true;
  else if (a === "--proto") protoPath = argv[++i] ?? usage("--proto needs a path");
  else if (a === "-h" || a === "--help") {
    process.stdout.write("usage: node read_jaxpb.mjs [--json] [--proto PATH] FILE.jaxpb\n");
    process.exit(0);
  } else if (a.startsWith("-")) usage(`unknown option ${a}`);
  else files.push(a);
}
if (files.length !== 1) usage("expected one FILE");

// --- decoding --------------------------------------------------------------------

const root = new protobuf.Root().loadSync(protoPath, { keepCase: true });
const Module = root.lookupType("jaxpr_proto.v1.Module");

let m;
try {
  const bytes = readFileSync(files[0]);
  m = fmt.eqnsFromColumns(Module.toObject(Module.decode(bytes), {
    longs: String, enums: String, arrays: true, oneofs: true, defaults: false,
  }));
} catch (e) {
  process.stderr.write(`read_jaxpb: error: ${files[0]}: ${e.message}\n`);
  process.exit(1);
}
if (!m.format_version) {
  process.stderr.write(`read_jaxpb: error: ${files[0]}: not a jaxpr-proto file (no format_version)\n`);
  process.exit(1);
}
if ((m.format_version.major ?? 0) !== 1) {
  process.stderr.write(`read_jaxpb: error: ${files[0]}: format ${m.format_version.major}.x; this reader reads 1.x\n`);
  process.exit(1);
}

const n = (x) => x ?? 0;  // proto3 scalars at their default are absent

// Eqn.params holds indices into the interned Module.params (name + value).
const param = (k) => (m.params ?? [])[n(k)];

// --- names and types ---------------------------------------------------------------

// The rules of names, types and values are the viewer's (one copy, a module).
const primName = (i) => fmt.primName(m, i);
const avalStr = (i) => fmt.avalStr(m, i);
const valueStr = (v) => fmt.valueStr(m, v);
const { varName } = fmt;

// --- printing ------------------------------------------------------------------

function printJaxpr(idx) {
  const j = m.jaxprs[idx];
  const names = new Map();
  const avalOf = new Map();
  const def = (v) => {
    const id = n(v.id);
    names.set(id, varName(names.size));
    avalOf.set(id, n(v.aval));
    return `${names.get(id)}:${avalStr(n(v.aval))}`;
  };
  const atom = (a) => {
    if (a.kind === "literal") {
      const lit = a.literal;
      return `${valueStr(lit.value)}:${avalStr(n(lit.aval))}`;
    }
    return names.get(n(a.var)) ?? `<var ${n(a.var)}?>`;
  };
  const consts = (j.constvars ?? []).map(def).join(" ");
  const ins = (j.invars ?? []).map(def).join(" ");
  const lines = [`jaxprs[${idx}] = { lambda ${consts}${consts ? " " : ""}; ${ins}. let`];
  for (const e of j.eqns ?? []) {
    const outs = (e.outvars ?? []).map((b) => (b.kind === "drop" ? `_:${avalStr(n(b.drop.aval))}` : def(b.var)));
    const params = (e.params ?? []).map((k) => {
      const p = param(k);
      return p ? `${p.name ?? ""}=${valueStr(p.value)}` : `<param ${k}?>`;
    });
    const head = params.length ? `${primName(n(e.primitive))}[${params.join(" ")}]` : primName(n(e.primitive));
    const args = (e.invars ?? []).map(atom).join(" ");
    lines.push(`    ${outs.join(" ")} = ${head}${args ? " " + args : ""}`);
  }
  const outs = (j.outvars ?? []).map(atom);
  lines.push(`  in (${outs.join(", ")}${outs.length === 1 ? "," : ""}) }`);
  return lines.join("\n");
}

// --- counting (the same definitions as `jaxpr-proto info`) --------------------------

function valueRefs(v, out) {
  if (!v || !v.kind) return;
  const x = v[v.kind];
  switch (v.kind) {
    case "jaxpr": out.add(n(x)); break;
    case "closed_jaxpr": { const cj = m.closed_jaxprs[n(x)]; if (cj) out.add(n(cj.jaxpr)); break; }
    case "tuple": case "list": case "frozenset": for (const y of x.items ?? []) valueRefs(y, out); break;
    case "dict": for (const e of x.entries ?? []) { valueRefs(e.key, out); valueRefs(e.value, out); } break;
    case "record": case "extension": for (const f of x.fields ?? []) valueRefs(f.value, out); break;
    default: break;
  }
}

const refs = m.jaxprs.map((j) => (j.eqns ?? []).map((e) => {
  const s = new Set();
  for (const k of e.params ?? []) { const p = param(k); if (p) valueRefs(p.value, s); }
  return [...s];
}));

function expanded(start) {
  const memo = new Map();
  const visiting = new Set();
  const stack = [[start, false]];
  while (stack.length) {
    const [j, ready] = stack.pop();
    if (memo.has(j) || j < 0 || j >= m.jaxprs.length) continue;
    const subs = refs[j].flat();
    if (ready) {
      memo.set(j, (m.jaxprs[j].eqns ?? []).length + subs.reduce((t, s) => t + (memo.get(s) ?? 0), 0));
      visiting.delete(j);
    } else if (!visiting.has(j)) {
      visiting.add(j);
      stack.push([j, true]);
      for (const s of subs) if (!memo.has(s) && !visiting.has(s)) stack.push([s, false]);
    }
  }
  return memo.get(start) ?? 0;
}

const rootCj = m.closed_jaxprs[n(m.root)];
const rootJaxpr = rootCj ? n(rootCj.jaxpr) : null;
const byPrimitive = {};
let stored = 0;
for (const j of m.jaxprs) {
  for (const e of j.eqns ?? []) {
    stored++;
    const name = primName(n(e.primitive));
    byPrimitive[name] = (byPrimitive[name] ?? 0) + 1;
  }
}
const sortedByPrimitive = Object.fromEntries(
  Object.entries(byPrimitive).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
const counts = {
  format_version: `${n(m.format_version.major)}.${n(m.format_version.minor)}`,
  producer: {
    jaxpr_proto: m.producer?.jaxpr_proto_version ?? "",
    jax: m.producer?.jax_version ?? "",
    jaxlib: m.producer?.jaxlib_version ?? "",
  },
  eqns: {
    root: rootJaxpr !== null && m.jaxprs[rootJaxpr] ? (m.jaxprs[rootJaxpr].eqns ?? []).length : 0,
    stored,
    expanded: rootJaxpr !== null ? expanded(rootJaxpr) : 0,
  },
  by_primitive: sortedByPrimitive,
};

if (asJson) {
  process.stdout.write(JSON.stringify(counts, null, 2) + "\n");
} else {
  const p = counts.producer;
  process.stdout.write(`# jaxpr-proto ${counts.format_version} file, written by jaxpr_proto ` +
    `${p.jaxpr_proto} (jax ${p.jax})\n# root: jaxprs[${rootJaxpr}]\n`);
  m.jaxprs.forEach((_, i) => process.stdout.write(printJaxpr(i) + "\n"));
  const e = counts.eqns;
  process.stdout.write(`eqns: ${e.root} in the root jaxpr, ${e.expanded} counting each ` +
    `sub-jaxpr use, ${e.stored} stored\n`);
  process.stdout.write("by primitive: " +
    Object.entries(sortedByPrimitive).map(([k, v]) => `${k} ${v}`).join(", ") + "\n");
}
