"""The public entry points: encode/decode messages, dumps/loads bytes, save/load files."""
from __future__ import annotations

import os

from jaxpr_proto import compat, function
from jaxpr_proto.check import checker, loading
from jaxpr_proto.codec import encoder
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import external as _external
from jaxpr_proto.wire import files, jaxpr_text
from jaxpr_proto.wire.files import write_atomic


def encode(closed_jaxpr, *, debug_info: bool = True, out_of_line=None,
           pickle_functions: bool = False) -> pb.Module:
  """ClosedJaxpr (or jp.Function) -> jaxpr_proto.v1.Module message.

  `out_of_line` (a `jaxpr_proto.wire.external.Sink`, as `save` and pickling
  use) takes the bytes of big arrays; without one they are all in the message.
  `pickle_functions=True` stores a host callback that is not registered
  (`jp.register_callback`) as cloudpickled code: such a file loads only with
  `trust_pickled_code=True`, so only for files you trust.
  """
  if isinstance(closed_jaxpr, function.Function):
    return function.encode_function(closed_jaxpr, debug_info=debug_info, out_of_line=out_of_line,
                                    pickle_functions=pickle_functions)
  return encoder.encode(closed_jaxpr, debug_info=debug_info, out_of_line=out_of_line,
                        pickle_functions=pickle_functions)


def decode(module: pb.Module, *, typecheck: bool = True, external=None, callbacks=None,
           trust_pickled_code: bool = False, unresolved: str = "error"):
  """jaxpr_proto.v1.Module message -> ClosedJaxpr (a jp.Function if it has one).

  `typecheck=False` skips re-running JAX's type check of every eqn (about
  a quarter of a load of an MLP step); use it only for files you trust.
  `external` is where the arrays stored outside the message are: the folder
  of the .jaxpb (a path), or a `jaxpr_proto.wire.external.Source`.
  `callbacks` ({name: function}) binds the names of the host callbacks the
  program calls for this load, before those of `jp.register_callback`.
  `trust_pickled_code=True` unpickles callbacks saved as code
  (`pickle_functions=True`), which runs code from the file: only for files
  you trust. Without it such a file is refused (with unresolved="placeholder",
  such a callback is a placeholder), and nothing is unpickled.
  `unresolved="placeholder"` loads a file that names primitives or callbacks
  this process lacks (a library not installed, a newer JAX): such eqns print
  and diff as the original and raise jp.UnresolvedError, naming the eqn, if
  the program is run; the default refuses the file, naming what it lacks.
  """
  if not isinstance(module, pb.Module):
    raise TypeError(f"expected a jaxpr_proto.v1.Module, got {type(module).__name__}")
  external = _external.as_source(external)
  if module.HasField("function"):
    return function.decode_function(module, typecheck=typecheck, source=external,
                                    callbacks=callbacks, trust_pickled_code=trust_pickled_code,
                                    unresolved=unresolved)
  return loading.decode(module, typecheck=typecheck, source=external, callbacks=callbacks,
                        trust_pickled_code=trust_pickled_code, unresolved=unresolved)[1]


def parse(data):
  """The Module of a file's contents: `.jaxpb` bytes, or the text of a
  `.jaxpr` file (a str). Not yet checked: `decode` or `check` it."""
  if isinstance(data, str):
    return jaxpr_text.parse_module(data)
  return files.parse(data)


def format(x, *, debug_info: bool = True, inline_max: int = jaxpr_text.INLINE_MAX) -> str:
  """The jaxpr text of a ClosedJaxpr, jp.Function or Module (a `.jaxpr`
  file's contents, docs/text_syntax.md): it prints as JAX prints the jaxpr,
  with constants, params, source locations and custom rules in forms that
  `parse` reads back to the same Module. `debug_info=False` leaves out
  source locations, name stacks and debug info; arrays of more than
  `inline_max` elements are written as base64 (those that `save` puts in
  a data file, as references to it)."""
  if isinstance(x, pb.Module):
    return jaxpr_text.format_module(x, debug_info=debug_info, inline_max=inline_max)
  return jaxpr_text.format_module(encode(x, debug_info=debug_info), inline_max=inline_max)


def dumps(closed_jaxpr, *, debug_info: bool = True, pickle_functions: bool = False) -> bytes:
  """ClosedJaxpr -> .jaxpb bytes (deterministic serialization); see `encode`
  for `pickle_functions`."""
  return encode(closed_jaxpr, debug_info=debug_info,
                pickle_functions=pickle_functions).SerializeToString(deterministic=True)


