"""The exceptions of jaxpr_proto. Every message says what went wrong and where."""
from __future__ import annotations


class Error(Exception):
  """Base class of all jaxpr_proto errors."""

  def __init__(self, message: str, path: str = ""):
    self.message = message
    self.path = path
    super().__init__(f"{path}: {message}" if path else message)


class EncodeError(Error, ValueError):
  """A program could not be written (an unsupported param type, primitive, ...)."""


class DecodeError(Error, ValueError):
  """A file could not be read: malformed, inconsistent or unsupported."""


class UnknownPrimitiveError(DecodeError):
  """A file names a primitive that this process does not know."""


class VersionError(DecodeError):
  """A file needs a newer reader (format major or features)."""


class PrimitiveVersionError(UnknownPrimitiveError, VersionError):
  """A file of a newer JAX names a primitive that this JAX lacks."""


class InternalError(DecodeError):
  """jaxpr_proto failed in a way its checks did not foresee: a bug, or a JAX
  change that its adapter does not know. Not a verdict on the file."""


class UnresolvedError(Error, RuntimeError):
  """A program loaded with `unresolved="placeholder"` was run (or traced)
  through an eqn whose primitive or callback this process does not have."""


class RuleNotSavedError(Error, NotImplementedError):
  """A loaded program was transformed where it needs a rule that the file
  does not hold: custom_vmap's batching rule, a Python function of the batch
  size (vmap of the loaded program raises this, naming the rule)."""


class IsolatedRunError(Error, RuntimeError):
  """The program failed in its process: JAX or XLA raised (`.kind` is the
  exception's type name), the process died (`.signal`, for instance SIGABRT
  from a failed CHECK in XLA; `.stderr` holds the end of what it wrote) or
  ran past `timeout` (`.timed_out`)."""

  def __init__(self, message, *, kind=None, signal=None, returncode=None, timed_out=False,
               stderr=""):
    super().__init__(message)
    self.kind, self.signal, self.returncode = kind, signal, returncode
    self.timed_out, self.stderr = timed_out, stderr


class UnsupportedJaxError(Error, ImportError):
  """The running JAX has no adapter in this jaxpr_proto (raised on import)."""


class CheckError(DecodeError):
  """`jp.check(..., raise_on_error=True)` found errors; `.errors` lists them as (path, message)."""

  def __init__(self, message: str, path: str = "", errors=()):
    super().__init__(message, path)
    self.errors = list(errors)
