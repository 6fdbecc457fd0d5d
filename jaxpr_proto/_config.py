"""`jp.config`: this process's settings of jaxpr_proto, as `jax.config`
holds JAX's. Each setting starts from an environment variable and changes
with `jp.config.update(name, value)`:

* `verdict_cache_dir` (`JAXPR_PROTO_VERDICT_CACHE_DIR`): a folder where the
  verdicts of checking persist between processes (check/verdict_cache.py;
  docs/performance.md says what it trusts). None (the default): no such
  folder, every process checks afresh.
* `verdict_cache_max_bytes` (`JAXPR_PROTO_VERDICT_CACHE_MAX_BYTES`): the
  folder's bound; past it the entries used least recently go.
"""
from __future__ import annotations

import os

# name -> (environment variable, parse, default)
_SETTINGS = {
    "verdict_cache_dir": ("JAXPR_PROTO_VERDICT_CACHE_DIR", lambda s: s or None, None),
    "verdict_cache_max_bytes": ("JAXPR_PROTO_VERDICT_CACHE_MAX_BYTES", int, 64 << 20),
}


class Config:
  """The settings (attributes named as in _SETTINGS)."""

  def __init__(self):
    for name, (env, parse, default) in _SETTINGS.items():
      raw = os.environ.get(env)
      object.__setattr__(self, name, default if raw is None else parse(raw))

  def update(self, name: str, value) -> None:
    """Sets one setting, as `jax.config.update` does."""
    if name not in _SETTINGS:
      raise AttributeError(f"jaxpr_proto has no setting {name!r} (it has {', '.join(_SETTINGS)})")
    if name == "verdict_cache_dir" and value is not None:
      value = os.fspath(value)
    object.__setattr__(self, name, value)

  def __setattr__(self, name, value):
    self.update(name, value)

  def __repr__(self):
    return "jp.config(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in _SETTINGS) + ")"


config = Config()
