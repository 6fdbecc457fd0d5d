// Text of names, types and param values, as JAX prints them: the viewer's,
// and tools/js/read_jaxpb.mjs's (which imports this module).

const n = (x) => x ?? 0;  // proto3 scalars at their default are absent

const DTYPES = {
  DTYPE_BOOL: "bool", DTYPE_INT8: "i8", DTYPE_INT16: "i16", DTYPE_INT32: "i32",
  DTYPE_INT64: "i64", DTYPE_UINT8: "u8", DTYPE_UINT16: "u16", DTYPE_UINT32: "u32",
  DTYPE_UINT64: "u64", DTYPE_FLOAT16: "f16", DTYPE_FLOAT32: "f32", DTYPE_FLOAT64: "f64",
  DTYPE_BFLOAT16: "bf16", DTYPE_COMPLEX64: "c64", DTYPE_COMPLEX128: "c128",
  DTYPE_INT2: "i2", DTYPE_INT4: "i4", DTYPE_UINT2: "u2", DTYPE_UINT4: "u4",
  DTYPE_FLOAT0: "float0",
};
const dtypeShort = (d) => DTYPES[d] ?? (d ? d.replace(/^DTYPE_/, "").toLowerCase() : "?");
const dtypeLong = (d) => (d ? d.replace(/^DTYPE_/, "").toLowerCase() : "?");

export function primName(m, i) {
  const p = m.primitives[n(i)];
  if (!p) return `<primitive ${i}?>`;
  return (p.namespace ?? "") === "jax" ? (p.name ?? "") : `${p.namespace ?? ""}::${p.name ?? ""}`;
}

export function avalStr(m, i, depth = 0) {
  const a = m.avals[n(i)];
  if (!a) return `<aval ${i}?>`;
  if (a.kind === "token") return "Token";
  if (a.kind === "ref") return depth > 8 ? "Ref{...}" : `Ref{${avalStr(m, a.ref.inner, depth + 1)}}`;
  const s = a.shaped_array ?? {};
  const dims = (s.shape ?? []).map((d) => (d.kind === "symbolic" ? d.symbolic : n(d.constant))).join(",");
  const dt = s.dtype === "DTYPE_KEY" ? `key<${s.key_impl ?? ""}>` : dtypeShort(s.dtype);
  return `${dt}[${dims}]`;
}

// JAX's variable names: a..z, then ba, bb, ...
export function varName(k) {
  let s = "";
  do {
    s = String.fromCharCode(97 + (k % 26)) + s;
    k = Math.floor(k / 26);
  } while (k > 0);
  return s;
}

// The shortest decimal that reads back as the same float32, as numpy prints it.
function fmtFloat32(x) {
  if (!Number.isFinite(x)) return fmtFloat(x);
  for (let p = 1; p <= 9; p++) {
    const y = Number(x.toPrecision(p));
    if (Math.fround(y) === x) return fmtFloat(y);
  }
  return fmtFloat(x);
}

function fmtFloat(x) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  return String(x);
}

// A scalar from an Array message's little-endian bytes, when it is one we know.
function scalarOf(arr) {
  const b = arr.data ?? new Uint8Array(0);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const kind = arr.kind ?? "ARRAY_KIND_NUMPY_UNSPECIFIED";
  if (kind === "ARRAY_KIND_TYPED_INT" && b.length === 8) return v.getBigInt64(0, true).toString();
  if (kind === "ARRAY_KIND_TYPED_FLOAT" && b.length === 8) return fmtFloat(v.getFloat64(0, true));
  if ((arr.shape ?? []).length !== 0) return null;
  switch (arr.dtype) {
    case "DTYPE_FLOAT32": return b.length === 4 ? fmtFloat32(v.getFloat32(0, true)) : null;
    case "DTYPE_FLOAT64": return b.length === 8 ? fmtFloat(v.getFloat64(0, true)) : null;
    case "DTYPE_INT32": return b.length === 4 ? String(v.getInt32(0, true)) : null;
    case "DTYPE_INT64": return b.length === 8 ? v.getBigInt64(0, true).toString() : null;
    case "DTYPE_UINT32": return b.length === 4 ? String(v.getUint32(0, true)) : null;
    case "DTYPE_UINT8": return b.length === 1 ? String(b[0]) : null;
    case "DTYPE_BOOL": return b.length === 1 ? (b[0] ? "True" : "False") : null;
    default: return null;
  }
}

