"""Rebuilds JAX source info (tracebacks) for jaxprs loaded from a file.

A saved jaxpr keeps, for each eqn, the *user* frames of its traceback as plain
tuples ``(file_name, function_name, start_line, start_column, end_line,
end_column)``, innermost first (see `frames_of`). On load, `make_traceback`
turns such a list back into a **real** ``jaxlib`` ``Traceback``, so everything
in JAX that consumes ``SourceInfo.traceback`` works unchanged: pretty-printing
with ``source_info=True``, MLIR locations in both modes of
``jax_include_full_tracebacks_in_locations`` (the full mode hands the traceback
to a C++ cache that accepts nothing but a real ``Traceback``), ``tb + tb``,
``as_python_traceback()`` / ``source_info_util.user_context`` error messages,
hashing (``user_frame`` is an ``lru_cache``), and so on.

How: jaxlib has no constructor for a populated ``Traceback``; the only way to
get one is ``Traceback.get_traceback()``, which records the Python stack of the
calling thread as (code object, lasti) pairs. So for each frame we make a code
object from a tiny template via ``code.replace(co_filename=file,
co_qualname=function, ...)`` with a hand-written location table
(``co_linetable``) that gives *every* instruction the frame's exact
``(line, column, end_line, end_column)``; whatever ``lasti`` CPython records,
``Traceback.code_addr2location`` then answers with those positions. The code
objects are chained as functions (each calls the next, the innermost calls
``get_traceback``) and run on a private worker thread whose stack holds no other
Python frame: the thread runs only C code (``deque(map(operator.call,
iter(queue.get, None)), 0)``) between our frames. The traceback it records
thus holds exactly the given frames.

Limits:

* Only the user frames survive a round trip (that is all `frames_of` returns);
  and on load they are filtered again by ``source_info_util.is_user_filename``
  of the loading process: a frame whose file looks JAX-internal or stdlib
  there is kept in the traceback but hidden from `frames_of`, pretty-printing
  and MLIR locations;
  the full-traceback MLIR locations of a loaded jaxpr therefore list only those
  frames, which is also all JAX itself puts there (it omits non-user files).
* ``Frame.function_start_line`` (``co_firstlineno``) of a rebuilt frame is its
  ``start_line``; the function's real first line is not kept.
* CPython reports unknown positions as -1. A frame with ``start_line == -1``
  comes back as all -1; an ``end_line`` below ``start_line`` comes back as
  ``start_line``; any other ints (columns may be -1) round-trip exactly.
* At most `MAX_FRAMES` innermost frames are kept per traceback.
* Tracebacks are interned for the life of the process (`clear_cache` drops
  them); the worker thread is started lazily and again after ``os.fork``.
"""

from __future__ import annotations

import _thread
import collections
import functools
import operator
import os
import queue
import threading
import types
from collections.abc import Sequence
from typing import Any

# JAX internals come from the compatibility module.
from jaxpr_proto import compat
from jaxpr_proto.compat import source_info_util
from jaxpr_proto.v1 import jaxpr_pb2 as pb

SourceInfo = source_info_util.SourceInfo
NameStack = source_info_util.NameStack
Traceback = source_info_util.Traceback  # == jax._src.lib.xla_client.Traceback
# -----------------------------------------------------------------------------

Frame = tuple[str, str, int, int, int, int]
"""(file_name, function_name, start_line, start_column, end_line, end_column)"""

MAX_FRAMES = 256
"""The most frames (innermost ones) a rebuilt traceback keeps."""

_TIMEOUT_S = 60.0


# ---------------------------------------------------------------- public API


def frames_of(traceback: Any) -> list[Frame]:
  """The user frames of `traceback` (real or rebuilt, or None), innermost first.

  These are the frames ``source_info_util.user_frames`` yields, which is what
  ``pretty_print(source_info=True)`` and MLIR file locations show.
  """
  if traceback is None:
    return []
  rules = compat.user_frame_rules()
  key = (traceback, rules) if rules is not None else None
  frames = _USER_FRAMES.get(key) if key is not None else None
  if frames is None:
    frames = tuple((f.file_name, f.function_name, f.start_line, f.start_column,
                    f.end_line, f.end_column)
                   for f in source_info_util.user_frames(traceback))
    if key is not None:
      _USER_FRAMES.put(key, frames)
  return list(frames)


