"""What the commands read: programs from files (with progress, and the file
named in errors), as a `Program` (its closed jaxpr, and the jp.Function's
signature where the file holds one)."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os

import jaxpr_proto
from jaxpr_proto.cli import signature
from jaxpr_proto.cli.progress import Progress
from jaxpr_proto.errors import DecodeError, Error
from jaxpr_proto.wire import external, files


@contextlib.contextmanager
def naming_file(path):
  """Attach `path` to a jp.Error, so that the message says which file."""
  try:
    yield
  except Error as e:
    e.file = path
    raise


@dataclasses.dataclass
class Program:
  """A decoded file: its closed jaxpr, and for a jp.Function file the
  Function and its signature. `unread_signature` says why an inspection
  (placeholders) showed a Function file without its signature."""
  module: object
  closed_jaxpr: object
  function: object = None
  unread_signature: str = ""

  @functools.cached_property
  def signature(self) -> signature.Signature | None:
    return None if self.function is None else signature.of(self.function)

  @property
  def value(self):
    """What jp.load gives for the file: the Function, or the ClosedJaxpr."""
    return self.function if self.function is not None else self.closed_jaxpr


def read_module(path, progress: Progress | None = None):
  """Any form (by extension) -> Module, by jaxpr_proto.wire.files.read_module."""
  with naming_file(path):
    if progress is not None:
      progress.stage(f"reading {os.path.basename(path)}")
    return files.read_module(path)


def decode(m, path, progress: Progress | None = None, unresolved: str = "error") -> Program:
  """Module (read from `path`) -> Program; `unresolved` as for jp.decode (the
  commands that only show a program take placeholders, and show a Function
  whose signature names pytree nodes or functions this process lacks by its
  closed jaxpr, saying so)."""
  with naming_file(path):
    if progress is not None:
      progress.stage(f"decoding {os.path.basename(path)}")
    source = external.Folder.beside(path)
    try:
      out = jaxpr_proto.decode(m, external=source, unresolved=unresolved)
    except DecodeError as e:
      if unresolved != "placeholder" or not e.path.startswith("function."):
        raise
      bare = type(m)()
      bare.CopyFrom(m)
      bare.ClearField("function")
      return Program(m, jaxpr_proto.decode(bare, external=source, unresolved=unresolved),
                     unread_signature=f"{e.message} (at {e.path})")
  if isinstance(out, jaxpr_proto.Function):
    return Program(m, out.closed_jaxpr, out)
  return Program(m, out)


def read_program(path, progress: Progress | None = None, unresolved: str = "error") -> Program:
  return decode(read_module(path, progress), path, progress, unresolved)
