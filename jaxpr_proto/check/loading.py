"""The one path by which a Module becomes a program: `jp.decode`, `jp.loads`,
`jp.load`, jp.Function files and the CLI all load through `decode`, which
runs the stages of `jp.check` (`checker.run`) and stops at the first error.

A Module that passed them all is remembered by its content (`_PASSED`): the
same bytes loaded again (a program pickled to many tasks, a server loading
one file per request) are decoded without checking them again. The verdict
is keyed on all it depends on besides the bytes: the options, what this
process has registered by name (`names.generation()`), and JAX's
configuration (`memo.context_key()`); `jp.clear_caches()` forgets it.
Where `jp.config` names a verdict cache folder, the verdict is kept there
too, for later processes (check/verdict_cache.py). For the last few such Modules, decoding again starts from what the last decoding
read that no load changes (`_WARM`): their eqns' columns, and the avals,
primitives, source info and contexts that eqns share, immutable in JAX.

A `trusted` load (unpickling: the stream is code anyway) of a Module that
this very jaxpr_proto, JAX and jaxlib wrote skips the checks that only
guard against hostile files (structure, bounds, params, types) and keeps
those that catch another writer: the format version and features, the
namespaces, and every name looked up (an unknown primitive is refused as
ever). A Module of any other writer is checked in full: its primitives and
params may differ from this JAX's."""
from __future__ import annotations

import hashlib

import jax

from jaxpr_proto import compat
from jaxpr_proto._version import __version__
from jaxpr_proto._config import config
from jaxpr_proto.check import checker
from jaxpr_proto.check.signature import check_function
from jaxpr_proto.check.structure import check_namespaces
from jaxpr_proto.codec import decoder as _decoder
from jaxpr_proto.codec import names
from jaxpr_proto.codec.state import paused_gc
from jaxpr_proto.compat import memo
from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import columns, versions

if config.verdict_cache_dir:  # (set by the environment: imported now, not by the first load)
  from jaxpr_proto.check import verdict_cache  # noqa: F401

_PASSED = memo.memo()  # verdict key -> whether JAX's type rules were among the checks passed
# Messages past this size are not remembered: hashing them would cost a copy.
PASSED_MAX_BYTES = 64 << 20
_WARM = memo.memo(max_entries=64)  # verdict key -> (columns by jaxpr, decoded entries by table)
WARM_MAX_BYTES = 1 << 20
_SHARED_TABLES = ("avals", "primitives", "tracebacks", "name_stacks", "source_infos", "contexts")


def forget_passed() -> None:
  """Forgets the Modules that passed (benchmarks: a first load, memos kept)."""
  _PASSED.clear()
  _WARM.clear()


class _RaiseFirst:
  """The `err` of checker.run for loading: raises the first problem, as the
  exception the stage found where there is one."""
  stage = ""
  count = 0

  def __call__(self, path: str, message: str, exception=None) -> None:
    raise exception if exception is not None else DecodeError(message, path)


