"""What a file names that this process lacks (unresolved="placeholder"):
stand-ins for a primitive and for a host callback."""
from __future__ import annotations

from jax._src import core

from jaxpr_proto.errors import UnresolvedError


class UnresolvedPrimitive(core.Primitive):
  """Stands in a loaded program for an eqn whose primitive, or whose host
  callback, the reading process does not have: the program prints, checks
  structurally and diffs as the original; binding it (running, tracing,
  transforming the program) raises UnresolvedError naming the eqn."""
  multiple_results = True

  def __init__(self, name: str, why: str, path: str = "", outvars=(), effects=frozenset()):
    super().__init__(name)
    self.why, self.path = why, path
    # JAX's type check takes the eqn's stored output types and effects: the
    # rest of the program is still checked.
    out = [v.aval for v in outvars]
    self.abstract_eval = lambda *args, **params: (list(out), set(effects))

  def bind(self, *args, **params):
    raise UnresolvedError(f"{self.why}; the program was loaded with placeholders "
                          "(unresolved='placeholder') and cannot run this eqn", self.path)


class UnresolvedCallback:
  """A host callback this process does not run: a name bound to nothing, or
  pickled code that was not unpickled. `why` says which; `shown` is how it
  prints."""

  def __init__(self, name: str, why: str | None = None, shown: str | None = None):
    self.name = name
    self.why = why or f"callback {name!r} is not bound in this process"
    self.shown = shown or f"unresolved callback {name}"

  def __call__(self, *args, **kwargs):
    raise UnresolvedError(self.why)

  def __repr__(self):
    return f"<{self.shown}>"
