"""checkify's errors: the pytree nodes and effects in its err_tree and
out_trees params, and its process-wide error codes."""
from __future__ import annotations

from jax._src import checkify as _checkify

CheckifyError = _checkify.Error
CHECKIFY_FILE = _checkify.__file__  # a JAX file: no user frame
CheckifyErrorEffect = _checkify.ErrorEffect
# The exception classes whose treedefs an Error's metadata holds, by name
# (BatchedError only exists while an Error is read).
CHECKIFY_EXCEPTIONS = {c.__name__: c for c in (
    _checkify.FailedCheckError, _checkify.NaNError, _checkify.OOBError,
    _checkify.DivisionByZeroError)}


def reserve_checkify_codes(largest: int) -> None:
  """Makes checkify's process-wide error codes, which key an Error's
  metadata, start after `largest`: a loaded program holds codes another
  process gave out, and a check that this process checkifies later must
  not take one of them."""
  import itertools
  first = _checkify.next_code()
  if first <= largest:
    _checkify.next_code = itertools.count(largest + 1).__next__
