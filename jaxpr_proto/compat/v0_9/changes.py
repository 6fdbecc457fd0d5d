"""What JAX 0.9 changed in its primitives: nothing that matters here, since it
is the oldest minor jaxpr_proto supports (see compat/upgrade.py)."""
from __future__ import annotations

from jaxpr_proto.compat.change import Change

SINCE = (0, 9, 0)
CHANGES: list[Change] = []
