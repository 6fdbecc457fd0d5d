"""The persistent verdict cache: what checking concluded, kept in a folder
that later processes read (opt-in: `jp.config.update("verdict_cache_dir",
path)` or JAXPR_PROTO_VERDICT_CACHE_DIR), as JAX's persistent compilation
cache keeps executables.

It keeps verdicts, never programs: a hit lets a load skip checks whose
outcome is known, and the load still decodes the file's own bytes.

* `file`: a whole Module passed every check (with JAX's type rules or
  without), keyed by the SHA-256 of its bytes and the load options that
  change the verdict (check.loading);
* `jvp`: the verdict on a custom_jvp rule (linear in its tangents, primal
  outputs that do not read them), keyed by the SHA-256 of the rule's
  encoding (check.rule_verdicts).

Every key holds the jaxpr_proto, JAX and jaxlib versions and JAX's
configuration as exact text (`memo.stable_context_key`; a configuration
without one, such as a mesh in scope, keeps nothing). Only files whose
verdict rests on nothing but their bytes and those versions are kept: every
primitive in one of JAX's namespaces, no host callbacks, pickled code or
functions by name (whose meaning is the reading process's code), and the
user's own param types named in the key.

Trust (docs/performance.md): the folder is trusted, as JAX's compilation
cache is: whoever can write it can make a hostile file load unchecked. An
entry is a header (magic, versions, kind, the key's digest), the value and
a SHA-256 of all that; an entry that is truncated, corrupt, of other
versions or filed under another key's name is ignored, never trusted.
Writes go to a temp file renamed into place (atomic); past
`verdict_cache_max_bytes` the entries least recently used go.
"""
from __future__ import annotations

import hashlib
import os
import struct
import time

import jax

from jaxpr_proto._config import config
from jaxpr_proto._version import __version__
from jaxpr_proto.codec import names
from jaxpr_proto.compat import memo

MAGIC = b"jaxpr_proto verdict cache 1\n"
VERSIONS = (f"jaxpr_proto {__version__}; jax {jax.__version__}; "
            f"jaxlib {getattr(jax.lib, '__version__', jax.__version__)}").encode()
_DIGEST = 32
_MAX_VALUE = 1 << 16  # verdicts are a flag or a message
_TMP = ".tmp-"
_STALE_TMP_S = 600  # a temp file this old was left by a killed writer


