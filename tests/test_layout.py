"""The package's layers, and the one line that names the supported JAX releases.

jaxpr_proto/ is read top down: api (with function, pickling, stages, cli) ->
check -> codec -> compat -> wire, with errors, _version and _config (the
settings, jp.config) below them all.
A module imports only from its own layer or the layers below, and no modules
import each other in a circle, function-level imports included.
"""
from __future__ import annotations

import ast
import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "jaxpr_proto"

# Layer of each folder (or top-level module), lowest first.
LAYERS = ["base", "wire", "compat", "codec", "check", "api"]
_BASE = {"jaxpr_proto.errors", "jaxpr_proto._version", "jaxpr_proto._config"}
_FOLDERS = {"wire": "wire", "v1": "wire", "compat": "compat", "codec": "codec",
            "check": "check", "cli": "api"}

pytestmark = pytest.mark.main_jax_only


def _modules() -> dict[str, pathlib.Path]:
  out = {}
  for path in sorted(PKG.rglob("*.py")):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
      parts.pop()
    out[".".join(parts)] = path
  return out


MODULES = _modules()


def layer(module: str) -> str:
  if module in _BASE:
    return "base"
  parts = module.split(".")
  return _FOLDERS.get(parts[1], "api") if len(parts) > 1 else "api"


def imports(module: str) -> set[str]:
  """The jaxpr_proto modules `module` imports anywhere in its code."""
  tree = ast.parse(MODULES[module].read_text())
  out = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      # `from a.b import c`: the module a.b.c where there is one, else a.b
      names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
               for a in node.names]
    else:
      continue
    out.update(n for n in names if n.split(".")[0] == "jaxpr_proto" and n != module)
  return out


GRAPH = {m: imports(m) for m in MODULES}


def test_every_import_names_a_module():
  missing = sorted((m, i) for m, deps in GRAPH.items() for i in deps if i not in MODULES)
  assert not missing


def test_imports_go_down_the_layers():
  rank = {name: k for k, name in enumerate(LAYERS)}
  bad = sorted(f"{m} ({layer(m)}) imports {i} ({layer(i)})"
               for m, deps in GRAPH.items() for i in deps
               if i in MODULES and rank[layer(i)] > rank[layer(m)])
  assert not bad, "\n".join(bad)


def test_no_import_cycles():
  index, low, stack, on_stack, cycles = {}, {}, [], set(), []

  def visit(v):  # Tarjan's strongly connected components
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(GRAPH[v]):
      if w not in MODULES:
        continue
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        cycles.append(sorted(comp))

  for m in sorted(MODULES):
    if m not in index:
      visit(m)
  assert not cycles, cycles


def test_every_folder_says_what_it_holds():
  for init in PKG.rglob("__init__.py"):
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and len(doc) > 20, init


def test_jax_internals_stay_in_compat():
  bad = [str(p.relative_to(ROOT)) for m, p in MODULES.items()
         if layer(m) != "compat" and re.search(r"^\s*(from|import) jax\._src", p.read_text(), re.M)]
  assert not bad


# --- the supported JAX releases: one line, compat/releases.py ------------------

def _releases():
  tree = ast.parse((PKG / "compat" / "releases.py").read_text())
  values = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
            for t in n.targets if isinstance(t, ast.Name) and t.id in ("RELEASES", "OLDEST_INSTALLABLE")}
  return values["RELEASES"], values["OLDEST_INSTALLABLE"]


def test_each_release_has_its_folder():
  releases, _ = _releases()
  folders = sorted(p.name for p in (PKG / "compat").glob("v*_*") if p.is_dir())
  assert folders == sorted("v" + m.replace(".", "_") for m in releases)
  for minor, release in releases.items():
    assert release.startswith(minor + "."), (minor, release)
    for f in ("__init__.py", "adapter.py", "params.py", "changes.py"):
      assert (PKG / "compat" / ("v" + minor.replace(".", "_")) / f).is_file(), (minor, f)


def test_pyproject_allows_exactly_the_installable_releases():
  releases, oldest = _releases()
  newest = max(releases, key=lambda m: tuple(map(int, m.split("."))))
  major, minor = map(int, newest.split("."))
  want = f">={oldest}.0,<{major}.{minor + 1}"
  deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
  for name in ("jax", "jaxlib"):
    spec = next(d for d in deps if re.match(rf"{name}\s*[<>=]", d))
    assert spec.replace(" ", "") == name + want, spec
