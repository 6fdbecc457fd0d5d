"""The wire layer: the file as bytes and messages, with no JAX in it.

* `jaxpr_proto/v1/` (beside this folder, where protoc puts it): the code
  generated from proto/jaxpr_proto/v1/*.proto, committed;
* `versions`: format versions, required features, reader gating;
* `files`: parsing `.jaxpb` bytes, atomic writes, the text and JSON forms;
* `info`: what a Module holds (sizes, counts, primitives), without decoding.
"""
