"""Files that name what the reading process lacks (a library's primitive, a
host callback): refused by default, naming each; with
unresolved="placeholder", a program that prints, checks structurally and
diffs as the original, and raises jp.UnresolvedError naming the eqn when run."""
from __future__ import annotations

import re
import textwrap

import pytest

from tests.helpers import run_json, run_script

WRITER = textwrap.dedent("""
    import sys
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import io_callback
    from jax.extend.core import Primitive
    from jax.interpreters import mlir
    import jaxpr_proto as jp

    triple = Primitive("triple_plus_one")  # a library's primitive
    triple.def_impl(lambda x: x * 3.0 + 1.0)
    triple.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(triple, mlir.lower_fun(lambda x: x * 3.0 + 1.0, multiple_results=False))
    jp.register_primitive(triple, namespace="mylib")

    @jp.register_callback(name="mylib.log")
    def log(x):
      print(x)

    def program(x):
      y = jnp.sin(triple.bind(jnp.cos(x)))
      io_callback(log, None, y, ordered=True)
      return y * 2

    cj = jax.make_jaxpr(program)(np.arange(3, dtype=np.float32))
    jp.save(cj, sys.argv[1])
    print(str(cj))
""")

READER = textwrap.dedent("""
    import sys, json
    import numpy as np, jax
    import jaxpr_proto as jp
    out = {}
    try:
      jp.load(sys.argv[1])
    except jp.DecodeError as e:
      out["strict"] = [type(e).__name__, e.path, e.message]
    cj = jp.load(sys.argv[1], unresolved="placeholder")
    out["text"] = str(cj)
    out["check"] = [list(e) for e in jp.check(sys.argv[1]).errors]
    try:
      jax.jit(jax.extend.core.jaxpr_as_fun(cj))(np.ones(3, np.float32))
    except jp.UnresolvedError as e:
      out["run"] = [e.path, e.message]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  path = tmp_path_factory.mktemp("unresolved") / "program.jaxpb"
  text = run_script(WRITER, path)
  return path, text.strip()


def _norm(s):
  return " ".join(s.split())


def test_strict_by_default(written):
  path, _ = written
  got = run_json(READER, path)
  kind, where, message = got["strict"]
  assert kind == "UnknownPrimitiveError" and where == "eqn[1]"
  assert "mylib::triple_plus_one" in message and "register_primitive" in message
  assert got["check"] and "mylib::triple_plus_one" in got["check"][0][1]


def test_placeholders_print_as_the_original_and_refuse_to_run(written):
  path, want_text = written
  got = run_json(READER, path)
  # Printed as the original (less the addresses of the callback).
  strip = lambda s: _norm(s.split("io_callback")[0])
  assert strip(got["text"]) == strip(want_text)
  assert "triple_plus_one" in got["text"] and "io_callback" in got["text"]
  where, message = got["run"]
  assert where == "eqn[1]" and "mylib::triple_plus_one" in message
  assert "unresolved='placeholder'" in message


def test_unbound_callback_placeholder(tmp_path):
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.experimental import io_callback

  import jaxpr_proto as jp
  from jaxpr_proto.codec import names

  def log(x):
    pass
  names.CALLBACKS.add("tests.placeholder_log", log, replace=True)
  cj = jax.make_jaxpr(lambda x: (io_callback(log, None, x, ordered=True), x * 2)[1])(jnp.ones(2))
  data = jp.dumps(cj)
  names.CALLBACKS.add("tests.placeholder_log", lambda x: None, replace=True)
  del names.CALLBACKS._objects["tests.placeholder_log"]  # as in a process without it
  with pytest.raises(jp.DecodeError, match="callback 'tests.placeholder_log' is not registered"):
    jp.loads(data)
  cj2 = jp.loads(data, unresolved="placeholder")
  assert "io_callback" in str(cj2) and "unresolved callback tests.placeholder_log" in str(cj2)
  with pytest.raises(jp.UnresolvedError, match=r"eqn\[0\]: callback 'tests.placeholder_log' "
                                               "is not bound"):
    jax.jit(jax.extend.core.jaxpr_as_fun(cj2))(jnp.ones(2))
  # A function bound for the load resolves it.
  seen = []
  cj3 = jp.loads(data, callbacks={"tests.placeholder_log": seen.append})
  np.testing.assert_array_equal(jax.jit(jax.extend.core.jaxpr_as_fun(cj3))(jnp.ones(2))[0],
                                np.full(2, 2.0, np.float32))
  jax.effects_barrier()
  assert len(seen) == 1
  with pytest.raises(ValueError, match="unresolved must be"):
    jp.loads(data, unresolved="ignore")
  # The rest of the program is still type-checked: a placeholder takes its
  # stored types, and a wrong type elsewhere is refused.
  m = jp.parse(data)
  root = m.jaxprs[m.closed_jaxprs[m.root].jaxpr]
  mul = next(e for e in root.eqns if m.primitives[e.primitive].name == "mul")
  m.avals.add().shaped_array.CopyFrom(m.avals[mul.outvars[0].var.aval].shaped_array)
  m.avals[-1].shaped_array.shape[0].constant = 5
  mul.outvars[0].var.aval = len(m.avals) - 1
  with pytest.raises(jp.DecodeError, match=r"eqn\[1\]"):
    jp.loads(m.SerializeToString(), unresolved="placeholder")


CLI = textwrap.dedent("""
    import sys, json, io, contextlib
    from jaxpr_proto.cli import commands
    out = {}
    for argv in (["dump", sys.argv[1]], ["check", sys.argv[1]], ["check", "--structure", sys.argv[1]],
                 ["diff", sys.argv[1], sys.argv[1]], ["info", sys.argv[1]]):
      o, e = io.StringIO(), io.StringIO()
      with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
          code = commands.main(argv)
        except SystemExit as x:
          code = x.code
      out[" ".join(argv[:2]).replace(sys.argv[1], "F")] = [code, o.getvalue(), e.getvalue()]
    print(json.dumps(out))
""")


def test_cli_shows_what_it_cannot_run(written):
  """dump, diff and check --structure take placeholders; check does not."""
  path, want_text = written
  got = run_json(CLI, path)
  code, out, _ = got["dump F"]
  assert code == 0 and "triple_plus_one" in out and "io_callback" in out
  code, out, err = got["check F"]
  assert code == 1 and "mylib::triple_plus_one" in err
  code, out, err = got["check --structure"]
  assert code == 0 and "ok" in out, err
  assert got["diff F"][0] == 0
  assert got["info F"][0] == 0 and "mylib" in got["info F"][1]


# --- callbacks saved as pickled code: placeholders, never unpickled -------------------

# A module that exists only in the test's folder: importing it, which
# unpickling either callback would do, appends to a marker file beside it.
SIDE_EFFECT_MODULE = textwrap.dedent("""
    import os
    with open(os.path.join(os.path.dirname(__file__), "imported.txt"), "a") as f:
      f.write("imported\\n")
    def double(x):
      return x * 2
""")

PICKLED_WRITER = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, os.path.dirname(sys.argv[1]))
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import io_callback
    import jaxpr_proto as jp
    import sidefx_mod

    def program(x):
      f32 = jax.ShapeDtypeStruct(x.shape, x.dtype)
      y = jax.pure_callback(lambda x: sidefx_mod.double(x) + 1, f32, x)
      z = io_callback(sidefx_mod.double, f32, y, ordered=True)
      return jnp.sin(z)

    cj = jax.make_jaxpr(program)(np.arange(3, dtype=np.float32))
    jp.save(cj, sys.argv[1], pickle_functions=True)
    os.remove(os.path.join(os.path.dirname(sys.argv[1]), "imported.txt"))  # (this import's)
    out = jax.jit(program)(np.arange(3, dtype=np.float32))
    print(json.dumps({"text": str(cj), "out": np.asarray(out).tolist()}))
""")