# A traceback's user frames, per process: JAX compares and hashes a Traceback
# by its frames, and a later program's eqns have the tracebacks of an earlier
# one's (a training step traced again). Keyed with what decides which frames
# are the user's (compat.user_frame_rules).
_USER_FRAMES = compat.memo.memo()


def make_traceback(frames: Sequence[Frame]) -> Traceback | None:
  """A real jaxlib ``Traceback`` made of `frames` (innermost first).

  Returns None for no frames. Interned: equal frame lists give the same
  object.
  """
  return make_tracebacks([frames])[0]


def make_tracebacks(
    frame_lists: Sequence[Sequence[Frame]]) -> list[Traceback | None]:
  """`make_traceback` for many frame lists at once (one worker round trip)."""
  return _interned([_key(frames) for frames in frame_lists])


def _interned(keys: list[tuple[Frame, ...]]) -> list[Traceback | None]:
  """The Tracebacks of frame lists already in `_key`'s form."""
  with _cache_lock:
    found = {k: _cache[k] for k in keys if k in _cache}
  missing = list(dict.fromkeys(k for k in keys if k and k not in found))
  if missing:
    built = _build(missing)
    with _cache_lock:
      for k, tb in zip(missing, built):
        found[k] = _cache.setdefault(k, tb)
  return [found[k] if k else None for k in keys]


def make_source_info(traceback: Any,
                     name_stack: NameStack | None = None) -> SourceInfo:
  """A ``SourceInfo`` for a loaded eqn (``name_stack`` None: empty)."""
  if name_stack is None:
    name_stack = source_info_util.new_name_stack()
  return SourceInfo(traceback, name_stack)


def clear_cache() -> None:
  """Forgets interned tracebacks and code objects."""
  with _cache_lock:
    _cache.clear()
  _code_for.cache_clear()


# ------------------------------------------------------- in a Module's tables
# Frames, tracebacks and name stacks are interned: each is written once.

def encode_traceback(enc, tb) -> int:
  """The index in Module.tracebacks of a traceback's user frames (0: none)."""
  st = enc.state
  if tb is None or not st.debug_info:
    return 0
  st.table_refs += 1
  seen = st.interned["tracebacks"]
  i = seen.get(tb)
  if i is None:
    frames = [st.intern("frames", f, lambda f=f: _encode_frame(enc, f)) for f in frames_of(tb)]
    key = tuple(frames)  # equal frame lists share one entry
    i = st.intern("tracebacks", key, lambda: pb.Traceback(frames=frames)) if key else 0
    seen[tb] = i
    st.keep.append(tb)
  return i


def encode_traceback_value(enc, tb) -> int:
  """A traceback held as data (checkify's error metadata): as `encode_traceback`."""
  enc.state.features.add("checkify")
  return encode_traceback(enc, tb)


def decode_traceback_value(dec, i: int, path: str):
  """The traceback of a `traceback` Value. For 0 (no frames known), a traceback
  of one frame in a JAX file: JAX calls its methods (as_python_traceback), and
  it has no user frames, so it is written as 0 again."""
  return _decode_traceback(dec, i, path) if i else make_traceback([_NO_USER_FRAME])


_NO_USER_FRAME = (compat.CHECKIFY_FILE, "<unknown>", -1, -1, -1, -1)


def _encode_frame(enc, f) -> pb.Frame:
  file, func, line, col, eline, ecol = f
  return pb.Frame(file=enc.string(file), function=enc.string(func),
                  line=line, column=col, end_line=eline, end_column=ecol)


def encode_name_stack(enc, ns) -> int:
  if not enc.state.debug_info:
    return 0
  key = tuple((type(s) is compat.Transform, s.name) for s in ns.stack)
  return enc.state.intern("name_stacks", key, lambda: pb.NameStack(
      scopes=[pb.NameScope(name=n, transform=t) for t, n in key]))


