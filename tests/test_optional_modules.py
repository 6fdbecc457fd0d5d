"""JAX's optional modules (Pallas and its backends, Mosaic, sparse, ...) load
themselves: a file that names a primitive or param type of one loads in a
process that never imported it, which imports the module from a fixed table
(`jaxpr_proto.compat.optional`), never by a name read from the file. A name
that no entry of the table covers imports nothing and is refused by name.
(Pallas files in fresh processes and from the CLI: tests/test_pallas.py.)"""
from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import jaxpr_proto as jp
from jaxpr_proto.compat import optional
from tests.helpers import run_json


@pytest.mark.parametrize("name, module", [
    ("jax.experimental.pallas::pallas_call", "jax.experimental.pallas"),
    ("jax.pallas.primitives::program_id", "jax.experimental.pallas"),
    ("jax.pallas.mosaic.primitives::dma_start", "jax.experimental.pallas.tpu"),
    ("jax.pallas.mosaic.sc_primitives::gather", "jax.experimental.pallas.tpu_sc"),
    ("jax.pallas.mosaic_gpu.primitives::barrier_arrive", "jax.experimental.pallas.mosaic_gpu"),
    ("jax::pallas.core.MemorySpace", "jax.experimental.pallas"),
    ("jax::pallas.mosaic.core.MemorySpace", "jax.experimental.pallas.tpu"),
    ("jax::pallas.mosaic_gpu.core.CompilerParams", "jax.experimental.pallas.mosaic_gpu"),
    ("jax::pallas.triton.core.CompilerParams", "jax.experimental.pallas.triton"),
    ("jax::bcoo_dot_general", "jax.experimental.sparse"),
    ("jax::rnn_fwd", "jax.experimental.rnn"),
    # Names that no entry covers.
    ("os::system", None), ("evil.module::prim", None), ("jax::sin", None),
    ("jax::os.system", None), ("jax.experimental.pallas.evil::x", None),
    ("jax.experimental.pallasx::pallas_call", None), ("jax::rnn_fwd2", None),
    ("jax.pallas", None), ("", None),
])
def test_the_table_picks_only_its_own_modules(name, module):
  assert optional.module_for(name) == module


def test_the_table_names_jax_modules_only():
  assert all(m.startswith("jax.experimental.") for m in optional.MODULES)
  assert all(e[-1] in ".:_" or "::" in e for e, _ in optional.OPTIONAL_MODULES)
  with pytest.raises(ValueError, match="not one of JAX's optional modules"):
    optional.import_optional("os")


# Files that name what no entry covers, read in a fresh process.
READER = textwrap.dedent("""
    import json, sys
    import jaxpr_proto as jp
    from jaxpr_proto.codec import names
    before = set(sys.modules)
    out = {}
    for path in sys.argv[1:]:
      try:
        jp.loads(open(path, "rb").read())
        out[path] = None
      except jp.DecodeError as e:
        out[path] = [type(e).__name__, e.path, e.message]
    new = sorted(m for m in set(sys.modules) - before if not m.startswith("jaxpr_proto."))
    print(json.dumps({"out": out, "imported": names._optional_tried, "new": new}))
""")


def _renamed(namespace, name):
  m = jp.encode(jax.make_jaxpr(jnp.sin)(1.0))
  m.primitives[0].namespace, m.primitives[0].name = namespace, name
  return m.SerializeToString()


def _enum_renamed(type_name):
  m = jp.encode(jax.make_jaxpr(lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN))(1.0))
  v = next(p.value for p in m.params if p.value.WhichOneof("kind") == "enum")
  v.enum.type = type_name
  return m.SerializeToString()


HOSTILE = {
    "primitive_os": (_renamed("os", "system"), "UnknownPrimitiveError", "eqn[0]",
                     "unknown primitive os::system"),
    "primitive_evil": (_renamed("evil.module", "prim"), "UnknownPrimitiveError", "eqn[0]",
                       "unknown primitive evil.module::prim"),
    "primitive_jax": (_renamed("jax", "os.system"), "UnknownPrimitiveError", "eqn[0]",
                      "unknown primitive jax::os.system"),
    "enum_evil": (_enum_renamed("evil.module::RoundingMethod"), "DecodeError",
                  "eqn[0].params.rounding_method",
                  "enum type 'evil.module::RoundingMethod' is not allow-listed"),
    "enum_os": (_enum_renamed("os::system"), "DecodeError", "eqn[0].params.rounding_method",
                "enum type 'os::system' is not allow-listed"),
}


def test_names_outside_the_table_import_nothing(tmp_path):
  paths = {}
  for case, (data, *_) in HOSTILE.items():
    paths[case] = tmp_path / f"{case}.jaxpb"
    paths[case].write_bytes(data)
  got = run_json(READER, *paths.values())
  assert got["imported"] == {} and got["new"] == [], got
  for case, (_, kind, path, message) in HOSTILE.items():
    got_kind, got_path, got_message = got["out"][str(paths[case])]
    assert (got_kind, got_path) == (kind, path) and got_message.startswith(message), case


# Each entry of the table, in this JAX: its module imports and defines a name
# it covers, or this JAX lacks the module; and what JAX's experimental
# modules define beyond `import jax` is covered by the table.
TABLE_CHECK = textwrap.dedent("""
    import importlib, json, pkgutil, warnings
    warnings.simplefilter("ignore")
    import jax, jax.experimental
    import jaxpr_proto  # noqa: F401
    from jaxpr_proto.codec import names
    from jaxpr_proto.compat import optional

    def known():
      names.refresh()
      return ({f"{ns}::{n}" for ns, n in names.REGISTRY.all()} | set(names.ENUMS.names())
              | set(names.RECORDS.names()))
    base = known()
    missing = []
    for m in sorted(optional.MODULES):
      try:
        optional.import_optional(m)
      except ModuleNotFoundError as e:
        if e.name != m:
          raise
        missing.append(m)
    names_ = known()
    empty = [e for e, m in optional.OPTIONAL_MODULES if m not in missing and not any(
        optional.module_for(k) == m and (k == e or k.startswith(e) and e[-1] in ".:_")
        for k in names_)]
    experimental = ["jax.experimental." + m.name for m in pkgutil.iter_modules(
        jax.experimental.__path__) if m.name != "jax2tf"]
    for m in experimental:
      try:
        importlib.import_module(m)
      except Exception:
        pass
    uncovered = sorted(k for k in known() - base if optional.module_for(k) is None)
    print(json.dumps({"missing": missing, "empty": empty, "uncovered": uncovered}))
""")


def test_the_table_fits_this_jax():
  got = run_json(TABLE_CHECK)
  assert got["empty"] == [] and got["uncovered"] == [], got
  assert not {"jax.experimental.pallas", "jax.experimental.sparse"} & set(got["missing"])
