"""Regenerate the committed Python protobuf code from proto/ with grpcio-tools.

    python tools/gen_proto.py            # write jaxpr_proto/v1/*_pb2.py(i)
    python tools/gen_proto.py --check    # exit 1 when the committed code is stale
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"


def generate(out_dir: pathlib.Path) -> None:
  from grpc_tools import protoc
  import grpc_tools
  include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
  files = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
  rc = protoc.main(["protoc", f"-I{PROTO_ROOT}", f"-I{include}",
                    f"--python_out={out_dir}", f"--pyi_out={out_dir}", *files])
  if rc:
    raise SystemExit(f"protoc failed with exit code {rc}")


def generated_files(root: pathlib.Path) -> dict[str, bytes]:
  return {str(p.relative_to(root)): p.read_bytes()
          for p in sorted(root.rglob("*_pb2.py*"))}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument("--check", action="store_true",
                  help="compare with the committed code instead of writing")
  args = ap.parse_args(argv)
  if not args.check:
    generate(ROOT)
    return 0
  with tempfile.TemporaryDirectory() as tmp:
    generate(pathlib.Path(tmp))
    fresh = generated_files(pathlib.Path(tmp))
  committed = {k: (ROOT / k).read_bytes() for k in fresh if (ROOT / k).exists()}
  stale = sorted(k for k in fresh if committed.get(k) != fresh[k])
  if stale:
    print("stale generated code (run python tools/gen_proto.py):", *stale, sep="\n  ")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
