"""The codec: ClosedJaxpr <-> Module, with no validation beyond what building
the objects needs (JAX's type rules are applied by `jaxpr_proto.check`).

* `names`: the registry of primitive names;
* `dtypes`, `values` (the allow-lists of param types, arrays, meshes and
  shardings, effects), `pytrees`, `tracebacks` (source info),
  `custom_rules`, `param_codecs` (per-primitive params and extensions):
  one module per kind of thing in a file;
* `encoder` and `decoder`: the walks over a jaxpr and a Module.

Decoding never imports a module and never looks up or calls a name taken
from the file: every name is looked up in these modules' tables.
"""
