// Search every stored eqn (shown or not) by primitive, variable or path.

const n = (x) => x ?? 0;

// -> [{j, k}]: eqns whose primitive contains `query` (case-insensitive), that
// define or use a variable named `query`, or whose path it is.
export function search(p, query) {
  const q = query.trim();
  if (!q) return [];
  const path = /^jaxprs\[(\d+)\]\.eqns\[(\d+)\]$/.exec(q);
  if (path) {
    const j = +path[1], k = +path[2];
    return p.m.jaxprs[j]?.eqns?.[k] ? [{ j, k }] : [];
  }
  const ql = q.toLowerCase();
  const isVar = /^[a-z]+$/.test(q);
  const hits = [];
  p.m.jaxprs.forEach((jx, j) => {
    const id = isVar ? idOf(p.names(j), q) : undefined;
    (jx.eqns ?? []).forEach((e, k) => {
      if (p.prim(e).toLowerCase().includes(ql)
          || (id !== undefined && ((e.invars ?? []).some((a) => a.kind === "var" && n(a.var) === id)
            || (e.outvars ?? []).some((b) => b.kind === "var" && n(b.var.id) === id)))) {
        hits.push({ j, k });
      }
    });
  });
  return hits;
}

function idOf(names, name) {
  for (const [id, s] of names) if (s === name) return id;
  return undefined;
}
