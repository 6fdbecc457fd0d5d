// The side panel's contents and the hover tooltip's text, as HTML.
import { frameStr, framesOf } from "./format.js";
import { eqnPath } from "./program.js";
import { esc } from "./render.js";

const n = (x) => x ?? 0;
const link = (j, k, text) => `<a href="#" data-goto="${eqnPath(j, k)}">${esc(text ?? eqnPath(j, k))}</a>`;

export function summaryHtml(p, name) {
  const m = p.m;
  const pr = m.producer ?? {};
  const stored = m.jaxprs.reduce((t, j) => t + (j.eqns ?? []).length, 0);
  const root = p.root >= 0 ? (m.jaxprs[p.root].eqns ?? []).length : 0;
  const byPrim = new Map();
  for (const j of m.jaxprs) for (const e of j.eqns ?? []) { const s = p.prim(e); byPrim.set(s, (byPrim.get(s) ?? 0) + 1); }
  const top = [...byPrim].sort((a, b) => b[1] - a[1]).slice(0, 12);
  return `<h2>${esc(name || "program")}</h2>
<table>
<tr><th>format</th><td>${n(m.format_version.major)}.${n(m.format_version.minor)}</td></tr>
<tr><th>producer</th><td>jaxpr_proto ${esc(pr.jaxpr_proto_version ?? "?")}, jax ${esc(pr.jax_version ?? "?")}</td></tr>
<tr><th>root</th><td>jaxprs[${p.root}], ${root} eqns</td></tr>
<tr><th>stored</th><td>${m.jaxprs.length} jaxprs, ${stored} eqns</td></tr>
</table>
<h3>Primitives</h3><p class="prims">${top.map(([k, v]) => `<a href="#" data-search="${esc(k)}">${esc(k)}</a>&nbsp;${v}`).join(", ")}</p>
${textHtml(p)}
<p class="hint">Click an eqn for its details; ▸ expands a group (or double-click). Drag to pan,
wheel to zoom. Drop a .jaxpb file here to view it.</p>`;
}

// The whole program's jaxpr text, folded (the page fills it in when opened).
function textHtml(p) {
  if (p.text) {
    let lines = 0;
    for (let i = p.text.text.indexOf("\n"); i >= 0; i = p.text.text.indexOf("\n", i + 1)) lines++;
    return `<h3>Text</h3><details class="text"><summary>the program as jaxpr text (${lines} lines)</summary>
<pre class="text"></pre></details>
<p class="hint">The panel shows eqns and jaxprs as this text (jp.format, source locations left
out): they paste back into a .jaxpr file.</p>`;
  }
  return p.textError ? `<h3>Text</h3><p class="none">no jaxpr text: ${esc(p.textError)}</p>` : "";
}

export function eqnHtml(p, j, k) {
  const e = p.eqn(j, k);
  const frames = framesOf(p.m, e.traceback);
  const ns = p.nameStack(e);
  const subs = p.subs(e);
  const parts = [`<h2>${esc(p.prim(e))}</h2><p class="path">${eqnPath(j, k)}</p>`,
    `<pre class="eqn">${esc(p.eqnText(j, k) ?? p.eqnStr(j, k))}</pre>`];
  parts.push(`<h3>Source</h3>${frames.length
    ? `<ol class="frames">${frames.map((fr) => `<li>${esc(frameStr(fr))}</li>`).join("")}</ol>`
    : "<p class=none>none</p>"}`);
  parts.push(`<h3>Name stack</h3><p>${ns ? esc(ns) : "<span class=none>empty</span>"}</p>`);
  if ((e.effects ?? []).length) parts.push(`<h3>Effects</h3><p>${e.effects.map((x) => esc(x.name)).join(", ")}</p>`);
  for (const s of subs) {
    const uses = p.uses.get(s.jaxpr) ?? [];
    parts.push(`<h3>${esc(s.label)}: jaxprs[${s.jaxpr}]</h3>`,
      uses.length > 1 ? `<p>shared: ${uses.length} uses: ${uses.map((u) => link(u.j, u.k, `${eqnPath(u.j, u.k)} (${u.label})`)).join(", ")}</p>` : "",
      jaxprDetails(p, s.jaxpr));
  }
  return parts.join("");
}

function jaxprDetails(p, j) {
  const text = p.jaxprText(j);
  const count = (p.m.jaxprs[j].eqns ?? []).length;
  return `<details><summary>${text === null ? "printout" : "text"} (${count} eqns)</summary>` +
    `<pre class="jaxpr">${esc(text ?? p.jaxprStr(j))}</pre></details>`;
}

export function varHtml(p, j, id) {
  const v = p.vars(j);
  const name = p.names(j).get(id);
  const d = v.def.get(id);
  const where = d === undefined ? "not defined here" : d === -1 ? "an input" : d === -2 ? "a constant"
    : `defined by ${link(j, d)}`;
  return `<h2>${esc(name ?? "?")}:${esc(v.aval.has(id) ? p.aval(v.aval.get(id)) : "?")}</h2>
<p class="path">in jaxprs[${j}]</p><p>${where}</p>`;
}

export function searchHtml(p, q, hits, limit) {
  const rows = hits.slice(0, limit).map(({ j, k }) => `<li>${link(j, k)} <code>${esc(p.eqnStr(j, k, { params: false }))}</code></li>`);
  const more = hits.length > limit ? `<p>… and ${hits.length - limit} more</p>` : "";
  return `<h2>Search</h2><p>${hits.length} eqn${hits.length === 1 ? "" : "s"} match <code>${esc(q)}</code></p><ol class="hits">${rows.join("")}</ol>${more}`;
}

// Innermost source line and the name stack.
export function tooltipHtml(p, j, k) {
  const e = p.eqn(j, k);
  const fr = framesOf(p.m, e.traceback)[0];
  const ns = p.nameStack(e);
  return `<b>${esc(p.prim(e))}</b> ${eqnPath(j, k)}<br>${fr ? esc(frameStr(fr)) : "<i>no source info</i>"}` +
    (ns ? `<br>${esc(ns)}` : "");
}
