"""`jaxpr-proto view`: the command, the committed page template, and the page
itself in a real browser (headless Chromium, driven by playwright).

The browser tests need `pip install playwright` and a system Chromium (Debian:
`apt-get install chromium`; never playwright's own browser download) and skip,
saying which is missing, without them. The freshness test of the template
rebuilds it with node (tools/js/viewer/build.mjs) and skips without node and
npm, as the JavaScript reader's tests do.
"""
from __future__ import annotations

import base64
import importlib.util
import pathlib
import re
import subprocess

import pytest

import jaxpr_proto as jp
from jaxpr_proto.cli import commands as cli
from jaxpr_proto.cli import view
from jaxpr_proto.wire import columns
from tests import helpers
from tests.test_textforms import PROGRAMS, traced

pytestmark = pytest.mark.main_jax_only

ROOT = pathlib.Path(__file__).resolve().parent.parent
JS_DIR = ROOT / "tools" / "js"
ASSET = ROOT / "jaxpr_proto" / "cli" / "viewer_assets" / "viewer.html"

_spec = importlib.util.spec_from_file_location("viewer_snap", JS_DIR / "viewer" / "snap.py")
snap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(snap)


def _demo():
  from jaxpr_proto.cli import demo
  return demo.trace()[0]


def program(name):
  return _demo() if name == "demo" else traced(name)


def eqn_paths(m) -> set[str]:
  """The data-eqn path of every eqn stored in Module `m`."""
  return {f"jaxprs[{j}].eqns[{k}]" for j, jx in enumerate(m.jaxprs) for k in range(len(jx.eqns))}


def run_cli(capsys, *argv):
  code = cli.main([str(a) for a in argv])
  out, err = capsys.readouterr()
  return code, out, err


# --- the command ------------------------------------------------------------------

def test_view_writes_one_page_beside_the_file(tmp_path, capsys):
  path = tmp_path / "scan.jaxpb"
  jp.save(traced("scan"), path)
  code, out, err = run_cli(capsys, "view", path)
  assert code == 0, err
  page = (tmp_path / "scan.html").read_text()
  assert str(tmp_path / "scan.html") in out
  # The file's message, base64, and nothing fetched from elsewhere.
  assert base64.b64encode(jp.dumps(traced("scan"))).decode() in page
  assert 'data-name="scan.jaxpb"' in page
  assert "__JAXPB_" not in page
  assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
  assert "https://" not in page and "<link" not in page and "src=" not in page


def test_view_output_and_open(tmp_path, capsys, monkeypatch):
  path = tmp_path / "m.txtpb"  # any form the other commands read
  jp.save(traced("mlp"), tmp_path / "m.jaxpb")
  assert run_cli(capsys, "convert", tmp_path / "m.jaxpb", path)[0] == 0
  opened = []
  monkeypatch.setattr(view.webbrowser, "open", opened.append)
  code, _, err = run_cli(capsys, "view", path, "-o", tmp_path / "page.html", "--open")
  assert code == 0, err
  assert (tmp_path / "page.html").is_file()
  assert opened == [(tmp_path / "page.html").resolve().as_uri()]
  assert base64.b64encode(jp.dumps(traced("mlp"))).decode() in (tmp_path / "page.html").read_text()


def test_view_errors(tmp_path, capsys):
  code, _, err = run_cli(capsys, "view", tmp_path / "missing.jaxpb")
  assert code == 1 and "missing.jaxpb" in err and len(err.strip().splitlines()) == 1
  bad = tmp_path / "bad.jaxpb"
  bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
  code, _, err = run_cli(capsys, "view", bad)
  assert code == 1 and "bad.jaxpb" in err and len(err.strip().splitlines()) == 1
  assert not (tmp_path / "bad.html").exists()
  assert run_cli(capsys, "view")[0] == 2
  good = tmp_path / "good.jaxpb"
  jp.save(traced("mlp"), good)
  code, _, err = run_cli(capsys, "view", good, "-o", tmp_path / "nowhere" / "x.html")
  assert code == 1 and "nowhere" in err and len(err.strip().splitlines()) == 1
  code, _, err = run_cli(capsys, "view", good, "-o", good)
  assert code == 2 and good.read_bytes() == jp.dumps(traced("mlp"))


def test_page_embeds_any_name_safely():
  name = '"><script>alert(1)</script> __JAXPB_BASE64__ &amp;.jaxpb'
  data = jp.dumps(traced("mlp"))
  page = view.page(data, name)
  assert page.count("<script") == view.template().count("<script")
  assert base64.b64encode(data).decode() in page


def test_template_is_package_data():
  text = view.template()
  assert text == ASSET.read_text(encoding="utf-8")
  assert text.count("__JAXPB_NAME__") == 1 and text.count("__JAXPB_BASE64__") == 1
  assert text.count("__JAXPR_TEXT__") == 1


