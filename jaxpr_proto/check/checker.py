"""`jp.check`: a checker for .jaxpb files, like `onnx.checker`.

`check(x)` takes .jaxpb bytes, a `Module` message, a file path, or a
ClosedJaxpr / `jp.Function` (which it encodes first), and returns a
`CheckReport` whose `.errors` lists every problem found as `(path, message)`.
The paths are the decoder's: `eqn[12].params.branches[0].eqn[3]`, or a table
entry such as `avals[7]` for what the program does not reach.

It checks, in this order:

1. **structure**, on the message alone (no JAX): SSA (each variable defined
   once), define-before-use, every index into a table in range, no jaxpr that
   contains itself, nesting within the decoder's limits, and the program's
   size, each use of a shared sub-jaxpr counted, within what XLA compiles
   (`bounds`; no chain of dependent eqns is refused: docs/limits.md);
2. **params**: each eqn's params decode through their codec (the
   per-primitive codecs of `param_codecs`, else the allow-listed value
   codec), as do the avals, literals and constants; all errors are collected;
3. **versions**: the format version and required features
   (`versions.check_version`), the namespace versions, and the adaptation of
   each primitive and param to this JAX (`upgraders`);
4. **types**: JAX's abstract evaluation of each eqn of each jaxpr (the
   decoded program, and the custom differentiation rules' jaxprs, which
   decoding builds lazily) must give the stored output types
   (`jax.extend.core.check_jaxpr`), constants must match their variables,
   and custom_jvp/vjp calls must match their jaxpr's signature.

A stage runs only when the stages before it found nothing that would make it
meaningless: structure errors stop the check; params and versions both run;
types run when all three passed. A file of another format major is reported
as such and nothing else, since its structure is not this reader's.

Loading runs stage 4 too (`jaxpr_proto.check.decode`), so that it refuses
what the checker would reject; `check` reports all errors.
"""
from __future__ import annotations

import dataclasses
import os

from jaxpr_proto import compat
from jaxpr_proto.check import param_rules, rule_verdicts
from jaxpr_proto.check.bounds import check_bounds, check_tokens
from jaxpr_proto.check.signature import check_function
from jaxpr_proto.check.structure import Structure, check_namespaces
from jaxpr_proto.check.typecheck import iter_type_errors
from jaxpr_proto.codec import decoder as _decoder
from jaxpr_proto.errors import CheckError, DecodeError, Error, VersionError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import external, files, versions, walk

STAGES = ("structure", "params", "versions", "types", "function")


@dataclasses.dataclass
class CheckReport:
  """What `check` found. `errors` is a list of (path, message)."""
  errors: list[tuple[str, str]] = dataclasses.field(default_factory=list)
  stages: list[str] = dataclasses.field(default_factory=list)  # the stages that ran
  # The stage of each error, parallel to `errors`.
  error_stages: list[str] = dataclasses.field(default_factory=list)
  truncated: int = 0  # errors left out beyond max_errors

  @property
  def ok(self) -> bool:
    return not self.errors

  def __bool__(self) -> bool:
    return self.ok

  def by_stage(self, stage: str) -> list[tuple[str, str]]:
    return [e for e, s in zip(self.errors, self.error_stages) if s == stage]

  def format(self) -> str:
    if self.ok:
      return f"ok ({', '.join(self.stages)})"
    lines = [f"{len(self.errors) + self.truncated} error(s):"]
    for (path, msg), stage in zip(self.errors, self.error_stages):
      lines.append(f"  [{stage}] {path or '<module>'}: {msg}")
    if self.truncated:
      lines.append(f"  ... and {self.truncated} more")
    return "\n".join(lines)

  __str__ = format

  def raise_on_error(self) -> None:
    if not self.ok:
      first_path = self.errors[0][0]
      raise CheckError(self.format(), first_path, self.errors)


class _Collector:

  def __init__(self, report: CheckReport, max_errors: int):
    self.report, self.max_errors = report, max_errors
    self.stage = ""
    self._seen: set[tuple[str, str]] = set()
    self.count = 0

  def __call__(self, path: str, message: str, exception=None) -> None:
    key = (path, message)
    if key in self._seen:
      return
    self._seen.add(key)
    self.count += 1
    if len(self.report.errors) >= self.max_errors:
      self.report.truncated += 1
      return
    self.report.errors.append(key)
    self.report.error_stages.append(self.stage)


