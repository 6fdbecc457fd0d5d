"""Every use of JAX internals (`jax._src`) lives in this package; the rest of
jaxpr_proto imports JAX objects from here (`from jaxpr_proto import _jax`).

* `common.py`: what all supported JAX minors share;
* `v0_<minor>.py`: one small adapter per JAX minor, which starts from
  `common` (0.9, 0.10) or from the previous minor's adapter (0.11 on) and
  redefines what that minor changed;
* `_version.py`: the table of adapters.

Importing this package picks the adapter of the running JAX, and refuses a JAX
without one. docs/new_jax_minor.md says how to add a JAX minor.
"""
from __future__ import annotations

import importlib
import os
import sys
import warnings

import jax

from jaxpr_proto._jax._version import (ADAPTERS, INSTALLABLE, fmt, parse_version,
                                       supported_range)
from jaxpr_proto.errors import UnsupportedJaxError

JAX_VERSION = parse_version(jax.__version__)


def _adapter_name() -> str:
  name = ADAPTERS.get(JAX_VERSION[:2])
  if name is not None:
    return name
  newest = max(ADAPTERS)
  if os.environ.get("JAXPR_PROTO_UNSUPPORTED_JAX") == "1" and JAX_VERSION[:2] > newest:
    warnings.warn(f"jaxpr_proto: JAX {jax.__version__} is not supported; using the "
                  f"adapter of JAX {fmt(newest)} (JAXPR_PROTO_UNSUPPORTED_JAX=1)",
                  RuntimeWarning, stacklevel=3)
    return ADAPTERS[newest]
  raise UnsupportedJaxError(
      f"jaxpr_proto supports {supported_range()}; this is JAX {jax.__version__}. "
      f"Install a supported JAX (pip install 'jax>={fmt(INSTALLABLE[0])},<"
      f"{fmt((INSTALLABLE[1][0], INSTALLABLE[1][1] + 1))}') or a jaxpr-proto release "
      f"that supports JAX {fmt(JAX_VERSION[:2])}")


try:
  ADAPTER = _adapter_name()
except UnsupportedJaxError as e:
  if os.path.basename(sys.argv[0]) == "jaxpr-proto":  # the CLI: its usual one-line error
    print(f"jaxpr-proto: error: {e}", file=sys.stderr)
    raise SystemExit(2) from None
  raise
_module = importlib.import_module(f"{__name__}.{ADAPTER}")
globals().update({k: v for k, v in vars(_module).items() if not k.startswith("__")})
JAX_VERSION = parse_version(jax.__version__)  # the adapter's globals do not replace it
del _module