def test_page_embeds_the_text_safely():
  """The jaxpr text goes in as JSON that cannot end its <script>: a str
  param holding `</script>` is written as \\u003c/script>."""
  import jax
  import jax.numpy as jnp

  def f(x):
    return jnp.sin(x)
  f.__name__ = f.__qualname__ = "</script><b>"  # (jit's name param)

  m = jp.encode(jax.make_jaxpr(lambda x: jax.jit(f)(x))(jnp.ones(3)))
  text = view.text_data(m)
  assert "</script><b>" in text["text"]
  page = view.page_of(m, "x.jaxpb")
  assert page.count("<script") == view.template().count("<script")
  assert "</script><b>" not in page and "\\u003c/script>\\u003cb>" in page
  assert text["text"] == jp.format(m, debug_info=False)


def test_a_module_without_text_says_why():
  m = jp.encode(traced("mlp"))
  m.params[0].name = "bad name"  # (a hostile file: no text can hold it)
  assert view.text_data(m) == {"error": "this Module has no jaxpr text: param name 'bad name'"}


# --- the page in a browser -----------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
  if importlib.util.find_spec("playwright") is None:
    pytest.skip("the viewer's browser tests need playwright (pip install playwright)")
  if snap.chromium_path() is None:
    pytest.skip("the viewer's browser tests need Chromium (Debian: apt-get install chromium)")
  with snap.browser() as b:
    yield b


def open_page(browser, tmp_path, name):
  page, msgs = snap.open_page(browser, snap.write_page(program(name), tmp_path, name))
  assert page.evaluate("document.body.dataset.state") == "ready", msgs
  return page, msgs


def errors(msgs):
  return [m for m in msgs if m[0] in ("error", "pageerror")]


@pytest.mark.parametrize("name", sorted(PROGRAMS) + ["demo"])
def test_page_shows_every_eqn(browser, tmp_path, name):
  page, msgs = open_page(browser, tmp_path, name)
  m = jp.encode(program(name))
  # Collapsed: the root jaxpr's eqns; expanded: each stored eqn exactly once.
  assert page.locator("[data-eqn]").count() == len(program(name).jaxpr.eqns)
  page.click("#expand-all")
  shown = page.eval_on_selector_all("[data-eqn]", "els => els.map(e => e.dataset.eqn)")
  assert len(shown) == len(set(shown))
  assert set(shown) == eqn_paths(m)
  page.click("#collapse-all")
  assert page.locator("[data-eqn]").count() == len(program(name).jaxpr.eqns)
  assert not errors(msgs), msgs


def test_page_reads_jaxprs_in_columns(browser, tmp_path, monkeypatch):
  monkeypatch.setattr(columns, "COLUMNS_FROM", 0)  # as a big program's jaxprs are written
  m = jp.encode(program("demo"))
  assert all(j.HasField("columns") for j in m.jaxprs)
  page, msgs = open_page(browser, tmp_path, "demo")
  assert page.locator("[data-eqn]").count() == len(program("demo").jaxpr.eqns)
  page.click("#expand-all")
  shown = page.eval_on_selector_all("[data-eqn]", "els => els.map(e => e.dataset.eqn)")
  assert sorted(shown) == sorted({f"jaxprs[{j}].eqns[{k}]" for j, jx in enumerate(m.jaxprs)
                                  for k in range(columns.eqn_count(jx))})
  assert not errors(msgs), msgs


def _scan_eqn(m):
  """(path of the root's scan eqn, index of its body jaxpr)."""
  root = m.closed_jaxprs[m.root].jaxpr
  for k, e in enumerate(m.jaxprs[root].eqns):
    if m.primitives[e.primitive].name == "scan":
      body = next(m.params[p].value for p in e.params if m.params[p].name == "jaxpr")
      return f"jaxprs[{root}].eqns[{k}]", m.closed_jaxprs[body.closed_jaxpr].jaxpr
  raise AssertionError("no scan")


def test_expanding_a_scan_shows_its_body(browser, tmp_path):
  page, msgs = open_page(browser, tmp_path, "scan")
  m = jp.encode(traced("scan"))
  path, body = _scan_eqn(m)
  inside = f'[data-eqn^="jaxprs[{body}]."]'
  assert page.locator(inside).count() == 0
  page.click(f'[data-toggle="{path}"]')
  assert page.locator(inside).count() == len(m.jaxprs[body].eqns)
  assert page.locator(f'[data-eqn="{path}"].sel').count() == 1
  assert "scan[" in page.inner_text("#panel")  # the eqn's printout
  page.click(f'[data-toggle="{path}"]')  # and collapses again
  assert page.locator(inside).count() == 0
  assert not errors(msgs), msgs