def decode(m: pb.Module, *, typecheck: bool = True, source=None, callbacks=None,
           trust_pickled_code: bool = False, unresolved: str = "error", trusted: bool = False):
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
  `trusted` (unpickling) skips the checks against hostile files for a
  Module written by this very jaxpr_proto, JAX and jaxlib (see above).
  """
  if unresolved not in ("error", "placeholder"):
    raise ValueError(f"unresolved must be 'error' or 'placeholder', not {unresolved!r}")
  placeholders = unresolved == "placeholder"
  # (arrays outside the message, or callbacks bound for one load, are not in the key)
  key, size, stored = None, m.ByteSize(), None
  if source is None and not callbacks and size <= PASSED_MAX_BYTES:
    digest = hashlib.sha256(m.SerializeToString(deterministic=True)).digest()
    key = (digest, trust_pickled_code, placeholders, names.generation(), memo.context_key())
  with paused_gc(long_lived=True), compat.eval_context():  # (loading inside a trace makes no tracers)
    passed = _PASSED.get(key) if key is not None else None
    if passed is None and key is not None and config.verdict_cache_dir:
      from jaxpr_proto.check import verdict_cache  # (imported only where it is used)
      store = verdict_cache.store()
      stored = verdict_cache.file_key(m, digest, trust_pickled_code, placeholders)
      passed = _stored_verdict(store, stored, key)
    if passed is not None and passed >= typecheck:
      return _decode_passed(m, key, size <= WARM_MAX_BYTES, trust_pickled_code, placeholders)
    if trusted and not callbacks and not placeholders and same_writer(m):
      return _decode_trusted(m, key, size <= WARM_MAX_BYTES, source, trust_pickled_code)
    out = checker.run(m, _RaiseFirst(), checker.CheckReport(), typecheck=typecheck,
                      source=source, callbacks=callbacks, trust_pickled_code=trust_pickled_code,
                      placeholders=placeholders)
  if key is not None:
    passed = _PASSED.put(key, typecheck or _PASSED.get(key, False))
    if stored is not None:
      store.put("file", stored, bytes([passed]))
  return out


def _stored_verdict(store, stored, key) -> bool | None:
  """The verdict kept in the persistent cache under `stored` (whether JAX's
  type rules were among the checks passed), also remembered for the
  process under `key`; or None."""
  value = store.get("file", stored) if stored is not None else None
  if value not in (b"\x00", b"\x01"):
    return None
  return _PASSED.put(key, value == b"\x01")


# (as the encoder stamps them)
WRITER = (__version__, jax.__version__, getattr(jax.lib, "__version__", jax.__version__))


def same_writer(m: pb.Module) -> bool:
  """Whether this very jaxpr_proto, JAX and jaxlib wrote `m` (and its jax
  namespace says the same JAX)."""
  p = m.producer
  return ((p.jaxpr_proto_version, p.jax_version, p.jaxlib_version) == WRITER
          and versions.jax_version_of(m) == WRITER[1])


def _decode_trusted(m: pb.Module, key, keep_warm: bool, source, trust_pickled_code: bool):
  """`checker.run`'s result for a trusted Module of this writer: the checks
  that catch another writer (format version and features, namespaces; the
  names, looked up as decoding goes), without those against hostile files."""
  versions.check_version(m)
  check_namespaces(m, _RaiseFirst())
  return _decode_passed(m, key if keep_warm and source is None else None, keep_warm,
                        trust_pickled_code, False, source)


def _decode_passed(m: pb.Module, key, keep_warm: bool, trust_pickled_code: bool,
                   placeholders: bool, source=None):
  """`checker.run`'s result for a Module that passed its checks before: the
  same decoding, without them (from `_WARM`'s start, kept if `keep_warm`)."""
  dec = _decoder.Decoder(m, source, None, trust_pickled_code, placeholders)
  keep_warm = keep_warm and key is not None
  warm = _WARM.get(key) if key is not None else None
  if warm is not None:
    cols, tables = warm
    dec.columns = dict(cols)  # (the decoder takes them out as it goes; it only reads them)
    for table, entries in tables.items():
      dec.state.decoded[table].update(entries)
  elif keep_warm:
    cols = {i: columns.of(j) for i, j in enumerate(m.jaxprs)}
    dec.columns = dict(cols)
  with _decoder.refusing(lambda: dec.state.where):  # (cannot fail: it did not before)
    root = dec.closed_jaxpr(m.root, "")
    trees = check_function(m, dec, root, _RaiseFirst()) if m.HasField("function") else None
  dec.state.calls.clear()  # (kept for the param checks, which passed)
  if warm is None and keep_warm:
    # (not avals with symbolic dims: they belong to the load's own symbolic scope)
    shared = _SHARED_TABLES if dec.state.symbolic_scope is None else _SHARED_TABLES[1:]
    _WARM.put(key, (cols, {t: dict(dec.state.decoded[t]) for t in shared}))
  return dec, root, trees
