"""Digests of `jp.dumps` for every corpus program and golden file.

Used to show that a change of jaxpr_proto's code leaves its output byte for
byte the same: run it before and after the change, under the same JAX, and
compare (`--compare BEFORE.json`).

Per program it records the SHA-256 of `dumps(cj, debug_info=False)` and of
`dumps(cj)`, each with the checkout's own folder left out of file names (so
that two checkouts compare). In `dumps(cj)`, source frames inside
jaxpr_proto's own files (custom rules are traced from inside the encoder) move
with any edit of the package: each run of them counts as one placeholder, and
the traceback tables are compared as the tracebacks they hold;
and, per golden file, the digest of `dumps(loads(file))`.

  python tools/dumps_digest.py > before.json
  ... change the code ...
  python tools/dumps_digest.py --compare before.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
from google.protobuf import text_format  # noqa: E402
import jaxpr_proto as jp  # noqa: E402
from tests import corpus  # noqa: E402

# Checkouts whose names count as this one's: this one, and the one the golden
# files were written in.
CHECKOUTS = (str(ROOT), "/work/main")
PACKAGES = tuple(c + "/jaxpr_proto/" for c in CHECKOUTS)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_OWN_PLACE = re.compile(r"<root>/jaxpr_proto/[\w/]+\.py:\d+")


def _unplaced(text: str) -> str:
  for c in CHECKOUTS:
    text = text.replace(c, "<root>")
  text = _OWN_PLACE.sub("<jaxpr_proto>", text)  # functions jaxpr_proto traces itself
  return _ADDRESS.sub(" at 0x?", text)


def _text(data: bytes) -> bytes:
  """The file as text (as exact as the bytes), the checkout's folder left out."""
  return _unplaced(text_format.MessageToString(jp.parse(data))).encode()


def _normalized(data: bytes) -> bytes:
  """The file as text, the checkout's folder left out of it, and each eqn's
  traceback written out in place, with each run of frames inside
  jaxpr_proto's own files (custom rules are traced from inside the encoder)
  as one placeholder: they move with any edit of the package."""
  m = jp.parse(data)
  frames = []
  for f in m.frames:
    file = m.strings[f.file]
    frames.append(None if file.startswith(PACKAGES) else
                  (file, m.strings[f.function], f.line, f.column, f.end_line, f.end_column))
  tracebacks = []
  for tb in m.tracebacks:
    out = []
    for j in tb.frames:
      if frames[j] is not None or not out or out[-1] != "<jaxpr_proto>":
        out.append(frames[j] or "<jaxpr_proto>")
    tracebacks.append(repr(out))
  written = []
  for j in m.jaxprs:
    for e in j.eqns:
      written.append(tracebacks[e.traceback] if e.traceback < len(tracebacks) else "?")
      e.traceback = 0
  for table in ("strings", "frames", "tracebacks"):
    m.ClearField(table)
  text = text_format.MessageToString(m) + "\n".join(written)
  return _unplaced(text).encode()


def _sha(b: bytes) -> str:
  return hashlib.sha256(b).hexdigest()[:16]


def digests() -> dict[str, object]:
  out: dict[str, object] = {}
  for p in corpus.PROGRAMS:
    try:
      cj = corpus.trace(p)
      out[p.name] = [_sha(_text(jp.dumps(cj, debug_info=False))), _sha(_normalized(jp.dumps(cj)))]
    except Exception as e:  # programs this JAX cannot write: the error must stay the same
      out[p.name] = _unplaced(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
  for f in sorted((ROOT / "tests" / "golden").glob("v*/*.jaxpb")):
    key = f"golden/{f.parent.name}/{f.name}"
    try:
      out[key] = _sha(_normalized(jp.dumps(jp.loads(f.read_bytes()))))
    except Exception as e:
      out[key] = _unplaced(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
  return out


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--compare", metavar="BEFORE.json", help="compare with an earlier run")
  args = ap.parse_args()
  now = digests()
  if not args.compare:
    json.dump(now, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0
  before = json.loads(pathlib.Path(args.compare).read_text())
  differ = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
  for k in differ:
    print(f"DIFFERS {k}: {before.get(k)} -> {now.get(k)}")
  print(f"{len(now) - len(differ)} of {len(now)} identical (jax {jax.__version__})")
  return 1 if differ else 0


if __name__ == "__main__":
  sys.exit(main())
