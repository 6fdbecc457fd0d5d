"""`jaxpr-proto view`: one self-contained HTML page showing a program as a graph.

The page is a template built from tools/js/viewer/ (the viewer's script, with
protobufjs, dagre and the schema bundled in) and shipped as package data; the
command only embeds the file's bytes in it, base64, and the program's jaxpr
text (`jp.format(m, debug_info=False)`, with where each jaxpr and eqn is in
it: cli.program_text), which the side panel shows, so that what a user reads
there pastes back into a `.jaxpr` file. The page decodes the bytes itself,
in the browser, so it needs no network, and nothing here runs JAX.
"""
from __future__ import annotations

import base64
import html
import importlib.resources
import json
import os
import pathlib
import sys
import webbrowser

from jaxpr_proto.cli.exits import EXIT_OK, CheckFailed, UsageError
from jaxpr_proto.cli.inputs import read_module
from jaxpr_proto.cli.printing import first_line
from jaxpr_proto.cli.program_text import ProgramText
from jaxpr_proto.cli.progress import progress_for
from jaxpr_proto.errors import EncodeError
from jaxpr_proto.wire import files

ASSET = ("viewer_assets", "viewer.html")
_NAME, _DATA, _TEXT = "__JAXPB_NAME__", "__JAXPB_BASE64__", "__JAXPR_TEXT__"


def add_arguments(p) -> None:
  p.add_argument("file", metavar="FILE", help="the program (.jaxpb, .jaxpr, .txtpb or .json)")
  p.add_argument("-o", "--output", metavar="OUT.html",
                 help="where to write the page (default: FILE with .html)")
  p.add_argument("--open", action="store_true", help="open the page in a web browser")


def template() -> str:
  """The page without a program (it then asks for a file to be dropped on it)."""
  res = importlib.resources.files("jaxpr_proto.cli").joinpath(*ASSET)
  try:
    return res.read_text(encoding="utf-8")
  except FileNotFoundError:
    raise CheckFailed(f"the viewer's page is missing from this installation ({'/'.join(ASSET)}); "
                      "rebuild it with `node tools/js/viewer/build.mjs`") from None


def text_data(m) -> dict:
  """What the page shows as the Module's jaxpr text: {"text": ..., and
  the spans of cli.program_text}, or {"error": why it has none}."""
  try:
    pt = ProgramText.of(m)
  except EncodeError as e:
    return {"error": e.message}
  except Exception as e:  # (a hostile Module: the graph is still shown, and why there is no text)
    return {"error": f"the printer failed: {type(e).__name__}: {first_line(e)}"}
  return {"text": pt.text, **pt.spans()}


def page(data: bytes, name: str, text: dict | None = None) -> str:
  """The page for the binary Module `data`, titled `name`, with its jaxpr
  text (`text_data`; without it, the panel shows the page's own printout)."""
  # Base64, an escaped attribute and JSON without "<" cannot end the <script> that holds them.
  head, rest = template().split(_NAME, 1)
  middle, rest = rest.split(_DATA, 1)
  before_text, tail = rest.split(_TEXT, 1)
  doc = json.dumps(text, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
  return (head + html.escape(name, quote=True) + middle + base64.b64encode(data).decode("ascii")
          + before_text + doc + tail)


def page_of(m, name: str) -> str:
  """The page of the Module `m` (its bytes and its text)."""
  return page(files.to_bytes(m, files.BINARY), name, text_data(m))


def cmd_view(args) -> int:
  out = args.output or os.path.splitext(args.file)[0] + ".html"
  if os.path.abspath(out) == os.path.abspath(args.file):
    raise UsageError(f"{out}: the page would replace the program; name another with -o")
  folder = os.path.dirname(os.path.abspath(out))
  if not os.path.isdir(folder):
    raise CheckFailed(f"{out}: no such folder {folder}")
  with progress_for([args.file], 2) as progress:
    m = read_module(args.file, progress)  # refuses what is not a Module we can read
    progress.stage(f"writing {os.path.basename(out)}")
    data = page_of(m, os.path.basename(args.file)).encode("utf-8")
    files.write_atomic(out, data)
  sys.stdout.write(f"{out} ({len(data):,} bytes)\n")
  if args.open:
    webbrowser.open(pathlib.Path(out).resolve().as_uri())
  return EXIT_OK