def _decode_traceback(dec, i: int, path: str):
  if not i:
    return None
  done = dec.state.decoded["tracebacks"]
  if not done:  # all at once: the builder is fastest in batches
    entry, table, strings = dec.state.entry, dec.m.frames, dec.m.strings
    n_frames, n_strings = len(table), len(strings)
    frames: dict[int, Frame] = {}  # (tracebacks share frames)

    def frame(j, k):  # (paths are made for an error only: `entry` raises it)
      f = frames.get(j)
      if f is None:
        msg = table[j] if 0 <= j < n_frames else entry("frames", j, "frame", f"tracebacks[{k}]")
        for s in (msg.file, msg.function):
          if not 0 <= s < n_strings:
            entry("strings", s, "string", f"frames[{j}]")
        f = frames[j] = (strings[msg.file], strings[msg.function],
                         msg.line, msg.column, msg.end_line, msg.end_column)
      return f
    keys = [tuple(frame(j, k) for j in msg.frames[:MAX_FRAMES])  # (`_key`'s form: strs, ints)
            for k, msg in enumerate(dec.m.tracebacks)]
    done.update(enumerate(_interned(keys)))
  tb = done.get(i)
  if tb is None:
    dec.state.entry("tracebacks", i, "traceback", path)
  return tb


def _decode_name_stack(dec, i: int, path: str):
  ns = dec.state.decoded["name_stacks"].get(i)
  if ns is not None:  # (decoded: most eqns share a few)
    return ns

  def make():
    msg = dec.state.entry("name_stacks", i, "name stack", path)
    return compat.NameStack(tuple(
        (compat.Transform if s.transform else compat.Scope)(s.name) for s in msg.scopes))
  return dec.state.get("name_stacks", i, "name stack", path, make)


def decode_source_info(dec, tb: int, ns: int, path: str):
  """The SourceInfo of an eqn's traceback and name stack indices."""
  done = dec.state.decoded["source_infos"]
  si = done.get((tb, ns))
  if si is None:
    si = done[(tb, ns)] = make_source_info(
        _decode_traceback(dec, tb, path), _decode_name_stack(dec, ns, path))
  return si


# ------------------------------------------------------------ code objects


def _template() -> types.CodeType:
  module = compile("def _f():\n  _r(_n())\n", "<jaxpr_proto>", "exec")
  return next(c for c in module.co_consts if isinstance(c, types.CodeType))


# Calls `_n()`, then `_r(result)`; both are looked up in the function globals.
_TEMPLATE = _template()
_CODE_UNITS = len(_TEMPLATE.co_code) // 2


def _varint(value: int) -> bytes:
  out = bytearray()
  while value >= 64:
    out.append(0x40 | (value & 63))
    value >>= 6
  out.append(value)
  return bytes(out)


def _svarint(value: int) -> bytes:
  return _varint((-value << 1) | 1 if value < 0 else value << 1)


def _location_table(line: int, col: int, end_line: int,
                    end_col: int) -> tuple[int, bytes]:
  """(co_firstlineno, co_linetable) giving every instruction one position.

  CPython 3.11+ location table (Objects/locations.md): entries of up to 8 code
  units; first byte ``1CCCCLLL`` (code C, length L+1); code 15 is "no
  location"; code 14 is the long form: svarint line delta, varint end line
  delta, varint column+1, varint end column+1 (0: no column).
  """
  if line < 0:
    first_line = 1
    first = rest = bytes([0x80 | (15 << 3)])  # length bits added below
  else:
    end_line = max(end_line, line)
    first_line = max(line, 1)
    tail = (_varint(end_line - line) + _varint(max(col, -1) + 1)
            + _varint(max(end_col, -1) + 1))
    first = bytes([0x80 | (14 << 3)]) + _svarint(line - first_line) + tail
    rest = bytes([0x80 | (14 << 3)]) + _svarint(0) + tail
  table = bytearray()
  left = _CODE_UNITS
  while left:
    n = min(left, 8)
    entry = first if not table else rest
    table += bytes([entry[0] | (n - 1)]) + entry[1:]
    left -= n
  return first_line, bytes(table)


