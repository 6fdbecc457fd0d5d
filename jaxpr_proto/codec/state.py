"""What one encoding or decoding keeps, in one object per direction (as jax's
`_SerializedUniques` does for jax.export): the Module, the interned or
decoded entries of each of its tables, and where the walk is."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
from typing import Callable

from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

# Nesting of sub-jaxprs the decoder accepts, far above what real programs use.
MAX_DEPTH = 100


@dataclasses.dataclass(eq=False)
class EncodeState:
  """The Module being written, and for each of its tables the index of each
  key interned so far."""
  module: pb.Module
  debug_info: bool = True
  interned: dict[str, dict] = dataclasses.field(default_factory=lambda: collections.defaultdict(dict))
  keep: list = dataclasses.field(default_factory=list)  # interned objects, so their ids stay unique
  by_id: dict = dataclasses.field(default_factory=dict)  # memo.identity(kept object) -> its index (the eqn loop's memo)
  # Custom rules' calls: memo.identity(kept call) -> its content key
  # (custom_rules.call_content), and a content key -> the call's part of a rule key.
  call_contents: dict = dataclasses.field(default_factory=dict)
  call_keys: dict = dataclasses.field(default_factory=dict)
  namespaces: set[str] = dataclasses.field(default_factory=set)  # of the primitives used
  features: set[str] = dataclasses.field(default_factory=set)  # Module.required_features
  # The custom rules being encoded inside one another, outermost first: each
  # by the functions that identify it (custom_rules.encode_*_rule).
  open_rules: list = dataclasses.field(default_factory=list)
  symbolic_scope: object = None  # of the symbolic dims, which must share one
  out_of_line: object = None  # a wire.external.Sink for big arrays, or None
  inline_bytes: int = 0  # of array data in the message
  # Lookups in tables so far, but for params (see `memoized`: what refers to
  # an entry of a table, new or not, refers to another one in another Module).
  table_refs: int = 0

  def intern(self, table: str, key, make: Callable[[], object], keep=None) -> int:
    """The index in Module.<table> of `key`, appending `make()` the first
    time (after whatever `make` itself appends). `keep` is held for the
    encoding's lifetime when the key is its id."""
    self.table_refs += table != "params"
    seen = self.interned[table]
    i = seen.get(key)
    if i is None:
      msg = make()
      i = seen[key] = len(getattr(self.module, table))
      getattr(self.module, table).append(msg)
      if keep is not None:
        self.keep.append(keep)
    return i

  def reserve(self, table: str, key, keep=None) -> tuple[int, object | None]:
    """(index, new entry) for a table entry that may refer to itself while it
    is written (jaxprs: their params refer to sub-jaxprs); the entry is None
    when `key` was interned before."""
    self.table_refs += 1
    seen = self.interned[table]
    i = seen.get(key)
    if i is not None:
      return i, None
    i = seen[key] = len(getattr(self.module, table))
    if keep is not None:
      self.keep.append(keep)
    return i, getattr(self.module, table).add()

  def memoized(self, memo, key, make: Callable[[], object]):
    """make(), kept in `memo` (process-wide) under `key` where it is the same
    in any Module: where making it referred to no table. A kept one adds to
    this Module again what making it added: bytes of array data, features."""
    hit = memo.get(key) if key is not None else None
    if hit is not None:
      out, (inline, features) = hit
      self.inline_bytes += inline
      self.features |= features
      return out
    refs, inline, outer, self.features = self.table_refs, self.inline_bytes, self.features, set()
    try:
      out = make()
    finally:
      added, self.features = self.features, outer | self.features
    if key is not None and self.table_refs == refs:
      memo.put(key, (out, (self.inline_bytes - inline, frozenset(added))))
    return out

  @contextlib.contextmanager
  def inside_rule(self, functions):
    self.open_rules.append(functions)
    try:
      yield
    finally:
      self.open_rules.pop()


_IN_PROGRESS = object()