def check(x, *, raise_on_error: bool = False, max_errors: int = 200,
          source=None, callbacks=None, trust_pickled_code: bool = False,
          placeholders: bool = False) -> CheckReport:
  """Checks a .jaxpb (bytes, Module or file path; a `.jaxpr` path is read as
  its text, one that does not parse reported with its line and column, at
  the structure stage); `jp.check` also takes a
  ClosedJaxpr or jp.Function, which it encodes first. The arrays a file
  stores outside its message are read (and their checksums checked) from
  its folder; for bytes or a Module, from `source` (a wire.external.Source).

  Returns a CheckReport; with raise_on_error, raises a CheckError (a
  DecodeError) listing all errors instead of returning a failed report.
  A file that cannot be read raises OSError, as `open` does.
  """
  report = CheckReport()
  err = _Collector(report, max_errors)
  if isinstance(x, (str, os.PathLike)):
    source = external.Folder.beside(x)
  m = _as_module(x, err)
  if m is not None:
    run(m, err, report, source=source, callbacks=callbacks,
        trust_pickled_code=trust_pickled_code, placeholders=placeholders)
  if raise_on_error:
    report.raise_on_error()
  return report


def _as_module(x, err):
  if isinstance(x, pb.Module):
    return x
  form = files.BINARY
  if isinstance(x, (str, os.PathLike)):
    form = files.form_of(x)  # (a .jaxpr text that does not parse: at its line and column)
    with open(x, "rb") as f:
      x = f.read()
  if isinstance(x, (bytes, bytearray, memoryview)):
    err.stage = "structure"
    try:
      return files.from_bytes(x, form)
    except DecodeError as e:
      err(e.path, e.message)
      return None
  raise TypeError(f"cannot check a {type(x).__name__}: expected .jaxpb bytes, a Module, "
                  "a file path or a ClosedJaxpr")


def _check_versions(m, err, report) -> None:
  err.stage = "versions"
  report.stages.append("versions")
  try:
    versions.check_version(m)
  except VersionError as e:
    err(e.path, e.message, e)


def run(m, err, report, *, typecheck: bool = True, source=None, callbacks=None,
        trust_pickled_code: bool = False, placeholders: bool = False):
  """The stages, in order, reporting each problem to `err(path, message,
  exception=None)`: `check` collects them all; every loader
  (`loading.decode`) passes an `err` that raises the first. Returns (the
  decoder, the root ClosedJaxpr, the function's (in_tree, out_tree, static leaves) or
  None), or None where a stage stopped the run."""
  # A file of another major has another structure: say only that.
  if m.format_version.major != versions.FORMAT_MAJOR:
    _check_versions(m, err, report)
    return None

  err.stage = "structure"
  report.stages.append("structure")
  before = err.count
  st = Structure(m, err)
  st.run()
  if err.count == before:
    check_bounds(st, err)
    check_tokens(st, err)
  if err.count > before:
    return None

  err.stage = "params"
  report.stages.append("params")
  dec = _CheckingDecoder(m, err, source, callbacks, trust_pickled_code, placeholders)
  dec.columns = st.columns
  params_before = err.count
  root = dec.decode_all()
  dec.columns = {}  # (what decoding has not used; the decoder outlives the load)
  if root is not None and err.count == params_before and not dec.version_errors:
    traced = rule_verdicts.prefill(dec)  # (rules whose jaxpr shows them linear: not traced)
    try:
      for path, message, is_version in param_rules.errors(dec):
        if is_version:  # told in the versions stage
          dec.version_errors.append((path, message, VersionError(message, path)))
        else:
          err(path, message)
    finally:  # (a refusal too: loading raises the first error)
      rule_verdicts.keep(traced)
  dec.state.calls.clear()  # (the groups of eqns served the param checks only)

  _check_versions(m, err, report)
  check_namespaces(m, err)
  for path, message, e in dec.version_errors:
    err(path, message, e)
  if err.count > params_before or root is None:
    return None

  if typecheck:
    err.stage = "types"
    report.stages.append("types")
    for path, message, is_version in iter_type_errors(dec):
      err(path, message, VersionError(message, path) if is_version else None)
  typed = err.count == params_before
  trees = None
  err.stage = "function"  # the signature is checked against the decoded types
  report.stages.append("function")
  if m.HasField("function"):
    trees = check_function(m, dec, root, err)
    if trees is None:
      return None
  return (dec, root, trees) if typed else None


