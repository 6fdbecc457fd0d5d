"""Every kind of file the library writes, for the CLI matrix
(tests/test_cli_matrix.py): FILE_KINDS lists them, `build_all` writes each
kind's file, a variant of it (one primitive, sin, made cos: what `diff`
must find) and the original function's outputs (`<kind>.expected.npz`, by
output path).

Most kinds are built in the test's process. Three are written by a child
process, because the reading process must lack what the writer had: named
callbacks (bound in the reader only by `--import`), unresolved names (a
primitive and a callback the reader never registers) and a callback saved
as pickled code.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import jaxpr_proto as jp
from jaxpr_proto.cli.import_target import import_module
from jaxpr_proto.wire import files
from tests.helpers import run_script

X = np.linspace(-1.0, 1.0, 3, dtype=np.float32)
Y = np.array([0.5, 2.0, -3.0], np.float32)

# A user's module: the functions `trace` writes the same files from.
USER_SRC = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    OP = jnp.sin  # the builders make the variant with jnp.cos
    BIG = np.linspace(0.0, 1.0, 300_000, dtype=np.float32)  # 1.2 MB: saved in a data file

    def arrays(x, y):
      return OP(x) * y, x + 1.0

    def external(x):
      return OP(x) * jnp.asarray(BIG).sum()

    def _kernel(x_ref, y_ref, o_ref):
      o_ref[...] = OP(x_ref[...]) + y_ref[...]

    def pallas(x, y):
      from jax.experimental import pallas as pl
      return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                            interpret=True)(x, y)
""")

# The module a user gives with --import to bind the callbacks of the file
# the child process writes (tracing its `callbacks`).
CALLBACKS_SRC = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import io_callback
    import jaxpr_proto as jp
    OP = jnp.sin

    @jp.register_callback(name="clitest.triple")
    def triple(x):
      return (np.asarray(x) * 3).astype(np.float32)

    @jp.register_callback(name="clitest.log")
    def log(x):
      pass

    def callbacks(x):
      y = jax.pure_callback(triple, jax.ShapeDtypeStruct(x.shape, x.dtype), OP(x))
      io_callback(log, None, y, ordered=True)
      return y + 1.0
""")

# The child writer: argv[1] is the folder (holding clitest_callbacks.py).
WRITER = textwrap.dedent("""
    import os, sys
    import numpy as np, jax, jax.numpy as jnp
    from jax.experimental import io_callback
    from jax.extend.core import Primitive
    from jax.interpreters import mlir
    import jaxpr_proto as jp
    d = sys.argv[1]
    sys.path.insert(0, d)
    import clitest_callbacks as cb
    x = np.linspace(-1.0, 1.0, 3, dtype=np.float32)

    triple = Primitive("triple_plus_one")  # a library the reader does not have
    triple.def_impl(lambda x: x * 3.0 + 1.0)
    triple.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(triple, mlir.lower_fun(lambda x: x * 3.0 + 1.0, multiple_results=False))
    jp.register_primitive(triple, namespace="otherlib")

    @jp.register_callback(name="otherlib.log")
    def log(x):
      pass

    OP = [jnp.sin]

    def unresolved(x):
      y = OP[0](triple.bind(x))
      io_callback(log, None, y, ordered=True)
      return y * 2.0

    def pickled(x):  # its callback unregistered: saved as code
      return jax.pure_callback(lambda v: np.asarray(v) * 2.0, jax.ShapeDtypeStruct(x.shape, x.dtype),
                               OP[0](x)) + 1.0

    def write(name, fn, mod, **kw):
      for suffix, op in (("", jnp.sin), ("_variant", jnp.cos)):
        mod.OP, OP[0] = op, op
        jax.clear_caches()  # (jit's trace of the function is cached)
        f = jp.trace(fn)(x)
        jp.save(f, os.path.join(d, name + suffix + ".jaxpb"), **kw)
        if not suffix:
          out = jax.jit(fn)(x)
          jax.effects_barrier()
          np.savez(os.path.join(d, name + ".expected.npz"), out=np.asarray(out))
          np.savez(os.path.join(d, name + ".inputs.npz"), x=x)
      mod.OP, OP[0] = jnp.sin, jnp.sin

    write("callbacks", cb.callbacks, cb)
    write("unresolved", unresolved, cb)
    write("pickled", pickled, cb, pickle_functions=True)
