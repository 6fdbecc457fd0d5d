"""Drive `jaxpr-proto view` pages in headless Chromium (playwright): time a
large program's page, or write the README's screenshot.

    python tools/js/viewer/snap.py --bench 20000     # time a 20k-eqn program's page
    python tools/js/viewer/snap.py --png docs/viewer.png

Needs `pip install playwright` and a Chromium (Debian: `apt-get install
chromium`); never playwright's own browser download. tests/test_viewer.py
uses the same helpers.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
  sys.path.insert(0, str(ROOT))


def chromium_path() -> str | None:
  """The system Chromium: the binary itself where Debian's wrapper script is."""
  for p in ("/usr/lib/chromium/chromium", shutil.which("chromium"), shutil.which("chromium-browser"),
            shutil.which("google-chrome")):
    if p and os.access(p, os.X_OK):
      return p
  return None


@contextlib.contextmanager
def browser():
  from playwright.sync_api import sync_playwright
  with sync_playwright() as pw:
    b = pw.chromium.launch(executable_path=chromium_path())
    try:
      yield b
    finally:
      b.close()


def open_page(b, html_path, width=1400, height=900):
  """-> (page, console messages and page errors seen, as (type, text))."""
  page = b.new_page(viewport={"width": width, "height": height})
  msgs = []
  page.on("console", lambda m: msgs.append((m.type, m.text)))
  page.on("pageerror", lambda e: msgs.append(("pageerror", str(e))))
  page.goto(pathlib.Path(html_path).resolve().as_uri())
  page.wait_for_selector("body[data-state]", timeout=60_000)
  return page, msgs


def write_page(closed_jaxpr, folder, name) -> pathlib.Path:
  import jaxpr_proto as jp
  from jaxpr_proto.cli import view
  out = pathlib.Path(folder) / f"{name}.html"
  out.write_text(view.page_of(jp.encode(closed_jaxpr), f"{name}.jaxpb"), encoding="utf-8")
  return out


# --- programs -------------------------------------------------------------------

def deep_mlp(eqns: int):
  """About `eqns` eqns: layers of matmul + layer norm + gelu, one named scope each."""
  import jax
  import jax.numpy as jnp

  def layer(x, w):
    h = x @ w
    h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)
    return x + jax.nn.gelu(h)

  per_layer = len(jax.make_jaxpr(layer)(jnp.ones((4, 8)), jnp.ones((8, 8))).jaxpr.eqns)

  def f(x, w):
    for i in range(max(1, eqns // per_layer)):
      with jax.named_scope(f"layer{i}"):
        x = layer(x, w)
    return x

  return jax.make_jaxpr(f)(jnp.ones((4, 8)), jnp.ones((8, 8)))


def flat_chain(eqns: int):
  """`eqns` elementwise eqns in one jaxpr, without name scopes."""
  import jax
  import jax.numpy as jnp

  def f(x, y):
    for i in range(eqns // 2):
      x = jnp.sin(x) * y if i % 7 else jnp.cos(x) + y
    return x

  return jax.make_jaxpr(f)(jnp.ones(3), jnp.ones(3))


def bench(eqns: int, repeat: int) -> None:
  with tempfile.TemporaryDirectory() as d, browser() as b:
    for name, make in (("deep_mlp", deep_mlp), ("flat_chain", flat_chain)):
      cj = make(eqns)
      path = write_page(cj, d, name)
      ready, wall = [], []
      for _ in range(repeat):
        t = time.perf_counter()
        page, msgs = open_page(b, path)
        wall.append(time.perf_counter() - t)
        assert page.evaluate("document.body.dataset.state") == "ready", msgs
        ready.append(page.evaluate("window.jaxprViewer.timing.ready_ms") / 1000)
        t = time.perf_counter()  # one click: expand the first group
        page.click(".block, .eqn.subs >> nth=0")
        page.wait_for_timeout(0)
        click = time.perf_counter() - t
        page.close()
      print(f"{name}: {len(cj.jaxpr.eqns)} eqns, {path.stat().st_size:,} bytes of HTML; "
            f"ready {statistics.median(ready):.2f} s after navigation (median of {repeat}), "
            f"page.goto to ready {statistics.median(wall):.2f} s, expanding a group {click * 1000:.0f} ms")


def screenshot(png: str) -> None:
  """The demo's MLP step with its scan expanded, at a readable zoom."""
  from jaxpr_proto.cli import demo
  with tempfile.TemporaryDirectory() as d, browser() as b:
    page, msgs = open_page(b, write_page(demo.trace()[0], d, "demo"), 1280, 760)
    assert not msgs, msgs
    scan = page.locator(".eqn.subs", has_text="scan").first.get_attribute("data-eqn")
    page.click(f'[data-toggle="{scan}"]')  # expands it and shows its printout
    page.evaluate("path => window.jaxprViewer.goto(path)", scan)  # its title mid-screen
    center = (page.viewport_size["width"] - 380) / 2, (page.viewport_size["height"] + 36) / 2
    page.mouse.move(*center)
    page.mouse.down()  # drag the title to the top left
    page.mouse.move(center[0] - 300, center[1] - 250, steps=5)
    page.mouse.up()
    page.mouse.move(5, 5)  # no tooltip
    page.wait_for_timeout(100)
    page.screenshot(path=png)
  print(f"wrote {png}")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--bench", type=int, metavar="EQNS", help="time pages of programs of about EQNS eqns")
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--png", metavar="PATH", help="write a screenshot of the demo program's page")
  args = ap.parse_args(argv)
  if chromium_path() is None:
    ap.error("no Chromium found (Debian: apt-get install chromium)")
  if args.bench:
    bench(args.bench, args.repeat)
  if args.png:
    screenshot(args.png)
  return 0


if __name__ == "__main__":
  sys.exit(main())