def test_search_finds_a_primitive_inside_a_scan(browser, tmp_path):
  page, msgs = open_page(browser, tmp_path, "scan")
  m = jp.encode(traced("scan"))
  sins = sorted(p for p in eqn_paths(m) if m.primitives[
      m.jaxprs[int(p[7:p.index("]")])].eqns[int(p[p.rindex("[") + 1:-1])].primitive].name == "sin")
  assert sins
  page.fill("#search", "sin")  # the hits, as one types
  page.wait_for_selector("#panel ol.hits")
  assert f"{len(sins)} eqn{'s' * (len(sins) > 1)} match" in page.inner_text("#panel")
  assert page.locator("#panel ol.hits a").count() == len(sins)
  # Enter goes to the first hit: the scan opens, the eqn is selected and marked.
  page.press("#search", "Enter")
  selected = page.eval_on_selector_all(".sel", "els => els.map(e => e.dataset.eqn)")
  assert selected == [sins[0]]
  assert page.locator(f'[data-eqn="{sins[0]}"].hit').count() == 1
  assert re.search(r"= sin\b", page.inner_text("#panel pre.eqn"))
  # A variable by name: the eqns that define or use it.
  page.fill("#search", "a")
  page.wait_for_function("document.querySelector('#panel').innerText.includes('match')")
  assert "0 eqns match" not in page.inner_text("#panel")
  assert not errors(msgs), msgs


def _scoped(x):
  import jax
  import jax.numpy as jnp
  with jax.named_scope("block"):
    return jnp.sin(x) * 2.0


def _text(page, selector) -> str:
  return page.eval_on_selector(selector, "e => e.textContent")


def test_panel_shows_the_jaxpr_text(browser, tmp_path):
  """The panel shows the program, an eqn and a sub-jaxpr as their jaxpr
  text (jp.format(m, debug_info=False)): the whole text parses back to the
  program, and an eqn's or a sub-jaxpr's is that text's, verbatim but for
  its indent; the graph names variables as the text does."""
  from jaxpr_proto.cli.program_text import ProgramText
  page, msgs = open_page(browser, tmp_path, "scan")
  m = jp.encode(traced("scan"))
  want = jp.format(m, debug_info=False)
  assert _text(page, "#panel pre.text") == ""  # (filled in once opened)
  page.click("#panel details.text summary")
  page.wait_for_function("document.querySelector('#panel pre.text').textContent.length > 0")
  whole = _text(page, "#panel pre.text")
  assert whole == want
  assert jp.parse(whole).SerializeToString(deterministic=True) == jp.dumps(
      traced("scan"), debug_info=False)
  path, body = _scan_eqn(m)
  pt = ProgramText.of(m)
  page.click(f'[data-toggle="{path}"]')
  scan_text = _text(page, "#panel pre.eqn")
  assert scan_text.startswith("c:f32[3] d:f32[6,3] = scan[\n")
  assert "\n  jaxpr={ lambda ; e:f32[3] f:f32[]. let\n" in scan_text  # (at the eqn's indent)
  assert scan_text == pt.eqns[(0, 0)].dedented()
  body_text = _text(page, "#panel pre.jaxpr")
  assert body_text == pt.jaxprs[body].dedented()
  for line in body_text.splitlines()[1:]:  # (each line of the text, 6 columns further in)
    assert " " * 6 + line in want
  sin = next(k for k, e in enumerate(m.jaxprs[body].eqns) if m.primitives[e.primitive].name == "sin")
  page.evaluate("path => window.jaxprViewer.goto(path)", f"jaxprs[{body}].eqns[{sin}]")
  assert _text(page, "#panel pre.eqn") == "h:f32[] = sin[accuracy=None] f"
  assert "h:f32[] = sin[accuracy=None] f" in want
  # The body's input f is `in f` in the graph (JAX's printout of the body alone would say b).
  f_node = page.locator(f'#vp [data-var="{body}:1"]').first
  assert f_node.text_content().startswith("in f")
  f_node.click()
  assert page.inner_text("#panel h2") == "f:f32[]"
  assert not errors(msgs), msgs


def test_hover_and_click_show_source_and_name_stack(browser, tmp_path):
  import jax
  import jax.numpy as jnp
  page, msgs = snap.open_page(browser, snap.write_page(jax.make_jaxpr(_scoped)(jnp.ones(3)), tmp_path, "scoped"))
  node = page.locator('[data-eqn="jaxprs[0].eqns[0]"]')
  node.hover()
  tip = page.inner_text("#tooltip")
  assert "test_viewer.py:" in tip and "(_scoped)" in tip and "block" in tip
  node.click()
  assert page.inner_text("#panel pre.eqn") == "b:f32[3] = sin[accuracy=None] a"
  panel = page.inner_text("#panel")
  assert "test_viewer.py:" in panel and "block" in panel
  assert not errors(msgs), msgs


