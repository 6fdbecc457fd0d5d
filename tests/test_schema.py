"""Checks on the .proto schema itself, independent of the Python library.

* the committed generated code (jaxpr_proto/v1/*_pb2.py[i]) is fresh;
* `buf lint` (STANDARD) is clean;
* `buf breaking` (WIRE_JSON, see buf.yaml) passes against the committed baseline
  image, and really rejects a broken schema;
* every message, field, oneof, enum and enum value carries a leading comment.

The baseline image proto/baseline/jaxpr_proto_v1.binpb freezes the released
v1 schema. It is NOT to be regenerated to make a breaking change pass: an
incompatible change needs a new package (jaxpr_proto.v2). It was made with

    .venv/bin/buf build --exclude-source-info -o proto/baseline/jaxpr_proto_v1.binpb

(buf only reads *.proto files, so the image inside proto/ is not an input.)
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from google.protobuf import descriptor_pb2
from tests import helpers

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
SCHEMA = PROTO_ROOT / "jaxpr_proto" / "v1" / "jaxpr.proto"
BASELINE = PROTO_ROOT / "baseline" / "jaxpr_proto_v1.binpb"
SCHEMA_FILE_NAME = "jaxpr_proto/v1/jaxpr.proto"

_buf = helpers.buf


def _run_buf(*args: str, cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess:
  return subprocess.run([_buf(), *args], cwd=cwd, capture_output=True, text=True,
                        timeout=240)


def _explain(proc: subprocess.CompletedProcess) -> str:
  return f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


# --- (a) generated code ------------------------------------------------------

def test_generated_code_is_fresh():
  proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_proto.py"), "--check"],
                        cwd=ROOT, capture_output=True, text=True, timeout=240)
  assert proc.returncode == 0, (
      "generated protobuf code is stale; run `python tools/gen_proto.py`\n"
      + _explain(proc))


# --- (b) lint ----------------------------------------------------------------

def test_buf_lint_is_clean():
  proc = _run_buf("lint")
  assert proc.returncode == 0, _explain(proc)


def test_buf_inputs_are_only_the_schema():
  """The baseline image under proto/ must not become a build input."""
  proc = _run_buf("ls-files")
  assert proc.returncode == 0, _explain(proc)
  files = sorted(line.strip() for line in proc.stdout.splitlines() if line.strip())
  assert all(f.endswith(".proto") for f in files), files
  assert any(f.endswith(SCHEMA_FILE_NAME) for f in files), files


# --- (c) breaking changes ----------------------------------------------------

def _baseline_image() -> descriptor_pb2.FileDescriptorSet:
  # A Buf image is wire compatible with a FileDescriptorSet.
  assert BASELINE.is_file(), f"missing baseline image {BASELINE}"
  fds = descriptor_pb2.FileDescriptorSet()
  fds.ParseFromString(BASELINE.read_bytes())
  return fds


def test_baseline_image_is_not_empty():
  """An empty baseline would make `buf breaking` pass vacuously."""
  fds = _baseline_image()
  files = {f.name: f for f in fds.file}
  assert SCHEMA_FILE_NAME in files, sorted(files)
  f = files[SCHEMA_FILE_NAME]
  assert f.package == "jaxpr_proto.v1"
  names = {m.name for m in f.message_type}
  assert {"Module", "Jaxpr", "Eqn", "Value"} <= names, sorted(names)
  assert len(f.enum_type) > 0


def test_buf_breaking_against_baseline():
  proc = _run_buf("breaking", "--against", str(BASELINE))
  assert proc.returncode == 0, (
      "the schema is not WIRE_JSON compatible with the released v1 baseline "
      f"({BASELINE.relative_to(ROOT)}). Incompatible changes need jaxpr_proto.v2.\n"
      + _explain(proc))


# A field line inside `message Module { ... }`: `  <type> <name> = <number>;`
_FIELD_RE = re.compile(r"^(?P<indent>[ \t]+)(?P<label>(?:repeated |optional )?)"
                       r"(?P<type>[\w.]+) (?P<name>\w+) = (?P<num>\d+);", re.M)


def _module_body_span(text: str) -> tuple[int, int]:
  start = text.index("message Module {")
  end = text.index("\n}", start)
  return start, end


def _mutate_first_module_field(text: str, how: str) -> str:
  start, end = _module_body_span(text)
  m = _FIELD_RE.search(text, start, end)
  assert m is not None, "could not find a field in message Module"
  indent, label, typ, name, num = m.group("indent", "label", "type", "name", "num")
  if how == "renumber":
    new = f"{indent}{label}{typ} {name} = 9999;"
  elif how == "delete":
    new = f"{indent}// (deleted)"
  elif how == "rename":
    new = f"{indent}{label}{typ} {name}_renamed = {num};"
  elif how == "retype":
    new_type = "string" if typ != "string" else "bytes"
    new = f"{indent}{label}{new_type} {name} = {num};"
  elif how == "add":  # compatible: keep the field and add a new one
    new = (f"{m.group(0)}\n{indent}// An added field (compatible change).\n"
           f"{indent}string added_for_test = 9998;")
  else:
    raise ValueError(how)
  out = text[:m.start()] + new + text[m.end():]
  assert out != text
  return out


def _breaking_on_copy(tmp_path: pathlib.Path, how: str) -> subprocess.CompletedProcess:
  work = tmp_path / "repo"
  shutil.copytree(PROTO_ROOT / "jaxpr_proto", work / "proto" / "jaxpr_proto")
  shutil.copy2(ROOT / "buf.yaml", work / "buf.yaml")
  copy = work / "proto" / "jaxpr_proto" / "v1" / "jaxpr.proto"
  copy.write_text(_mutate_first_module_field(copy.read_text(), how))
  return _run_buf("breaking", "--against", str(BASELINE), cwd=work)


def test_buf_breaking_accepts_compatible_change(tmp_path):
  """Control for the tests below: the copied setup itself passes."""
  proc = _breaking_on_copy(tmp_path, "add")
  assert proc.returncode == 0, _explain(proc)


@pytest.mark.parametrize("how", ["renumber", "delete", "rename", "retype"])
def test_buf_breaking_rejects_incompatible_change(tmp_path, how):
  # `rename` is wire compatible but breaks the JSON mapping: only WIRE_JSON
  # (not WIRE) rejects it, so this also pins the rule set chosen in buf.yaml.
  proc = _breaking_on_copy(tmp_path, how)
  assert proc.returncode != 0, f"buf breaking accepted a '{how}' change\n" + _explain(proc)
  assert "jaxpr.proto" in proc.stdout + proc.stderr, _explain(proc)


# --- (d) every element is documented -----------------------------------------

# FileDescriptorProto / DescriptorProto / EnumDescriptorProto field numbers,
# as used in SourceCodeInfo.Location.path.
_FILE_MESSAGE, _FILE_ENUM, _FILE_SERVICE = 4, 5, 6
_MSG_FIELD, _MSG_NESTED, _MSG_ENUM, _MSG_ONEOF = 2, 3, 4, 8
_ENUM_VALUE = 2
_SERVICE_METHOD = 2


def _schema_with_source_info(tmp_path: pathlib.Path) -> descriptor_pb2.FileDescriptorProto:
  out = tmp_path / "schema.binpb"
  proc = _run_buf("build", "--as-file-descriptor-set", "-o", str(out))
  assert proc.returncode == 0, _explain(proc)
  fds = descriptor_pb2.FileDescriptorSet()
  fds.ParseFromString(out.read_bytes())
  (f,) = [f for f in fds.file if f.name == SCHEMA_FILE_NAME]
  assert f.HasField("source_code_info")
  return f


def _elements(f: descriptor_pb2.FileDescriptorProto):
  """Yields (kind, full name, location path) of every documentable element."""
  def enum(e, prefix, path):
    yield "enum", f"{prefix}{e.name}", path
    for i, v in enumerate(e.value):
      yield "enum value", f"{prefix}{e.name}.{v.name}", (*path, _ENUM_VALUE, i)

  def message(m, prefix, path):
    name = f"{prefix}{m.name}"
    yield "message", name, path
    for i, fld in enumerate(m.field):
      yield "field", f"{name}.{fld.name}", (*path, _MSG_FIELD, i)
    synthetic = {fld.oneof_index for fld in m.field
                 if fld.proto3_optional and fld.HasField("oneof_index")}
    for i, o in enumerate(m.oneof_decl):
      if i not in synthetic:
        yield "oneof", f"{name}.{o.name}", (*path, _MSG_ONEOF, i)
    for i, nested in enumerate(m.nested_type):
      if not nested.options.map_entry:
        yield from message(nested, f"{name}.", (*path, _MSG_NESTED, i))
    for i, e in enumerate(m.enum_type):
      yield from enum(e, f"{name}.", (*path, _MSG_ENUM, i))

  for i, m in enumerate(f.message_type):
    yield from message(m, "", (_FILE_MESSAGE, i))
  for i, e in enumerate(f.enum_type):
    yield from enum(e, "", (_FILE_ENUM, i))
  for i, s in enumerate(f.service):
    yield "service", s.name, (_FILE_SERVICE, i)
    for j, meth in enumerate(s.method):
      yield "method", f"{s.name}.{meth.name}", (_FILE_SERVICE, i, _SERVICE_METHOD, j)


def test_every_element_has_a_leading_comment(tmp_path):
  f = _schema_with_source_info(tmp_path)
  comments = {tuple(loc.path): loc.leading_comments
              for loc in f.source_code_info.location}
  elements = list(_elements(f))
  kinds = {k for k, _, _ in elements}
  assert {"message", "field", "enum", "enum value"} <= kinds, kinds
  missing = [f"{kind} {name}" for kind, name, path in elements
             if not comments.get(path, "").strip()]
  assert not missing, "elements without a leading comment:\n  " + "\n  ".join(missing)


# --- the README's test command is what CI runs -------------------------------

def test_ci_runs_the_readme_test_command():
  readme = (ROOT / "README.md").read_text()
  ci_lines = {l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines()}
  commands = [l.strip() for l in readme.splitlines()
              if l.strip().startswith("python3 -m venv") and "pytest" in l]
  assert commands, "README.md has no `python3 -m venv ... pytest` test command"
  assert all(c in ci_lines for c in commands), (commands, ".ci/run must run it verbatim")