# --- 2. params, and what else decoding builds -------------------------------------

class _Bad:
  """Stands in for a value that failed to decode, so that checking goes on."""

  def __repr__(self):
    return "<undecodable>"


_BAD = _Bad()


class _VersionCollector:
  """Wraps the decoder's Upgrader: records its VersionErrors and goes on."""

  def __init__(self, upgrader, sink):
    self._u, self._sink = upgrader, sink

  def __bool__(self):
    return bool(self._u)

  def __getattr__(self, name):
    return getattr(self._u, name)

  def params(self, prim_name, params, path):
    try:
      return self._u.params(prim_name, params, path)
    except VersionError as e:
      self._sink.append((e.path, e.message, e))
      return params


class _CheckingDecoder(_decoder.Decoder):
  """A Decoder that records errors in params, avals, literals and constants
  and goes on, so that one pass finds them all."""

  def __init__(self, m, err, source=None, callbacks=None, trust_pickled_code=False,
               placeholders=False):
    super().__init__(m, source, callbacks, trust_pickled_code, placeholders)
    self._err = err
    self.version_errors: list[tuple[str, str]] = []
    if self.upgrader:
      self.upgrader = _VersionCollector(self.upgrader, self.version_errors)
    self._failed_params: set[tuple] = set()
    self._placeholder_aval = None

  def param(self, i, prim_name, path):
    try:
      return super().param(i, prim_name, path)
    except Error as e:
      key = (i, prim_name)
      if key not in self._failed_params:
        self._failed_params.add(key)
        self._record(e)
      return (self.m.params[i].name, _BAD)

  def _record(self, e: Error) -> None:
    if isinstance(e, VersionError):
      self.version_errors.append((e.path, e.message, e))
    else:
      self._err(e.path, e.message, e)

  def primitive(self, i, path):
    try:
      return super().primitive(i, path)
    except Error as e:
      self._record(e)
      self.state.decoded["primitives"][i] = p = compat.Primitive(f"<unknown primitive {i}>")
      return p

  def aval(self, i, path):
    try:
      return super().aval(i, path)
    except Error as e:
      self._record(e)
      self.state.decoded["avals"][i] = a = self._placeholder()
      return a

  def _placeholder(self):
    if self._placeholder_aval is None:
      import numpy as np
      self._placeholder_aval = compat.ShapedArray((), np.dtype("float32"))
    return self._placeholder_aval

  def literal(self, msg, aval, path):
    try:
      return super().literal(msg, aval, path)
    except Error as e:
      self._record(e)
      return 0

  def const(self, msg, aval, path):
    try:
      return super().const(msg, aval, path)
    except Error as e:
      self._record(e)
      return 0

  def decode_all(self):
    """Decodes the root, the function signature's avals and every rule's
    jaxprs; returns the root ClosedJaxpr, or None after an error that stopped it."""
    m = self.m
    try:
      root = self.closed_jaxpr(m.root, "")
    except Error as e:
      self._record(e)
      return None
    except RecursionError:
      self._err(self.state.where, "structure nested too deeply")
      return None
    except Exception as e:  # a gap in the decoder's checks or a bug: still reported
      ie = _decoder.internal_error(e, self.state.where)
      self._err(ie.path, ie.message, ie)
      return None
    for i, kind, f, j in walk.rule_jaxprs(m):  # decoded lazily on load; here now
      where = f"rules[{i}].{kind}.{f}"
      try:
        self.closed_jaxpr(j, where)
      except Error as e:
        self._record(e)
      except Exception as e:
        ie = _decoder.internal_error(e, where)
        self._err(ie.path, ie.message, ie)
    return root