""")


@dataclasses.dataclass(frozen=True)
class Kind:
  name: str
  prims: tuple[str, ...]              # primitives `dump` and `info` show
  inputs: tuple[str, ...]             # input paths, in the inputs' (flat) order
  outputs: tuple[str, ...] = ("out",)  # output paths, in order
  static: tuple[str, ...] = ()        # the static leaves' lines in `dump` (spaces squeezed)
  function: bool = True               # a jp.Function (else a ClosedJaxpr)
  ext: str = ".jaxpb"
  imports: tuple[str, ...] = ()       # --import for the commands that decode
  fails: dict = dataclasses.field(default_factory=dict)  # command -> what its one line says
  diff_shows: str = "primitive sin -> cos"  # what `diff` of the file and its variant says
  trace: tuple[str, str] | None = None     # (MODULE:FUNCTION, --args) `trace` writes it from
  needs: str | None = None            # a module without which the kind is skipped
  data_file: bool = False             # the file has a data file beside it
  child: bool = False                 # written by the child process


# The commands that cannot do their job on a file whose names this process lacks.
_DECODING = ("check", "load", "run", "run_in_order", "convert_mlir", "convert_jaxexport",
             "convert_onnx")
_EXPORTS = ("convert_mlir", "convert_jaxexport")
_ARRAYS = ("{dir}/clitest_user.py:arrays", "f32[3],f32[3]")

FILE_KINDS = [
    Kind("closed_jaxpr", ("sin", "mul"), ("x", "y"), ("out_0", "out_1"), function=False),
    Kind("arrays", ("sin", "mul"), ("x", "y"), ("0", "1"), trace=_ARRAYS),
    Kind("dicts", ("sin", "reduce_sum"), ("p/b", "p/w", "batch/x", "lr"), ("grad/w", "loss")),
    Kind("lists", ("sin", "add"), ("xs/0", "xs/1", "xs/2/scale"), ("0", "1/0")),
    Kind("dataclass", ("sin", "add"), ("layer/w", "layer/b", "x"),
         fails={"convert_jaxexport": "register_pytree_node_serialization"}),
    Kind("equinox", ("logistic", "dot_general"),
         ("0/layers/0/weight", "0/layers/0/bias", "0/layers/1/weight", "0/layers/1/bias", "1"),
         static=("static 0/activation jax.nn.silu",), imports=("equinox",),
         diff_shows="+   static 0/activation jax.nn.relu", needs="equinox"),
    Kind("static", ("sin", "mul"), ("1",), static=("static 0 jax.numpy.sin", "static 2 2.5")),
    Kind("external", ("sin", "reduce_sum"), ("x",), data_file=True,
         trace=("{dir}/clitest_user.py:external", "f32[3]")),
    Kind("callbacks", ("pure_callback", "io_callback"), ("x",),
         imports=("{dir}/clitest_callbacks.py",), child=True,
         fails={**{c: "host callbacks" for c in _EXPORTS},
                "convert_onnx": "cannot convert the primitive"},
         trace=("{dir}/clitest_callbacks.py:callbacks", "f32[3]")),
    Kind("unresolved", ("triple_plus_one", "io_callback"), ("x",), child=True,
         fails={c: "otherlib" for c in _DECODING}),
    Kind("pickled", ("pure_callback", "sin"), ("x",), child=True,
         fails={c: "pickled code" for c in _DECODING}),
    Kind("pallas", ("pallas_call", "sin"), ("x", "y"),
         fails={"convert_onnx": "cannot convert the primitive 'pallas_call'"},
         trace=("{dir}/clitest_user.py:pallas", "f32[3],f32[3]"), needs="jax.experimental.pallas"),
    Kind("txtpb", ("sin", "mul"), ("x", "y"), ("0", "1"), ext=".txtpb", trace=_ARRAYS),
    Kind("json", ("sin", "mul"), ("x", "y"), ("0", "1"), ext=".json", trace=_ARRAYS),
    Kind("jaxpr", ("sin", "mul"), ("x", "y"), ("0", "1"), ext=".jaxpr", trace=_ARRAYS),
    Kind("external_jaxpr", ("sin", "reduce_sum"), ("x",), ext=".jaxpr", data_file=True,
         trace=("{dir}/clitest_user.py:external", "f32[3]")),
]
KINDS = {k.name: k for k in FILE_KINDS}


# --- the programs built here: (kind) -> (function traced, its arguments) ----------

@functools.partial(jax.tree_util.register_dataclass, data_fields=["w", "b"], meta_fields=[])
@dataclasses.dataclass
class Linear:
  w: jax.Array
  b: jax.Array


jp.register_pytree_node(Linear, "tests.cli_kinds.Linear")
OP = [jnp.sin]  # the variant's builders make it jnp.cos


def _dicts(p, batch, *, lr):
  loss = jnp.sum(OP[0](p["w"] * batch["x"]) + p["b"]) * lr
  return {"loss": loss, "grad": {"w": batch["x"] * lr}}


def _lists(xs):
  return OP[0](xs[0]) + xs[1], [xs[1] * xs[2]["scale"]]


def _dataclass(layer, x):
  return OP[0](layer.w * x) + layer.b


def _scaled(act, x, scale):
  return act(x) * scale


def _mlp_args(variant):
  import equinox as eqx
  m = eqx.nn.MLP(3, 2, 4, 1, activation=jax.nn.relu if variant else jax.nn.silu,
                 key=jax.random.key(0))
  return (lambda m, x: m(x)), (m, X)


def _in_process(kind, user, variant):
  """-> (the jp.Function or ClosedJaxpr to save, the function that gives the
  expected outputs, its arguments (args, kwargs))."""
  table = {
      "closed_jaxpr": lambda: (None, user.arrays, (X, Y), {}),
      "arrays": lambda: (jp.trace(user.arrays), None, (X, Y), {}),
      "txtpb": lambda: (jp.trace(user.arrays), None, (X, Y), {}),
      "json": lambda: (jp.trace(user.arrays), None, (X, Y), {}),
      "jaxpr": lambda: (jp.trace(user.arrays), None, (X, Y), {}),
      "external": lambda: (jp.trace(user.external), None, (X,), {}),
      "external_jaxpr": lambda: (jp.trace(user.external), None, (X,), {}),
      "pallas": lambda: (jp.trace(user.pallas), None, (X, Y), {}),
      "dicts": lambda: (jp.trace(_dicts), None, ({"b": Y, "w": X}, {"x": X * 2}),
                        {"lr": np.float32(0.5)}),
      "lists": lambda: (jp.trace(_lists), None, ([X, Y, {"scale": np.float32(3.0)}],), {}),
      "dataclass": lambda: (jp.trace(_dataclass), None, (Linear(X, Y), X * 3), {}),
      "static": lambda: (jp.trace(_scaled, filter=True), None, (OP[0], X, 2.5), {}),
      "equinox": lambda: (lambda fn, args: (jp.trace(fn, filter=True), None, args, {}))(
          *_mlp_args(variant)),
  }
  tracer, plain, args, kwargs = table[kind]()
  if tracer is None:
    return jax.make_jaxpr(plain)(*args), jax.jit(plain), args, kwargs
  f = tracer(*args, **kwargs)
  return f, f, args, kwargs


def _write_in_process(kind: Kind, d: str, user) -> None:
  form = files.form_of("f" + kind.ext)
  for suffix, op in (("", jnp.sin), ("_variant", jnp.cos)):
    user.OP, OP[0] = op, op
    jax.clear_caches()  # (jit's trace of the function is cached)
    try:
      program, call, args, kwargs = _in_process(kind.name, user, bool(suffix))
    finally:
      user.OP, OP[0] = jnp.sin, jnp.sin
      jax.clear_caches()
    jp.api.save_as(program, os.path.join(d, kind.name + suffix + kind.ext), form)
    if suffix:
      continue
    static = dict(getattr(program, "static_leaves", ()))
    inputs = [x for i, x in enumerate(jax.tree.leaves((args, kwargs))) if i not in static]
    assert len(inputs) == len(kind.inputs), (kind.name, len(inputs))
    outs = jax.tree.leaves(call(*args, **kwargs))
    assert len(outs) == len(kind.outputs), (kind.name, len(outs))
    np.savez(os.path.join(d, kind.name + ".inputs.npz"),
             **dict(zip(kind.inputs, map(np.asarray, inputs))))
    np.savez(os.path.join(d, kind.name + ".expected.npz"),
             **dict(zip(kind.outputs, map(np.asarray, outs))))


def build_all(d: str, kinds) -> None:
  """Writes every kind of `kinds` into the folder `d`, with its variant and
  expected outputs, and the user's modules."""
  with open(os.path.join(d, "clitest_user.py"), "w") as f:
    f.write(USER_SRC)
  with open(os.path.join(d, "clitest_callbacks.py"), "w") as f:
    f.write(CALLBACKS_SRC)
  if any(k.child for k in kinds):
    run_script(WRITER, d)
  user = import_module(os.path.join(d, "clitest_user.py"))
  for kind in kinds:
    if not kind.child:
      _write_in_process(kind, d, user)