def test_shared_jaxpr_is_shown_once(browser, tmp_path):
  import jax
  import jax.numpy as jnp
  f = jax.jit(lambda x: jnp.sin(x) * 2.0)
  cj = jax.make_jaxpr(lambda x: f(f(x)))(jnp.ones(3))
  m = jp.encode(cj)
  assert len(m.jaxprs) == 2  # both jit eqns use jaxprs[1]
  path = snap.write_page(cj, tmp_path, "shared")
  page, msgs = snap.open_page(browser, path)
  page.click("#expand-all")
  assert page.locator('[data-eqn^="jaxprs[1]."]').count() == len(m.jaxprs[1].eqns)
  assert page.locator("[data-show]").count() == 1  # the other use: "show here"
  page.click("[data-show]")
  assert page.locator('[data-eqn^="jaxprs[1]."]').count() == len(m.jaxprs[1].eqns)
  page.locator(".egroup").first.locator(".gtitle").click()
  assert "2 uses" in page.inner_text("#panel") or "shared" in page.inner_text("#panel")
  assert not errors(msgs), msgs


def test_a_jaxpr_that_holds_itself_is_shown_once(browser, tmp_path):
  # A hostile file: the scan's body is the root jaxpr itself (a cycle).
  m = jp.encode(traced("scan"))
  path, _ = _scan_eqn(m)
  k = int(path[path.rindex("[") + 1:-1])
  for p in m.jaxprs[0].eqns[k].params:
    if m.params[p].name == "jaxpr":
      m.params[p].value.closed_jaxpr = m.root
  html = tmp_path / "cycle.html"
  html.write_text(view.page(m.SerializeToString(), "cycle.jaxpb"))
  page, msgs = snap.open_page(browser, html)
  page.click("#expand-all")
  shown = page.eval_on_selector_all("[data-eqn]", "els => els.map(e => e.dataset.eqn)")
  assert sorted(shown) == sorted(f"jaxprs[0].eqns[{i}]" for i in range(len(m.jaxprs[0].eqns)))
  page.click("[data-show]")  # "show here" would put the jaxpr inside itself: refused
  assert page.locator("[data-eqn]").count() == len(shown)
  assert not errors(msgs), msgs


def test_dropping_another_file_views_it(browser, tmp_path):
  page, msgs = open_page(browser, tmp_path, "mlp")
  data = list(jp.dumps(traced("cond")))
  page.evaluate("""data => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(data)], "other.jaxpb"));
    window.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
  }""", data)
  page.wait_for_function("document.getElementById('file').textContent === 'other.jaxpb'")
  assert page.locator("[data-eqn]").count() == len(traced("cond").jaxpr.eqns)
  # A file that is not a Module: an error line, and the old view stays.
  page.evaluate("""() => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array([10, 255, 255, 255, 255, 15])], "bad.jaxpb"));
    window.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
  }""")
  page.wait_for_selector("#error:not([hidden])")
  assert "bad.jaxpb" in page.inner_text("#error")
  assert page.locator("[data-eqn]").count() == len(traced("cond").jaxpr.eqns)
  # A text form: the page says which command reads it.
  page.evaluate("""text => {
    const dt = new DataTransfer();
    dt.items.add(new File([text], "f.jaxpr"));
    window.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
  }""", jp.format(traced("cond")))
  page.wait_for_function("document.getElementById('error').textContent.startsWith('f.jaxpr')")
  assert page.inner_text("#error") == ("f.jaxpr: the page reads .jaxpb files; view this one "
                                       "with `jaxpr-proto view f.jaxpr`")
  assert page.locator("[data-eqn]").count() == len(traced("cond").jaxpr.eqns)
  assert not errors(msgs), msgs


def test_screenshot(browser, tmp_path):
  # (docs/viewer.png: python tools/js/viewer/snap.py --png docs/viewer.png)
  page, msgs = open_page(browser, tmp_path, "demo")
  path, _ = _scan_eqn(jp.encode(_demo()))
  page.click(f'[data-toggle="{path}"]')
  page.screenshot(path=tmp_path / "viewer.png")
  assert (tmp_path / "viewer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert not errors(msgs), msgs


# --- the committed template is fresh -----------------------------------------------------

@pytest.fixture(scope="module")
def node():
  """node, with tools/js's dependencies (tests/helpers.js_node)."""
  return helpers.js_node("the viewer's freshness test")


@pytest.mark.timeout(900)
def test_committed_page_is_fresh(node, tmp_path):
  proc = subprocess.run([node, str(JS_DIR / "viewer" / "build.mjs"), "--out", str(tmp_path)],
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  assert (tmp_path / "viewer.html").read_bytes() == ASSET.read_bytes(), (
      "jaxpr_proto/cli/viewer_assets/viewer.html is stale: run `node tools/js/viewer/build.mjs`")