def _expected_location(line, col, end_line, end_col):
  if line < 0:
    return (-1, -1, -1, -1)
  return (line, max(col, -1), max(end_line, line), max(end_col, -1))


@functools.lru_cache(maxsize=None)
def _code_for(frame: Frame) -> types.CodeType:
  file_name, function_name, line, col, end_line, end_col = frame
  first_line, table = _location_table(line, col, end_line, end_col)
  code = _TEMPLATE.replace(
      co_filename=file_name,
      co_name=function_name.rpartition(".")[2] or function_name,
      co_qualname=function_name,
      co_firstlineno=first_line,
      co_linetable=table)
  want = _expected_location(line, col, end_line, end_col)
  for lasti in (0, 2 * (_CODE_UNITS - 1)):
    got = Traceback.code_addr2location(code, lasti)
    if tuple(got) != want:
      raise RuntimeError(
          f"jaxpr_proto: could not synthesize a code object at {want} "
          f"(got {tuple(got)}); unsupported Python location-table format?")
  return code


def _key(frames: Sequence[Frame]) -> tuple[Frame, ...]:
  frames = frames[:MAX_FRAMES]
  return tuple((str(f), str(fn), int(a), int(b), int(c), int(d))
               for f, fn, a, b, c, d in frames)


_cache: dict[tuple[Frame, ...], Traceback] = {}
_cache_lock = threading.Lock()


# -------------------------------------------------------------- the worker
#
# The worker thread runs `deque(map(operator.call, iter(requests.get, None)),
# 0)`: all C code, so while it runs a request the thread's Python stack is just
# the frames of that request. Each request is a C callable (partial of deque
# over map) running a batch of frame chains; each chain's innermost frame calls
# `Traceback.get_traceback()` and passes the result to the batch's queue.

_worker_lock = threading.Lock()
_worker_requests: queue.SimpleQueue | None = None
_worker_pid: int | None = None


def _requests() -> queue.SimpleQueue:
  global _worker_requests, _worker_pid
  with _worker_lock:
    if _worker_requests is None or _worker_pid != os.getpid():
      requests: queue.SimpleQueue = queue.SimpleQueue()
      _thread.start_new_thread(
          collections.deque,
          (map(operator.call, iter(requests.get, None)), 0))
      _worker_requests, _worker_pid = requests, os.getpid()
    return _worker_requests


def stop_worker() -> None:
  """Ends the worker thread, where this process started one; the next
  traceback starts another. The warm-up at import leaves no thread behind:
  a process that forks later (Python 3.12 warns of a fork with threads)
  meets none it did not start itself."""
  global _worker_requests, _worker_pid
  with _worker_lock:
    if _worker_requests is not None and _worker_pid == os.getpid():
      _worker_requests.put(None)  # (ends its `iter(requests.get, None)`)
    _worker_requests = _worker_pid = None


def _reset_worker() -> None:
  global _worker_requests, _worker_pid
  with _worker_lock:
    _worker_requests = _worker_pid = None


def _chain(frames: tuple[Frame, ...], results: queue.SimpleQueue):
  call_next: Any = Traceback.get_traceback
  report: Any = results.put
  for frame in frames:  # innermost first
    call_next = types.FunctionType(_code_for(frame),
                                   {"_n": call_next, "_r": report})
    report = id  # outer frames discard the inner call's None
  return call_next


def _build(keys: list[tuple[Frame, ...]]) -> list[Traceback]:
  results: queue.SimpleQueue = queue.SimpleQueue()
  chains = [_chain(k, results) for k in keys]
  _requests().put(functools.partial(
      collections.deque, map(operator.call, chains), 0))
  out = []
  try:
    for _ in chains:
      out.append(results.get(timeout=_TIMEOUT_S))
  except queue.Empty:
    _reset_worker()  # it died (it never should); start afresh next time
    raise RuntimeError("jaxpr_proto: traceback worker did not answer")
  for k, tb in zip(keys, out):
    if tb is None or len(tb.raw_frames()[0]) != len(k):
      raise RuntimeError(
          f"jaxpr_proto: rebuilt traceback has unexpected frames: {tb}")
  return out
