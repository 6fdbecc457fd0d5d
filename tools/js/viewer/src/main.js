// The page: reads the .jaxpb embedded in it (or one dropped on it), draws the
// graph, and wires up expanding, selecting, searching, panning and zooming.
// `jaxpr-proto view` also embeds the program's jaxpr text (jp.format, with
// where each jaxpr and eqn is in it), which the panel shows.
import { base64ToBytes, decodeModule } from "./decode.js";
import { View } from "./layout.js";
import { eqnHtml, searchHtml, summaryHtml, tooltipHtml, varHtml } from "./panel.js";
import { Program } from "./program.js";
import { renderBox } from "./render.js";
import { search } from "./search.js";

const $ = (id) => document.getElementById(id);
const parsePath = (s) => { const r = /^jaxprs\[(\d+)\]\.eqns\[(\d+)\]$/.exec(s ?? ""); return r ? [+r[1], +r[2]] : null; };

let cur = null;  // {p, view, name, where, selected, hits}
const zoom = { x: 20, y: 20, s: 1 };
// For scripts and tests: load bytes, or show and select an eqn by its path.
const api = { timing: null, load: (bytes, name, text) => load(bytes, name, text), goto: (path) => goto(path) };
window.jaxprViewer = api;

// --- loading -------------------------------------------------------------------

function load(bytes, name, text = null) {
  const t0 = performance.now();
  let p;
  try {
    p = new Program(decodeModule(bytes), text);
    if (p.root < 0) throw new Error("the root jaxpr is missing");
  } catch (e) {
    return fail(`${name}: ${e.message}`);
  }
  cur = { p, view: new View(p), name, where: new Map(), selected: null, hits: new Set() };
  const t1 = performance.now();
  $("search").value = "";
  $("file").textContent = name;
  document.title = `${name} · jaxpr-proto view`;
  $("error").hidden = true;
  draw();
  fit();
  showPanel(summaryHtml(p, name));
  const t2 = performance.now();
  api.timing = { decode_ms: t1 - t0, draw_ms: t2 - t1, ready_ms: t2 };
  document.body.dataset.state = "ready";
}

function fail(msg) {
  $("error").textContent = msg;
  $("error").hidden = false;
  if (!cur) document.body.dataset.state = "error";
}

// --- drawing -------------------------------------------------------------------

function draw(anchor) {
  const before = anchor && cur.where.get(anchor);
  const t = performance.now();
  const { svg, where } = renderBox(cur.view.root());
  $("vp").innerHTML = svg;
  cur.where = where;
  const after = anchor && where.get(anchor);
  if (before && after) {  // keep what was clicked where it was on screen
    zoom.x += (before.x - after.x) * zoom.s;
    zoom.y += (before.y - after.y) * zoom.s;
  }
  applyZoom();
  mark();
  const shown = $("vp").querySelectorAll("[data-eqn]").length;
  $("status").textContent = `${shown} eqn${shown === 1 ? "" : "s"} shown · ${Math.round(performance.now() - t)} ms`;
}

// Classes for the selected eqn and the search hits that are shown.
function mark() {
  for (const el of $("vp").querySelectorAll("[data-eqn]")) {
    const path = el.getAttribute("data-eqn");
    el.classList.toggle("sel", path === cur.selected);
    el.classList.toggle("hit", cur.hits.has(path));
  }
}

function applyZoom() {
  $("vp").setAttribute("transform", `translate(${zoom.x},${zoom.y}) scale(${zoom.s})`);
}

function fit() {
  const box = cur.view.root();
  const r = $("svg").getBoundingClientRect();
  zoom.s = Math.min(1, Math.max(0.05, Math.min((r.width - 40) / box.w, (r.height - 40) / box.h)));
  zoom.x = Math.max(20, (r.width - box.w * zoom.s) / 2);
  zoom.y = 20;
  applyZoom();
}

function center(path) {
  const w = cur.where.get(path);
  if (!w) return;
  const r = $("svg").getBoundingClientRect();
  zoom.s = Math.max(zoom.s, 0.7);
  zoom.x = r.width / 2 - (w.x + w.w / 2) * zoom.s;
  zoom.y = r.height / 2 - (w.y + w.h / 2) * zoom.s;
  applyZoom();
}

function showPanel(html) {
  $("panel").innerHTML = html;
  $("panel").scrollTop = 0;
}

// --- actions -------------------------------------------------------------------

function select(path) {
  const jk = parsePath(path);
  if (!jk) return;
  cur.selected = path;
  showPanel(eqnHtml(cur.p, ...jk));
  mark();
}

function goto(path) {
  const jk = parsePath(path);
  if (!jk || !cur.p.m.jaxprs[jk[0]]?.eqns?.[jk[1]]) return;
  if (!cur.where.has(path)) {
    if (!cur.view.reveal(...jk)) { select(path); return; }  // a jaxpr no eqn uses
    draw();
  }
  select(path);
  center(path);
}

function toggle(key) {
  cur.view.toggle(key);
  draw(key);
}

function runSearch() {
  const q = $("search").value;
  const hits = search(cur.p, q);
  cur.hits = new Set(hits.map(({ j, k }) => `jaxprs[${j}].eqns[${k}]`));
  if (q.trim()) showPanel(searchHtml(cur.p, q, hits, 200));
  mark();
  return hits;
}

// --- events --------------------------------------------------------------------

let drag = null;  // {x, y, moved}
const svg = $("svg");

