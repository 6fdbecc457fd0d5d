"""`jaxpr-proto view`: one self-contained HTML page showing a program as a graph.

The page is a template built from tools/js/viewer/ (the viewer's script, with
protobufjs, dagre and the schema bundled in) and shipped as package data; the
command only embeds the file's bytes in it, base64. The page decodes them
itself, in the browser, so it needs no network, and nothing here runs JAX.
"""
from __future__ import annotations

import base64
import html
import importlib.resources
import os
import pathlib
import sys
import webbrowser

from jaxpr_proto.cli.exits import EXIT_OK, CheckFailed, UsageError
from jaxpr_proto.cli.inputs import read_module
from jaxpr_proto.cli.progress import progress_for
from jaxpr_proto.wire import files

ASSET = ("viewer_assets", "viewer.html")
_NAME, _DATA = "__JAXPB_NAME__", "__JAXPB_BASE64__"


def add_arguments(p) -> None:
  p.add_argument("file", metavar="FILE", help="the program (.jaxpb, .txtpb or .json)")
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


def page(data: bytes, name: str) -> str:
  """The page for the binary Module `data`, titled `name`."""
  # Base64 and an escaped attribute cannot end the <script> that holds them.
  head, rest = template().split(_NAME, 1)
  middle, tail = rest.split(_DATA, 1)
  return head + html.escape(name, quote=True) + middle + base64.b64encode(data).decode("ascii") + tail


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
    data = page(files.to_bytes(m, files.BINARY), os.path.basename(args.file)).encode("utf-8")
    files.write_atomic(out, data)
  sys.stdout.write(f"{out} ({len(data):,} bytes)\n")
  if args.open:
    webbrowser.open(pathlib.Path(out).resolve().as_uri())
  return EXIT_OK
