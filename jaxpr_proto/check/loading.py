"""The one path by which a Module becomes a program: `jp.decode`, `jp.loads`,
`jp.load`, jp.Function files and the CLI all load through `decode`, which
`jp.check` shares stage for stage (see `checker`)."""
from __future__ import annotations

from jaxpr_proto.check import typecheck as _typecheck
from jaxpr_proto.codec import decoder
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def decode(m: pb.Module, *, typecheck: bool = True):
  """Module -> (its Decoder, the root ClosedJaxpr); raises a DecodeError
  naming the path of the first problem.

  With `typecheck` (the default) each eqn is also checked by JAX's abstract
  evaluation: a file with the wrong number of operands or mismatched types is
  refused here rather than failing later, in JAX. Skip it only for files you
  trust.
  """
  dec, cj = decoder.decode(m)
  if typecheck:
    with decoder.refusing(lambda: dec.state.where):
      _typecheck.raise_first_type_error(dec)
  return dec, cj
