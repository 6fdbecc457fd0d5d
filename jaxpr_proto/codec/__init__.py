"""The codec: ClosedJaxpr <-> Module, with no validation beyond what building
the objects needs (JAX's type rules are applied by `jaxpr_proto.check`).

One module per kind of thing in a file, each with its encode and decode side
by side: `avals`, `dtypes`, `arrays`, `sharding` (meshes, specs, named
shardings), `effects`, `pytrees`, `tracebacks` (source info), `values` (the
generic value codec of params, constants and literals), `extensions` (values
that are neither plain data nor records, registered once for both
directions), `custom_rules` (custom_jvp/vjp/lin rules as jaxprs) and
`param_codecs` (the params that hold Python callables).

`names` is the one registry of what a file may name; `state` holds what one
encoding or decoding keeps (interned tables, path, depth); `encoder` and
`decoder` are the walks over a jaxpr and over a Module.

Decoding never looks up or calls a name taken from the file: every name is
looked up in `names`. It imports no module named in the file: only, where a
file names a primitive or type of JAX's optional modules (Pallas, sparse,
...), the module that `compat/optional.py`'s fixed table gives for it.
"""
