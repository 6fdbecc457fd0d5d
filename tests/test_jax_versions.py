"""The JAX releases jaxpr_proto supports: one adapter per minor, and a clear
refusal of any other JAX (never a "malformed file" later)."""
from __future__ import annotations

import os
import re
import pathlib
import subprocess
import sys

import jax
import pytest

import jaxpr_proto as jp
from jaxpr_proto import compat

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _import_with_jax_version(version: str, **env) -> subprocess.CompletedProcess:
  """Imports jaxpr_proto in a fresh process whose jax reports `version`."""
  code = (f"import jax; jax.__version__ = {version!r}\n"
          "import jaxpr_proto, jaxpr_proto.compat as j; print('adapter', j.ADAPTER)")
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=300, cwd=ROOT, env=dict(os.environ, **env))


def test_running_jax_has_its_own_adapter():
  minor = tuple(int(x) for x in jax.__version__.split(".")[:2])
  assert compat.ADAPTER == f"v{minor[0]}_{minor[1]}"
  assert compat.MINOR == minor
  assert compat.JAX_VERSION[:2] == minor


@pytest.mark.parametrize("version", ["0.8.1", "0.4.38", "0.13.0", "1.0.0"])
def test_unsupported_jax_is_refused_on_import_naming_the_range(version):
  done = _import_with_jax_version(version)
  assert done.returncode != 0
  last = done.stderr.strip().splitlines()[-1]
  assert last.startswith("jaxpr_proto.errors.UnsupportedJaxError: "), done.stderr[-2000:]
  assert f"this is JAX {version}" in last
  assert "supports JAX 0.9 to 0.12" in last and "0.10 to 0.12" in last
  assert "malformed" not in done.stderr


def test_unsupported_jax_error_is_an_import_error():
  assert issubclass(jp.UnsupportedJaxError, ImportError)
  assert issubclass(jp.UnsupportedJaxError, jp.Error)


@pytest.mark.skipif(compat.MINOR != compat.MINORS[-1],
                    reason="only the newest supported JAX can stand in for a newer one")
def test_newer_jax_can_be_tried_with_the_newest_adapter():
  done = _import_with_jax_version("0.13.0", JAXPR_PROTO_UNSUPPORTED_JAX="1")
  assert done.returncode == 0, done.stderr[-2000:]
  assert "adapter v0_12" in done.stdout
  assert "JAX 0.13.0 is not supported" in done.stderr


def test_an_older_jax_is_never_tried():
  done = _import_with_jax_version("0.8.1", JAXPR_PROTO_UNSUPPORTED_JAX="1")
  assert "UnsupportedJaxError" in done.stderr


def test_internal_errors_do_not_blame_the_file(monkeypatch):
  """An exception the decoder's checks did not foresee (here: an adapter that
  breaks) is an InternalError naming both versions, not a malformed file."""
  cj = jax.make_jaxpr(lambda x: x * 2.0)(1.0)
  data = jp.dumps(cj)

  def broken(*a, **k):
    raise TypeError("JaxprEqnContext._create() missing 1 required positional argument")
  monkeypatch.setattr(compat, "make_context", broken)
  with pytest.raises(jp.InternalError) as info:
    jp.loads(data)
  msg = str(info.value)
  assert "internal error of jaxpr_proto" in msg and f"JAX {jax.__version__}" in msg
  assert "the file may be fine" in msg and "malformed" not in msg
  assert "TypeError" in msg and info.value.path.startswith("eqn[0]")
  report = jp.check(data)
  assert not report.ok and "internal error" in report.format()


def test_every_adapter_is_listed_and_small():
  """One module per minor; the per-minor adapters stay small (what differs)."""
  folders = sorted(p.parent.name for p in (ROOT / "jaxpr_proto" / "compat").glob("v*/adapter.py"))
  assert folders == sorted(compat.folder(m) for m in compat.MINORS)
  for name in folders:
    lines = (ROOT / "jaxpr_proto" / "compat" / name / "adapter.py").read_text().splitlines()
    assert len(lines) < 150, (name, len(lines))


def test_jax_internals_are_used_only_in_the_adapters():
  offenders = []
  for path in (ROOT / "jaxpr_proto").rglob("*.py"):
    rel = path.relative_to(ROOT / "jaxpr_proto")
    if rel.parts[0] == "compat":
      continue
    for k, line in enumerate(path.read_text().splitlines(), 1):
      if re.match(r"\s*(from jax\._src|import jax\._src)", line):
        offenders.append(f"{rel}:{k}: {line.strip()}")
  assert not offenders, offenders


@pytest.mark.skipif(compat.FLATTREE_BUILDERS == {}, reason="this JAX has no FlatTrees")
def test_flattree_stand_in_counts_as_jax_does():
  """An older JAX reads scan's FlatTrees as standins.FlatTreeStandIn; its leaf
  counts and parts must be JAX's own, on every scan of the corpus (with
  grads: filtered trees, nested Eithers, pytree nodes)."""
  from jaxpr_proto.compat import standins
  from tests import corpus

  def stand_in(v):
    ft = compat.flattree_fields(v)
    if ft is None:
      return tuple(stand_in(x) for x in v) if isinstance(v, tuple) else v
    return standins.FlatTreeStandIn(ft[0], {k: stand_in(x) for k, x in ft[1]})

  seen = []

  def walk(j):
    for e in j.eqns:
      if e.primitive.name == "scan":
        for name in ("ft_in", "ft_out"):
          t = e.params[name]
          s = stand_in(t)
          assert len(s) == len(t), (name, t)
          assert s.part_sizes() == [len(x) for x in t.unpack()], (name, t)
          seen.append(type(t).__name__)
      for sub in compat.jaxprs_in_params(e.params):
        walk(sub)

  for name in ("scan_variants", "checkpoint_scan_grad", "traced_grad_of_scan", "lstm_scan"):
    p = corpus.get(name)
    walk(corpus.trace(p).jaxpr)
    if p.grad_argnums is not None:
      walk(jax.make_jaxpr(corpus.grad_fn(p))(*p.args).jaxpr)
  assert len(seen) >= 10 and {"FTTuple", "FTPyTree"} <= set(seen), seen


def test_cli_under_unsupported_jax_prints_one_line():
  code = ("import sys; sys.argv = ['jaxpr-proto', 'info', 'x.jaxpb']\n"
          "import jax; jax.__version__ = '0.8.1'\n"
          "from jaxpr_proto.cli import main; main()")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=300, cwd=ROOT)
  assert done.returncode == 2
  assert done.stderr.strip().splitlines() == [
      done.stderr.strip().splitlines()[0]], done.stderr  # one line
  assert done.stderr.startswith("jaxpr-proto: error: jaxpr_proto supports JAX 0.9 to 0.12")
  assert "Traceback" not in done.stderr


@pytest.mark.skipif(not hasattr(jax.sharding, "UnreducedKind"), reason="JAX < 0.11")
def test_partition_spec_unreduced_kind_round_trips():
  from jaxpr_proto.codec import sharding
  P = jax.sharding.PartitionSpec
  for kind in jax.sharding.UnreducedKind:
    spec = P(None, "y", unreduced={"x"}, unreduced_kind=kind)
    features = set()
    msg = sharding.encode_spec(spec, "p", features)
    # sum, the default, is written as nothing: JAX 0.10 reads it as it is
    assert msg.unreduced_kind == ("" if kind.name == "sum" else kind.name)
    assert features == (set() if kind.name == "sum" else {"unreduced_kind"})
    back = sharding.decode_spec(msg, "p")
    assert back == spec and back.unreduced_kind == kind
