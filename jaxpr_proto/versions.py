"""Format versions and reader gating (TensorFlow-style producer/min-consumer).

A reader accepts any minor of its own major. Writers stamp the *minimum*
version that covers what they used; a file that needs a newer major, or
names a feature this reader lacks, is refused with a VersionError.
"""
from __future__ import annotations

from jaxpr_proto.errors import VersionError

FORMAT_MAJOR = 1
FORMAT_MINOR = 0

# Optional features this reader understands (Module.required_features).
SUPPORTED_FEATURES: frozenset[str] = frozenset()


def check_version(m) -> None:
  v = m.format_version
  if v.major != FORMAT_MAJOR:
    newer = v.major > FORMAT_MAJOR
    raise VersionError(
        f"file has format version {v.major}.{v.minor}; this reader reads "
        f"{FORMAT_MAJOR}.x" + (" (upgrade jaxpr_proto)" if newer else ""),
        "format_version")
  missing = [f for f in m.required_features if f not in SUPPORTED_FEATURES]
  if missing:
    raise VersionError(
        f"file needs features this reader lacks: {', '.join(missing)} "
        f"(file version {v.major}.{v.minor}, reader {FORMAT_MAJOR}.{FORMAT_MINOR})",
        "required_features")
