"""What one JAX minor changed in its primitives: the `Change` record that each
minor's `changes.py` lists, and the helpers those lists share."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

Version = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Change:
  """One change of a primitive in JAX release `since`."""
  since: Version
  primitive: str       # the primitive's name as of `since`
  kind: str            # add_param | remove_param | rename_param | convert_param | rename_primitive | rewrite
  param: str = ""      # the param (the old name, for rename_param)
  new: str = ""        # the new name (rename_param, rename_primitive)
  # add_param: the value that means "as before" (a callable gets the params);
  # remove_param: the value to restore when downgrading.
  default: Any = None
  # convert_param/rename_param: old value -> new value (and back);
  # rewrite: changes the params dict in place, old form -> new form (and back).
  up: Callable | None = None
  down: Callable | None = None
  note: str = ""


def same_value(a, b) -> bool:
  """a == b, of the same type (a param or field that holds its default)."""
  try:
    return bool(a == b) and type(a) is type(b)
  except Exception:
    return False


def not_convertible(what: str) -> Callable[[dict], None]:
  """A `rewrite`'s up or down for a change that params alone cannot undo (an
  operand that became a param): a file across it is refused, saying so."""
  def refuse(params: dict) -> None:
    from jaxpr_proto.errors import VersionError
    raise VersionError(f"{what}: a file across this change cannot be converted")
  return refuse
