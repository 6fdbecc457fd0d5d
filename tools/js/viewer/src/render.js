// Laid-out boxes -> one SVG string (fast to insert), and where each eqn is.
import { HEAD, PAD, SUBHEAD } from "./layout.js";

export const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const f = (x) => Math.round(x * 10) / 10;

// -> {svg, where: Map(eqn path -> {x, y, w, h}) in the root box's coordinates}
export function renderBox(box) {
  const out = [];
  const where = new Map();
  drawGraph(box, 0, 0, out, where);
  return { svg: out.join(""), where };
}

function drawGraph(box, ox, oy, out, where) {
  out.push(`<g transform="translate(${f(ox)},${f(oy)})">`);
  for (const e of box.edges) {
    const d = e.points.map((p, i) => `${i ? "L" : "M"}${f(p.x)} ${f(p.y)}`).join("");
    out.push(`<path class="e" d="${d}"/><text class="el" x="${f(e.lx)}" y="${f(e.ly + 4)}">${esc(e.label)}</text>`);
  }
  for (const nd of box.nodes) drawNode(nd, ox, oy, out, where);
  out.push("</g>");
}

function drawNode(nd, ox, oy, out, where) {
  const t = `transform="translate(${f(nd.x)},${f(nd.y)})"`;
  const rect = (cls = "") => `<rect class="${cls}" width="${f(nd.w)}" height="${f(nd.h)}" rx="4"/>`;
  switch (nd.kind) {
    case "eqn":
      where.set(nd.path, { x: ox + nd.x, y: oy + nd.y, w: nd.w, h: nd.h });
      out.push(`<g class="n eqn${nd.subs ? " subs" : ""}" data-eqn="${nd.path}" ${t}>${rect()}`,
        nd.subs ? `<text class="t1 toggle" data-toggle="${nd.path}" x="8" y="16">${esc(nd.l1)}</text>`
          : `<text class="t1" x="8" y="16">${esc(nd.l1)}</text>`,
        nd.l2 ? `<text class="t2" x="8" y="31">${esc(nd.l2)}</text>` : "", "</g>");
      break;
    case "in": case "const": case "out":
      out.push(`<g class="n io ${nd.kind}" data-var="${nd.j}:${nd.id ?? ""}" ${t}>`,
        `<rect width="${f(nd.w)}" height="${f(nd.h)}" rx="11"/><text x="10" y="15">${esc(nd.label)}</text></g>`);
      break;
    case "block":
      where.set(nd.block.key, { x: ox + nd.x, y: oy + nd.y, w: nd.w, h: nd.h });
      out.push(`<g class="n block toggle" data-toggle="${esc(nd.block.key)}" ${t}>${rect()}`,
        `<text class="t1" x="8" y="16">▸ ${esc(nd.label)}</text><text class="t2" x="8" y="31">${esc(nd.sub)}</text></g>`);
      break;
    case "xblock":
      where.set(nd.block.key, { x: ox + nd.x, y: oy + nd.y, w: Math.min(nd.w, 360), h: HEAD });
      out.push(`<g class="grp xblock" ${t}>${rect("frame")}`,
        `<text class="gtitle toggle" data-toggle="${esc(nd.block.key)}" x="${PAD}" y="16">${esc(nd.title)}</text></g>`);
      drawGraph(nd.inner, ox + nd.x + PAD, oy + nd.y + HEAD, out, where);
      break;
    case "egroup":
      where.set(nd.path, { x: ox + nd.x, y: oy + nd.y, w: Math.min(nd.w, 360), h: HEAD });  // its title
      out.push(`<g class="grp egroup" data-eqn="${nd.path}" ${t}>${rect("frame")}`,
        `<text class="gtitle toggle" data-toggle="${nd.path}" x="${PAD}" y="16">${esc(nd.title)}</text>`);
      for (const p of nd.panels) {
        out.push(`<g transform="translate(${f(p.x)},${f(p.y)})">`,
          `<rect class="sub" width="${f(p.w)}" height="${f(p.h)}" rx="3"/>`,
          `<text class="stitle" x="6" y="14">${esc(p.title)}</text>`);
        if (p.stub) {
          out.push(`<g class="stub" data-show="${p.S}" data-at="${nd.path}"><text x="6" y="${SUBHEAD + 16}">${esc(p.stub)}</text></g>`);
        }
        out.push("</g>");
      }
      out.push("</g>");
      for (const p of nd.panels) {
        if (p.box) drawGraph(p.box, ox + nd.x + p.x, oy + nd.y + p.y + SUBHEAD, out, where);
      }
      break;
    default: break;
  }
}