PICKLED_READER = textwrap.dedent("""
    import os, sys, json
    folder = os.path.dirname(sys.argv[1])
    sys.path.insert(0, folder)  # sidefx_mod importable: unpickling would import it
    marker = os.path.join(folder, "imported.txt")
    import numpy as np, jax
    import jaxpr_proto as jp
    from jaxpr_proto.check import checker
    from jaxpr_proto.cli import jaxpr_diff
    out = {}
    try:
      jp.load(sys.argv[1])
    except jp.DecodeError as e:
      out["strict"] = [e.path, e.message]
    cj = jp.load(sys.argv[1], unresolved="placeholder")
    out["text"] = str(cj)
    out["structure"] = [list(e) for e in checker.check(sys.argv[1], placeholders=True).errors]
    out["diff"] = jaxpr_diff.diff(cj, jp.load(sys.argv[1], unresolved="placeholder")).same
    f = jax.extend.core.jaxpr_as_fun(cj)
    for how, call in (("eager", f), ("jit", jax.jit(f))):
      try:
        call(np.ones(3, np.float32))
      except jp.UnresolvedError as e:
        out[how] = [e.path, e.message]
    out["imported"] = os.path.exists(marker)
    if sys.argv[2:] == ["trust"]:  # (the control: unpickling does import the module)
      cj = jp.load(sys.argv[1], trust_pickled_code=True)
      out["trusted"] = np.asarray(jax.jit(jax.extend.core.jaxpr_as_fun(cj))(
          np.arange(3, dtype=np.float32))[0]).tolist()
      out["imported_trusted"] = os.path.exists(marker)
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def pickled(tmp_path_factory):
  folder = tmp_path_factory.mktemp("pickled")
  (folder / "sidefx_mod.py").write_text(SIDE_EFFECT_MODULE)
  path = folder / "program.jaxpb"
  wrote = run_json(PICKLED_WRITER, path)
  assert not (folder / "imported.txt").exists()
  return path, wrote


def test_pickled_callbacks_open_as_placeholders_without_unpickling(pickled):
  path, wrote = pickled
  want_text = wrote["text"]
  got = run_json(PICKLED_READER, path)
  assert got["imported"] is False  # nothing of the file's code was unpickled
  where, message = got["strict"]  # refused by default, saying how to open it
  assert where == "eqn[0].params.callback"
  assert "pickled code" in message and "trust_pickled_code=True" in message
  assert "unresolved='placeholder'" in message
  # Printed as the original but for the callbacks' functions, which say
  # what they were and that they were not unpickled.
  funcs = re.compile(r"callback_func=(<.*?>), in_tree=")
  assert funcs.sub("F", got["text"]) == funcs.sub("F", want_text)
  assert funcs.findall(got["text"]) == [
      "<pickled callback __main__.program.<locals>.<lambda>, not unpickled>",
      "<pickled callback sidefx_mod.double, not unpickled>"]
  assert got["structure"] == [] and got["diff"] is True
  for how in ("eager", "jit"):
    where, message = got[how]
    assert where == "eqn[0]" and "__main__.program.<locals>.<lambda>" in message
    assert "was not unpickled" in message and "unresolved='placeholder'" in message


def test_pickled_callbacks_run_when_trusted(pickled):
  """The control of the test above: a trusting load unpickles, which
  imports the module, and the program runs as the original."""
  path, wrote = pickled
  got = run_json(PICKLED_READER, path, "trust")
  assert got["imported"] is False and got["imported_trusted"] is True
  assert got["trusted"] == wrote["out"]  # (floats through JSON: bit for bit)
  (path.parent / "imported.txt").unlink()
