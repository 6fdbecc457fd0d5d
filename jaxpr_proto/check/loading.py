"""The one path by which a Module becomes a program: `jp.decode`, `jp.loads`,
`jp.load`, jp.Function files and the CLI all load through `decode`, which
runs the stages of `jp.check` (`checker.run`) and stops at the first error."""
from __future__ import annotations

from jaxpr_proto.check import checker
from jaxpr_proto.codec.state import paused_gc
from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb


class _RaiseFirst:
  """The `err` of checker.run for loading: raises the first problem, as the
  exception the stage found where there is one."""
  stage = ""
  count = 0

  def __call__(self, path: str, message: str, exception=None) -> None:
    raise exception if exception is not None else DecodeError(message, path)


def decode(m: pb.Module, *, typecheck: bool = True, source=None, callbacks=None,
           trust_pickled_code: bool = False, unresolved: str = "error"):
  """Module -> (its Decoder, the root ClosedJaxpr, the function's (in_tree,
  out_tree, static leaves) or None); raises a DecodeError naming the path of the first
  problem: the checks of `jp.check`, rules and function signature included.

  With `typecheck` (the default) each eqn is also checked by JAX's abstract
  evaluation: a file with the wrong number of operands or mismatched types is
  refused here rather than failing later, in JAX. Skip it only for files you
  trust. `source` (a wire.external.Source) has the bytes of the arrays stored
  outside the message. `callbacks` ({name: function}) binds host callbacks
  names for this load, before those registered with jp.register_callback.
  Only with `trust_pickled_code` is a callback saved as pickled code
  (`pickle_functions=True`) ever unpickled; without it the file is refused.
  With `unresolved="placeholder"`, an eqn whose primitive or callback this
  process lacks becomes a placeholder that raises UnresolvedError when run
  (the program is then checked structurally, not by JAX's type rules).
  """
  if unresolved not in ("error", "placeholder"):
    raise ValueError(f"unresolved must be 'error' or 'placeholder', not {unresolved!r}")
  with paused_gc():
    return checker.run(m, _RaiseFirst(), checker.CheckReport(), typecheck=typecheck,
                       source=source, callbacks=callbacks,
                       trust_pickled_code=trust_pickled_code,
                       placeholders=unresolved == "placeholder")