export function valueStr(m, v, depth = 0) {
  if (!v || !v.kind) return "None";
  if (depth > 16) return "...";
  const x = v[v.kind];
  const sub = (y) => valueStr(m, y, depth + 1);
  const fields = (fs) => (fs ?? []).map((f) => `${f.name}=${sub(f.value)}`).join(", ");
  switch (v.kind) {
    case "none": return "None";
    case "bool": return x ? "True" : "False";
    case "int": case "big_int": case "symbolic_dim": return String(x);
    case "float": return fmtFloat(x);
    case "complex": return `(${fmtFloat(n(x.real))}+${fmtFloat(n(x.imag))}j)`;
    case "str": return x;
    case "bytes": return `b<${x.length} bytes>`;
    case "dtype": return dtypeLong(x.dtype);
    case "array": {
      const s = scalarOf(x);
      return s ?? `${dtypeShort(x.dtype)}[${(x.shape ?? []).join(",")}]{...}`;
    }
    case "tuple": {
      const items = (x.items ?? []).map(sub);
      return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
    }
    case "list": return `[${(x.items ?? []).map(sub).join(", ")}]`;
    case "frozenset": return `frozenset({${(x.items ?? []).map(sub).join(", ")}})`;
    case "dict": return `{${(x.entries ?? []).map((e) => `${sub(e.key)}: ${sub(e.value)}`).join(", ")}}`;
    case "jaxpr": return `jaxprs[${n(x)}]`;
    case "closed_jaxpr": {
      const cj = m.closed_jaxprs[n(x)];
      return cj ? `jaxprs[${n(cj.jaxpr)}]` : `closed_jaxprs[${n(x)}]?`;
    }
    case "enum": return `${(x.type ?? "").replace(/^.*::/, "")}.${x.member ?? ""}`;
    case "record": return `${(x.type ?? "").replace(/^.*::/, "")}(${fields(x.fields)})`;
    case "extension": return `${x.codec ?? ""}(${fields(x.fields)})`;
    case "primitive": return primName(m, x.index);
    case "rule": return `rules[${n(x)}]`;
    case "aval": return avalStr(m, x);
    case "singleton": case "function": return x;
    case "traceback": return `tracebacks[${n(x)}]`;
    case "treedef": return "PyTreeDef(...)";
    case "mesh": return `Mesh(${(x.axes ?? []).map((a) => `${a.name}=${n(a.size)}`).join(", ")})`;
    case "partition_spec": return "P(...)";
    case "named_sharding": return "NamedSharding(...)";
    default: return `<${v.kind}>`;
  }
}

// JAX's str(NameStack): a transform wraps the scope just inside it, "jvp(f)/g".
export function nameStackStr(m, i) {
  const scopes = m.name_stacks[n(i)]?.scopes ?? [];
  const out = [];  // innermost first, as JAX builds it
  for (let k = scopes.length - 1; k >= 0; k--) {
    const s = scopes[k];
    const name = s.name ?? "";
    if (!s.transform) out.push(name);
    else if (out.length) out[out.length - 1] = `${name}(${out[out.length - 1]})`;
    else out.push(`${name}()`);
  }
  return out.reverse().join("/");
}

// The frames of an eqn's traceback, innermost first: {file, line, fn}.
export function framesOf(m, tb) {
  const t = m.tracebacks[n(tb)];
  return (t?.frames ?? []).map((f) => {
    const fr = m.frames[n(f)] ?? {};
    return { file: m.strings[n(fr.file)] ?? "?", line: fr.line ?? 0, fn: m.strings[n(fr.function)] ?? "?" };
  });
}

export const frameStr = (f) => `${f.file}:${f.line} (${f.fn})`;

// A jaxpr written in columns (Jaxpr.columns, for jaxprs of many eqns) gets
// its eqns as the objects of Jaxpr.eqns would be, in place; the columns go.
export function eqnsFromColumns(m) {
  for (const j of m.jaxprs ?? []) {
    const c = j.columns;
    if (!c) continue;
    const eqns = [];
    const effects = new Map((c.effects ?? []).map((e) => [e.eqn ?? 0, e.effects ?? []]));
    let o = 0, r = 0, q = 0, lit = 0;
    (c.primitive ?? []).forEach((primitive, k) => {
      const invars = (c.operands ?? []).slice(o, o += c.operand_count[k] ?? 0).map((x) =>
        x ? { kind: "var", var: x - 1 } : { kind: "literal", literal: c.literals[lit++] });
      const n = c.result_count[k] ?? 0;
      const outvars = (c.results ?? []).slice(r, r + n).map((x, i) => x
        ? { kind: "var", var: { id: x - 1, aval: c.result_avals[r + i] } }
        : { kind: "drop", drop: { aval: c.result_avals[r + i] } });
      r += n;
      eqns.push({
        primitive, invars, outvars, params: (c.params ?? []).slice(q, q += c.param_count[k] ?? 0),
        effects: effects.get(k) ?? [], traceback: c.traceback[k], name_stack: c.name_stack[k],
        context: c.context[k],
      });
    });
    j.eqns = eqns;
    delete j.columns;
  }
  return m;
}