class Store:
  """One cache folder: `get` and `put` of bytes by (kind, key)."""

  def __init__(self, folder: str, max_bytes: int):
    self.folder, self.max_bytes = folder, max_bytes
    self._written = None  # bytes written since the last scan (None: not scanned yet)

  def _name(self, kind: str, key: bytes) -> tuple[str, bytes]:
    digest = hashlib.sha256(b"\0".join((VERSIONS, kind.encode(), key))).digest()
    return os.path.join(self.folder, f"{kind}-{digest.hex()}"), digest

  def get(self, kind: str, key: bytes) -> bytes | None:
    """The value kept under (kind, key), or None: none, or an entry that
    does not check out (truncated, corrupt, of other versions, misfiled)."""
    path, digest = self._name(kind, key)
    try:
      with open(path, "rb") as f:
        data = f.read(len(MAGIC) + len(VERSIONS) + 64 + _MAX_VALUE + _DIGEST)
    except OSError:
      return None
    value = _parse(data, kind, digest)
    if value is not None:
      try:
        os.utime(path)  # (used: the last to be evicted)
      except OSError:
        pass
    return value

  def put(self, kind: str, key: bytes, value: bytes) -> None:
    """Keeps `value` under (kind, key); a folder that cannot be written
    keeps nothing (a cache is never a reason to fail a load)."""
    if len(value) > _MAX_VALUE:
      return
    path, digest = self._name(kind, key)
    data = entry(kind, digest, value)
    import tempfile  # (only where a verdict is written)
    try:
      os.makedirs(self.folder, exist_ok=True)
      fd, tmp = tempfile.mkstemp(prefix=_TMP, dir=self.folder)
      try:
        with os.fdopen(fd, "wb") as f:
          f.write(data)
        os.replace(tmp, path)
      except BaseException:
        _remove(tmp)
        raise
    except OSError:
      return
    self._written = (self._written or 0) + len(data)
    if self._written > max(self.max_bytes // 16, 1) or self._written == len(data):
      self.evict()

  def evict(self) -> None:
    """Removes the entries used least recently until the folder is within
    its bound (and temp files that killed writers left)."""
    self._written = 0
    entries, total, now = [], 0, time.time()
    try:
      with os.scandir(self.folder) as it:
        for e in it:
          try:
            st = e.stat(follow_symlinks=False)
          except OSError:
            continue
          if e.name.startswith(_TMP):
            if now - st.st_mtime > _STALE_TMP_S:
              _remove(e.path)
            continue
          entries.append((st.st_mtime, st.st_size, e.path))
          total += st.st_size
    except OSError:
      return
    if total <= self.max_bytes:
      return
    entries.sort()
    goal = self.max_bytes * 9 // 10  # (not again at the next put)
    for _, size, path in entries:
      if total <= goal:
        break
      _remove(path)
      total -= size


def _remove(path: str) -> None:
  try:
    os.remove(path)
  except OSError:
    pass


def _head(kind: str, digest: bytes, versions: bytes) -> bytes:
  return b"".join((MAGIC, versions, b"\n", kind.encode(), b"\n", digest))


def entry(kind: str, digest: bytes, value: bytes, versions: bytes = VERSIONS) -> bytes:
  """An entry's bytes: its header, the value's length and the value, and a
  SHA-256 of all that."""
  body = _head(kind, digest, versions) + struct.pack("<I", len(value)) + value
  return body + hashlib.sha256(body).digest()


def _parse(data: bytes, kind: str, digest: bytes) -> bytes | None:
  head = _head(kind, digest, VERSIONS)
  if len(data) < len(head) + 4 + _DIGEST or not data.startswith(head):
    return None
  body, check = data[:-_DIGEST], data[-_DIGEST:]
  (n,) = struct.unpack_from("<I", body, len(head))
  if len(body) != len(head) + 4 + n or hashlib.sha256(body).digest() != check:
    return None
  return body[len(head) + 4:]


_stores: dict[tuple, Store] = {}


def store() -> Store | None:
  """The Store of `jp.config.verdict_cache_dir`, or None where none is set."""
  folder = config.verdict_cache_dir
  if not folder:
    return None
  key = (folder, config.verdict_cache_max_bytes)
  s = _stores.get(key)
  if s is None:
    s = _stores[key] = Store(folder, config.verdict_cache_max_bytes)
  return s


# --- what a key holds ---------------------------------------------------------

# Features whose meaning is the reading process's code, not the file's bytes.
_CODE_FEATURES = frozenset({"callbacks", "pickled_code", "functions"})
_user_types: tuple[int, bytes] | None = None  # (names.generation(), their text)


def _user_param_types() -> bytes:
  """The param types the user registered by name (JAX's are named jax::...),
  each with the class it names: a file may name them, and their meaning is
  the reading process's."""
  global _user_types
  gen = names.generation()
  if _user_types is None or _user_types[0] != gen:
    out = []
    for table in (names.ENUMS, names.RECORDS):
      for name, cls in table.names().items():
        if not str(name).startswith("jax::"):
          out.append(f"{name}={cls.__module__}.{cls.__qualname__}")
    _user_types = gen, "\n".join(sorted(out)).encode()
  return _user_types[1]


def context() -> bytes | None:
  """JAX's configuration as exact text, or None (nothing is kept then)."""
  text = memo.stable_context_key()
  return None if text is None else text.encode()


def file_key(m, digest: bytes, *options) -> bytes | None:
  """The key of Module `m`'s verdict (`digest`: the SHA-256 of its bytes;
  `options`: the load's options that change it, as bools), or None where
  the verdict rests on more than the bytes and the versions."""
  if any(f in _CODE_FEATURES for f in m.required_features):
    return None
  for p in m.primitives:
    if p.namespace != "jax" and not p.namespace.startswith("jax."):
      return None
  ctx = context()
  if ctx is None:
    return None
  return b"\0".join((digest, bytes(map(bool, options)), ctx, _user_param_types()))