@dataclasses.dataclass(eq=False)
class DecodeState:
  """The Module being read, the object decoded from each table entry so far,
  and where the decoder is (for error paths and the nesting bound)."""
  module: pb.Module
  decoded: dict[str, dict] = dataclasses.field(default_factory=lambda: collections.defaultdict(dict))
  jaxpr_paths: dict[int, str] = dataclasses.field(default_factory=dict)  # of each decoded jaxpr
  calls: dict = dataclasses.field(default_factory=dict)  # id(decoded Jaxpr) -> its eqns by what they share (Decoder._decode_jaxpr)
  # The eqn being decoded, for errors found outside the checks: `where` is
  # the jaxpr's path prefix and eqn_index its index (-1: no eqn yet).
  where_prefix: str = ""
  eqn_index: int = -1
  depth: int = 0  # jaxprs being decoded inside one another
  symbolic_scope: object = None
  source: object = None  # a wire.external.Source of external arrays' bytes, or None
  dim_env: dict | None = None  # {name: size} of symbolic dims read as sizes

  def entry(self, table: str, i: int, name: str, path: str):
    """Module.<table>[i], or a DecodeError naming the bad index."""
    entries = getattr(self.module, table)
    if not 0 <= i < len(entries):
      raise DecodeError(f"{name} index {i} is out of range (table has {len(entries)})", path or "root")
    return entries[i]

  def begin(self, table: str, i: int, name: str, path: str):
    """The object decoded from Module.<table>[i], or None when it is still
    to be made: then the entry is marked as being made, until `end` or
    `abort`, and an entry that reaches itself meanwhile is refused."""
    done = self.decoded[table]
    x = done.get(i)
    if x is _IN_PROGRESS:
      raise DecodeError(f"{name} {i} refers to itself", path)
    if x is None:
      done[i] = _IN_PROGRESS
    return x

  def end(self, table: str, i: int, x):
    self.decoded[table][i] = x
    return x

  def abort(self, table: str, i: int) -> None:
    del self.decoded[table][i]

  def get(self, table: str, i: int, name: str, path: str, make: Callable[[], object]):
    """The object of Module.<table>[i], made once by `make()`."""
    x = self.begin(table, i, name, path)
    if x is None:
      try:
        x = make()
      except BaseException:
        self.abort(table, i)
        raise
      self.end(table, i, x)
    return x

  @contextlib.contextmanager
  def nested(self, path: str):
    """One jaxpr deeper, within MAX_DEPTH; `where` is restored after."""
    if self.depth >= MAX_DEPTH:
      raise DecodeError(f"sub-jaxprs nested deeper than {MAX_DEPTH}", path)
    self.depth += 1
    outer = self.where_prefix, self.eqn_index
    try:
      yield
    finally:
      self.depth -= 1
    self.where_prefix, self.eqn_index = outer

  @property
  def where(self) -> str:
    return f"{self.where_prefix}eqn[{self.eqn_index}]" if self.eqn_index >= 0 else self.where_prefix.rstrip(".")


# Past this many new objects, paused_gc moves them to the oldest generation.
_LONG_LIVED = 100_000


@contextlib.contextmanager
def paused_gc(long_lived: bool = False):
  """Pauses Python's cycle collector while a program is encoded or decoded:
  the collector runs again each time some thousands of objects are made,
  and over the millions of a big program's eqns, variables and messages
  that costs a fifth of the time, where they form no cycles it could free.
  Past _LONG_LIVED new objects, they join the oldest generation without a
  pass over them (gc.freeze and unfreeze: a pass of the youngest one, when
  the collector resumes, would cost as much again; they live as long as
  the program), unless the process froze objects itself: unfreeze would
  release those too. With `long_lived` (a load that returns normally: what
  it made is the program, and it makes no cycles to free), they join it
  already past the collector's own threshold, where its pass would run as
  soon as it resumes (0.2-0.3 ms of a small program's first load)."""
  was = gc.isenabled()
  gc.disable()
  ok = False
  try:
    yield
    ok = True
  finally:
    if was:
      limit = _LONG_LIVED
      if long_lived and ok:
        limit = min(limit, gc.get_threshold()[0] or limit)
      if gc.get_count()[0] > limit and not gc.get_freeze_count():
        gc.freeze()
        gc.unfreeze()
      gc.enable()
