"""Format versions and reader gating (TensorFlow-style producer / min-consumer).

Three kinds of version are in a file:

* `Module.format_version` (major.minor): the version of the *schema* the file
  needs. A reader accepts any minor of its own major, never gating on
  equality: a newer minor only adds fields, which an older reader skips. A
  file of another major is refused with a `VersionError`.
* `Module.required_features`: optional features a file uses that a reader
  must understand. A reader that lacks one refuses the file with a
  `VersionError` naming the features.
* `Module.namespaces`: one version per primitive namespace, like ONNX opsets.
  The `jax` namespace (and JAX's Pallas namespaces `jax.*`) carry the release
  of the JAX that wrote the file. Files of another JAX release are adapted by
  `jaxpr_proto.compat.upgrade`; a newer file that uses a primitive or param this
  JAX lacks fails on that primitive or param, with a `VersionError`.

Writers stamp the *minimum* format version that covers the features they used
(`required_version`), so that a file that needs nothing new stays readable by
older readers of the same major.
"""
from __future__ import annotations

from jaxpr_proto.errors import VersionError

FORMAT_MAJOR = 1
FORMAT_MINOR = 5

# Optional features this reader understands (Module.required_features), with
# the format minor that introduced each. A writer lists a feature in
# required_features only when the file really depends on it.
FEATURES: dict[str, int] = {
    # 1.1: EqnContext.fields (eqn-context fields of JAX >= 0.11). A 1.0
    # reader would drop them silently, so a file that has any requires this.
    "eqn_context_fields": 1,
    # 1.1: PartitionSpec.unreduced_kind other than "sum" (JAX >= 0.11).
    "unreduced_kind": 1,
    # 1.2: Array.external, the bytes of big arrays in a data file beside the
    # .jaxpb (or a pickle's out-of-band buffers). An older reader would
    # read such an array as empty.
    "external_data": 2,
    # 1.2: the optional `name` field of a jax::function extension (a HiJAX
    # primitive's function param, so that JAX prints it as the original).
    # A 1.1 reader refuses the field; this says why, and by name.
    "function_names": 2,
    # 1.3: host callbacks by name (the jax::callback extension of the
    # callback param of debug_callback, pure_callback and io_callback).
    "callbacks": 3,
    # 1.3: a callback saved as cloudpickled code (pickle_functions=True),
    # loaded only with trust_pickled_code=True.
    "pickled_code": 3,
    # 1.3: checkify's errors: Value.traceback (an Error's metadata) and
    # Effect.value (its error effects), in err_tree params and out_trees.
    "checkify": 3,
    # 1.3: Value.function, a function by the name the reader knows it by.
    "functions": 3,
    # 1.3: FunctionSignature.static_leaves (jp.trace(filter=True)).
    "static_leaves": 3,
    # 1.3: Pallas kernels (pallas_call's GridMapping, BlockMapping and refs, as extensions).
    "pallas": 3,
    # 1.3: Jaxpr.columns, the eqns of a jaxpr of many eqns in columns (an
    # older reader would read such a jaxpr as one without eqns).
    "eqn_columns": 3,
}
SUPPORTED_FEATURES: frozenset[str] = frozenset(FEATURES)

# The schema additions of each format minor after 1.0, as predicates on a
# Module: `required_version` stamps the smallest minor whose additions
# cover what the file uses. v1.0 is the first released schema; append here
# when a minor adds a field (and list the field).
MINOR_ADDITIONS: list[tuple[int, str, object]] = [
    # (minor, what was added, predicate(module) -> bool)
    (1, "Jaxpr.is_high", lambda m: any(j.is_high for j in m.jaxprs)),
    (1, "EqnContext.fields", lambda m: any(c.fields for c in m.contexts)),
    # Read as its dtype by a 1.0 reader: the program runs, and prints the dtype.
    (1, "DtypeValue.numpy_scalar_type", lambda m: any(
        p.value.WhichOneof("kind") == "dtype" and p.value.dtype.numpy_scalar_type for p in m.params)),
    # Read by a 1.2 reader as one jaxpr object shared by the entries: the
    # program runs the same, and prints the shared jaxpr once.
    (3, "ClosedJaxpr.own_jaxpr", lambda m: any(c.own_jaxpr for c in m.closed_jaxprs)),
    # Read by a 1.3 reader as one jaxpr object shared by the entries, as above.
    (4, "ClosedJaxpr.same_vars", lambda m: any(c.same_vars for c in m.closed_jaxprs)),
    # Read by a 1.4 reader as a rule whose fwd takes every input's tangent:
    # the program runs the same, and its derivatives too, but a derivative
    # with respect to a closed-over value is not refused as JAX refuses it.
    (5, "CustomVjpRule.closed_over_inputs", lambda m: any(
        r.vjp.closed_over_inputs for r in m.rules if r.WhichOneof("kind") == "vjp")),
]


def check_version(m) -> None:
  """Refuses a file of another major or one that needs unknown features."""
  v = m.format_version
  if v.major != FORMAT_MAJOR:
    if v.major > FORMAT_MAJOR:
      hint = (f"it was written by a newer jaxpr_proto for format {v.major}.x; "
              "upgrade jaxpr_proto to read it")
    elif v.major == 0 and v.minor == 0:
      hint = "the format version is missing: this is not a .jaxpb file, or it is damaged"
    else:
      hint = (f"format {v.major}.x is no longer read; load it with an older "
              "jaxpr_proto and save it again")
    raise VersionError(
        f"file has format version {v.major}.{v.minor}, this reader reads "
        f"{FORMAT_MAJOR}.x (up to {FORMAT_MAJOR}.{FORMAT_MINOR}); {hint}",
        "format_version")
  missing = [f for f in m.required_features if f not in SUPPORTED_FEATURES]
  if missing:
    raise VersionError(
        f"file needs features this reader lacks: {', '.join(sorted(set(missing)))} "
        f"(file format {v.major}.{v.minor}, reader {FORMAT_MAJOR}.{FORMAT_MINOR}); "
        "upgrade jaxpr_proto to read it",
        "required_features")


def required_version(m) -> tuple[int, int]:
  """The minimum format version that covers what `m` uses."""
  minor = 0
  for add_minor, _, uses in MINOR_ADDITIONS:
    if add_minor > minor and uses(m):
      minor = add_minor
  for f in m.required_features:
    minor = max(minor, FEATURES.get(f, minor))
  return FORMAT_MAJOR, minor


def stamp(m) -> None:
  """Sets m.format_version to the minimum version that covers what m uses."""
  m.format_version.major, m.format_version.minor = required_version(m)


def namespace_versions(m) -> dict[str, str]:
  """{namespace: version} of a Module (the last entry wins for duplicates)."""
  return {ns.namespace: ns.version for ns in m.namespaces}


def jax_version_of(m) -> str:
  """The JAX release that wrote `m`: the `jax` namespace's version, else the producer's."""
  for ns in m.namespaces:
    if ns.namespace == "jax" and ns.version:
      return ns.version
  return m.producer.jax_version