def loads(data: bytes, *, typecheck: bool = True, callbacks=None,
          trust_pickled_code: bool = False, unresolved: str = "error"):
  """.jaxpb bytes, or the text of a .jaxpr file (a str), -> ClosedJaxpr (see
  `decode` for the options)."""
  return decode(parse(data), typecheck=typecheck, callbacks=callbacks,
                trust_pickled_code=trust_pickled_code, unresolved=unresolved)


def save(closed_jaxpr, path, *, debug_info: bool = True,
         external_min_bytes: int = _external.MIN_BYTES, pickle_functions: bool = False) -> None:
  """Writes a .jaxpb file atomically: temp file in the same folder, fsync, rename.
  The file's form is the one its extension names (`.jaxpr`: the program's
  text, see `format`; `.txtpb`, `.json`: protobuf's text and JSON forms;
  any other: .jaxpb bytes), and `load` reads each so.

  Arrays of `external_min_bytes` or more (1 MiB by default) go to one data
  file beside it, `<path>.data`, 64-byte aligned with a SHA-256 each, so that
  constants of any size save (a message cannot pass 2 GiB) and `load` maps
  them without a copy. A program without such arrays is one file.
  """
  save_as(closed_jaxpr, path, files.form_of(path), debug_info=debug_info,
          external_min_bytes=external_min_bytes, pickle_functions=pickle_functions)


def save_as(closed_jaxpr, path, form: str, *, debug_info: bool = True,
            external_min_bytes: int = _external.MIN_BYTES, pickle_functions: bool = False) -> int:
  """`save` in one of the file forms (files.BINARY, TEXT, JSON), the data
  file included; returns the size of the message's file. The data file is
  renamed into place first, then the message's file: a reader in between
  sees the old message with the new data, which its checksums refuse."""
  path = os.fspath(path)
  sink = _external.DataFile(path + _external.DATA_SUFFIX, external_min_bytes)
  try:
    data = files.to_bytes(encode(closed_jaxpr, debug_info=debug_info, out_of_line=sink,
                                 pickle_functions=pickle_functions), form)
  except BaseException:
    sink.discard()
    raise
  if sink.used:
    sink.commit()
  write_atomic(path, data)
  return len(data)


def load(path, *, typecheck: bool = True, verify: bool = True, callbacks=None,
         trust_pickled_code: bool = False, unresolved: str = "error"):
  """Reads a .jaxpb file -> ClosedJaxpr (see `decode` for `typecheck` and
  `callbacks`), in the form its extension names (see `save`).

  Arrays stored in a data file beside it are mapped read-only, not copied:
  the program's constants are views of the mapping. Their SHA-256 is checked
  here unless `verify=False` (then `jp.check(path)` checks them later).
  """
  with open(path, "rb") as f:
    data = f.read()
  m = files.from_bytes(data, files.form_of(path))
  return decode(m, typecheck=typecheck, external=_external.Folder.beside(path, verify),
                callbacks=callbacks, trust_pickled_code=trust_pickled_code,
                unresolved=unresolved)


def check(x, *, raise_on_error: bool = False, max_errors: int = 200,
          external=None, callbacks=None,
          trust_pickled_code: bool = False) -> checker.CheckReport:
  """Checks a .jaxpb: bytes, a Module, a file path (read in the form its
  extension names; a `.jaxpr` text that does not parse is a problem at its
  line and column), or a ClosedJaxpr / jp.Function (encoded first). Returns a CheckReport listing every problem as
  (path, message); with raise_on_error, raises a CheckError instead of
  returning a failed report. A file that cannot be read raises OSError.
  A file's external arrays are read from its folder (and their checksums
  checked); for bytes or a Module, from `external` (a folder, as `decode`).
  `callbacks` and `trust_pickled_code` as for `decode`: a callback name bound
  to nothing is an error, as is pickled code without trust_pickled_code."""
  if isinstance(x, (compat.ClosedJaxpr, function.Function)):
    x = encode(x)
  return checker.check(x, raise_on_error=raise_on_error, max_errors=max_errors,
                       source=_external.as_source(external), callbacks=callbacks,
                       trust_pickled_code=trust_pickled_code)


def clear_caches() -> None:
  """Empties jaxpr_proto's process-wide memos (JAX's type rule of an eqn, the
  verdicts on params and custom_jvp rules, the files that passed every
  check; the params and literal values decoded, the custom rules traced and
  tracebacks' user frames read), as `jax.clear_caches()` does JAX's caches:
  the next load checks and decodes everything afresh, the next `dumps`
  traces every rule."""
  compat.memo.clear_all()
