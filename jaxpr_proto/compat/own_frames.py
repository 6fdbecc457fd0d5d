"""jaxpr_proto's own frames, registered with JAX as not the user's (importing
this module registers them)."""
from __future__ import annotations

import os

from jax._src import source_info_util

# jaxpr_proto's own frames (where it traces a custom rule or a function for
# the user) are not the user's: files would hold this package's line numbers.
# Its cli/ is: the demo's model is a user program.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _entry in sorted(os.listdir(_PACKAGE)):
  if _entry != "cli" and (_entry.endswith(".py") or os.path.isdir(os.path.join(_PACKAGE, _entry))):
    source_info_util.register_exclusion(
        os.path.join(_PACKAGE, _entry) + ("" if _entry.endswith(".py") else os.sep))


def user_frame_rules() -> tuple[int, int] | None:
  """What decides which frames are the user's (`user_frames`): the paths JAX
  excludes and includes, lists that only grow, as their lengths; None where
  this JAX keeps them otherwise."""
  try:
    return len(source_info_util._exclude_paths), len(source_info_util._include_paths)
  except (AttributeError, TypeError):
    return None