svg.addEventListener("mousedown", (ev) => {
  if (ev.button === 0) drag = { x: ev.clientX, y: ev.clientY, moved: false };
});
window.addEventListener("mousemove", (ev) => {
  if (!drag) return;
  const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
  if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
  drag.moved = true;
  zoom.x += dx;
  zoom.y += dy;
  drag.x = ev.clientX;
  drag.y = ev.clientY;
  applyZoom();
});
window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });

svg.addEventListener("click", (ev) => {
  if (!cur || drag?.moved) return;
  const t = ev.target;
  const tog = t.closest("[data-toggle]");
  const stub = t.closest("[data-show]");
  const node = t.closest("[data-eqn]");
  const v = t.closest("[data-var]");
  if (tog) {
    const key = tog.getAttribute("data-toggle");
    toggle(key);
    if (parsePath(key)) select(key);
  } else if (stub) {
    const at = stub.getAttribute("data-at");
    cur.view.showHere(+stub.getAttribute("data-show"), at);
    draw(at);
  } else if (node) {
    select(node.getAttribute("data-eqn"));
  } else if (v) {
    const [j, id] = v.getAttribute("data-var").split(":");
    if (id !== "") showPanel(varHtml(cur.p, +j, +id));
  }
});

svg.addEventListener("dblclick", (ev) => {
  const node = cur && ev.target.closest(".eqn.subs");
  if (node) toggle(node.getAttribute("data-eqn"));
});

svg.addEventListener("wheel", (ev) => {
  ev.preventDefault();
  const r = svg.getBoundingClientRect();
  const px = ev.clientX - r.left, py = ev.clientY - r.top;
  const s = Math.min(4, Math.max(0.02, zoom.s * Math.exp(-ev.deltaY * 0.0015)));
  zoom.x = px - (px - zoom.x) * (s / zoom.s);
  zoom.y = py - (py - zoom.y) * (s / zoom.s);
  zoom.s = s;
  applyZoom();
}, { passive: false });

const tip = $("tooltip");
svg.addEventListener("mouseover", (ev) => {
  const node = cur && ev.target.closest("[data-eqn]");
  const jk = node && parsePath(node.getAttribute("data-eqn"));
  if (!jk) { tip.hidden = true; return; }
  tip.innerHTML = tooltipHtml(cur.p, ...jk);
  tip.hidden = false;
});
svg.addEventListener("mousemove", (ev) => {
  tip.style.left = `${ev.clientX + 14}px`;
  tip.style.top = `${ev.clientY + 14}px`;
});
svg.addEventListener("mouseleave", () => { tip.hidden = true; });

// The whole text goes into the page once its <details> is opened.
$("panel").addEventListener("toggle", (ev) => {
  const pre = ev.target.matches?.("details.text[open]") && ev.target.querySelector("pre.text");
  if (pre && !pre.textContent && cur?.p.text) pre.textContent = cur.p.text.text;
}, true);

$("panel").addEventListener("click", (ev) => {
  const a = ev.target.closest("a[data-goto], a[data-search]");
  if (!a) return;
  ev.preventDefault();
  if (a.dataset.goto) goto(a.dataset.goto);
  else { $("search").value = a.dataset.search; runSearch(); }
});

let searchTimer = 0;
$("search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => cur && runSearch(), 150);
});
$("search").addEventListener("keydown", (ev) => {
  if (ev.key !== "Enter" || !cur) return;
  clearTimeout(searchTimer);
  const hits = runSearch();
  if (hits.length) goto(`jaxprs[${hits[0].j}].eqns[${hits[0].k}]`);
});
window.addEventListener("keydown", (ev) => {
  if (ev.key === "/" && document.activeElement !== $("search")) { ev.preventDefault(); $("search").focus(); }
});

$("expand-all").addEventListener("click", () => {
  if (!cur) return;
  const total = cur.p.m.jaxprs.reduce((t, j) => t + (j.eqns ?? []).length, 0);
  if (total > 5000 && !window.confirm(`Lay out all ${total} eqns at once? That takes a while.`)) return;
  cur.view.expandAll();
  draw();
  fit();
});
$("collapse-all").addEventListener("click", () => { if (cur) { cur.view.reset(); draw(); fit(); } });
$("fit").addEventListener("click", () => { if (cur) fit(); });

// Dropping a file views it instead.
window.addEventListener("dragover", (ev) => { ev.preventDefault(); $("drop").hidden = false; });
window.addEventListener("dragleave", (ev) => { if (!ev.relatedTarget) $("drop").hidden = true; });
window.addEventListener("drop", async (ev) => {
  ev.preventDefault();
  $("drop").hidden = true;
  const file = ev.dataTransfer?.files?.[0];
  if (!file) return;
  // The page reads binary Modules; the text forms are read by the command.
  if (/\.(jaxpr|txtpb|json)$/i.test(file.name)) {
    fail(`${file.name}: the page reads .jaxpb files; view this one with \`jaxpr-proto view ${file.name}\``);
    return;
  }
  load(new Uint8Array(await file.arrayBuffer()), file.name);
});

// --- start ---------------------------------------------------------------------

// The embedded text: JSON, or the template's placeholder where there is none.
function embeddedText() {
  const t = $("jaxpr-text").textContent.trim();
  if (!t.startsWith("{")) return null;
  try { return JSON.parse(t); } catch { return null; }
}

const data = $("jaxpb-data");
const b64 = data.textContent.trim();
if (/^[A-Za-z0-9+/=\s]+$/.test(b64)) {
  load(base64ToBytes(b64), data.dataset.name || "program.jaxpb", embeddedText());
} else {
  showPanel("<h2>jaxpr-proto view</h2><p>Drop a .jaxpb file here to view it.</p>");
  document.body.dataset.state = "empty";
}
