"""Process-wide memos of what encoding, decoding and checking programs
compute again and again: the bytes and values of plain params (the same
dimension numbers in every file), JAX's type rule of an eqn (the same
primitive on the same types), and the verdicts on a custom_jvp rule (the
same rule in every program that uses `jax.nn.relu`). `jp.clear_caches()`
empties them, as `jax.clear_caches()` does JAX's.

A memo key is exact or absent. `value_key` keys a param by type and value
(so that `1`, `True` and `1.0`, equal in Python, stay apart; floats by their
bits, so that `-0.0` and `0.0` do too) and only for the immutable value types
it knows; anything else (a jaxpr, a function, an object equal by identity)
has no key, and what it is in is computed afresh. The keys of checking hold
`config.trace_context()`, the JAX configuration that JAX's own tracing caches
key on (x64, the mesh and axis environment, ...).
"""
from __future__ import annotations

import enum
import struct
import threading

import jax.extend.core as jex_core
import numpy as np
from jax._src import config, core

MAX_ENTRIES = 1 << 12

# A key unique to each live object, as id(x), for the memos keyed by identity
# in loops over every eqn: id() raises an audit event, which costs 10x more
# where any library has installed an audit hook (filelock >= 4.3 does on
# Python >= 3.12, and JAX imports it). CPython's object hash is the object's
# address rotated by 4 bits: as unique as the address, and no event.
identity = object.__hash__


class Memo(dict):
  """A dict that empties itself when full: bounded, and simpler than an LRU
  for what fills it (a program's few hundred distinct eqns)."""

  def __init__(self, max_entries: int = MAX_ENTRIES):
    super().__init__()
    self.max_entries = max_entries
    self.lock = threading.Lock()

  def put(self, key, value):
    with self.lock:
      if len(self) >= self.max_entries:
        self.clear()
      self[key] = value
    return value

  def lookup(self, make_key, compute):
    """compute(), memoized under make_key(); computed afresh where the key
    cannot be made (NoKey, or a value that will not hash)."""
    try:
      key = make_key()
      hash(key)
    except Exception:
      return compute()
    hit = self.get(key, _MISSING)
    if hit is _MISSING:
      hit = self.put(key, compute())
    return hit


_MISSING = object()


_MEMOS: list[Memo] = []


def memo(max_entries: int = MAX_ENTRIES) -> Memo:
  """A Memo that `clear_all` (jp.clear_caches) empties."""
  m = Memo(max_entries)
  _MEMOS.append(m)
  return m


def clear_all() -> None:
  for m in _MEMOS:
    m.clear()


class NoKey(Exception):
  """A value without an exact key."""


_ATOMS = {int, float, complex, bool, str, bytes, type(None), type}


def _kind(t) -> str:
  if t in (float, complex) or issubclass(t, np.inexact):
    return "bits"  # -0.0 == 0.0, and a NaN equals nothing: keyed by their bits
  if t in _ATOMS or issubclass(t, (np.dtype, np.generic, enum.Enum)):
    return "atom"
  if issubclass(t, tuple):  # tuples and NamedTuples (dimension numbers)
    return "tuple"
  if issubclass(t, (core.ShapedArray,)):
    return "atom"  # interned: equal when identical
  return _value_types.get(t, "none")


_value_types: dict[type, str] = {}
_kinds: dict[type, str] = {}


def register_value_type(t: type) -> None:
  """A JAX type compared by value that params hold (a sharding, a mesh)."""
  _value_types[t] = "atom"
  _kinds.pop(t, None)


def value_key(v):
  """An exact, hashable key of a param value; raises NoKey."""
  t = type(v)
  kind = _kinds.get(t)
  if kind is None:
    kind = _kinds[t] = _kind(t)
  if kind == "atom":
    try:
      hash(v)
    except TypeError:
      raise NoKey from None
    return (t, v)
  if kind == "bits":
    return (t, v.tobytes() if isinstance(v, np.generic) else struct.pack("<dd", v.real, v.imag))
  if kind == "tuple":
    return (t, tuple(value_key(x) for x in v))
  raise NoKey


def params_key(params: dict):
  return tuple((k, value_key(v)) for k, v in params.items())


def context_key():
  return config.trace_context()


_MAX_CONST_BYTES = 1 << 10  # bigger constants are not hashed: no key


def _array_key(x):
  a = np.asarray(x)
  if a.dtype == object or a.nbytes > _MAX_CONST_BYTES:
    raise NoKey
  return (type(x), a.dtype, a.shape, a.tobytes())


def literal_key(v):
  """An exact key of a literal's value: its value_key, or for JAX's typed
  scalars (an int or float with a dtype) and small arrays, their type, dtype
  and bits; raises NoKey."""
  try:
    return value_key(v)
  except NoKey:
    pass
  if isinstance(v, np.ndarray):
    return _array_key(v)
  dtype = getattr(v, "dtype", None)
  for base in (int, float, complex):
    if isinstance(v, base) and isinstance(dtype, np.dtype):
      return (type(v), dtype, value_key(base(v)))
  raise NoKey


_JAXPR_TYPES = (core.Jaxpr, jex_core.ClosedJaxpr)  # one type from JAX 0.11
_keyers: dict[type, object] = {}


def register_keyer(t: type, keyer) -> None:
  """`keyer(v, param)` gives the structural key of a param of type `t` that
  stands for jaxprs (a decoded custom rule), with `param` to key what it
  holds; or raises NoKey."""
  _keyers[t] = keyer


def fingerprint(j):
  """An exact structural key of a jaxpr or closed jaxpr (variables numbered
  in binding order, params by `value_key`, sub-jaxprs by their own
  fingerprint, constants by their bytes); raises NoKey."""
  seen: dict[int, int] = {}
  alive = []  # what `seen` keys by id, kept alive while it does

  def once(v, make):
    """("def", n, key) at an object's first visit, ("ref", n) at every later
    one (a rule that uses itself, a sub-jaxpr used twice)."""
    n = seen.get(id(v))
    if n is not None:
      return ("ref", n)
    n = seen[id(v)] = len(seen)
    alive.append(v)
    return ("def", n, make())

  def param(v):
    if isinstance(v, _JAXPR_TYPES):
      return ("jaxpr", type(v), once(v, lambda: _fingerprint(v, param)))
    if type(v) is tuple:
      return (tuple, tuple(map(param, v)))
    keyer = _keyers.get(type(v))
    if keyer is not None:
      return (type(v), once(v, lambda: keyer(v, param)))
    return value_key(v)

  return param(j)


def _context_key(ctx):
  """An eqn context by what it holds (compute type, mesh, ...), as printed."""
  return tuple((s, repr(getattr(ctx, s, None))) for s in getattr(type(ctx), "__slots__", ()))


def content_key(j, source_info=None, debug_info=None):
  """An exact key of all that an encoder writes of one jaxpr or closed jaxpr:
  its structure as `fingerprint` keys it, but the jaxprs in its params by
  identity (each written once, their sharing kept), so that two traces of
  one function whose sub-jaxprs JAX cached get equal keys; and with
  `source_info` and `debug_info` (each -> a key of what the encoder writes
  of it), each eqn's source info and the jaxpr's debug info. Raises NoKey,
  also for other objects in params (functions, rules): a decoder may make
  one object of two, and decoding must not make more of a program equal.
  The key holds ids: the jaxpr must stay alive while it is used."""
  def param(v):
    if isinstance(v, _JAXPR_TYPES):
      return ("same", identity(v))
    if type(v) is tuple:
      return (tuple, tuple(map(param, v)))
    return value_key(v)
  return _fingerprint(j, param, source_info, debug_info)


def _fingerprint(j, param, source_info=None, debug_info=None):
  inner = j.jaxpr if isinstance(j, jex_core.ClosedJaxpr) else j
  consts = tuple(_array_key(c) for c in getattr(j, "consts", ()))
  names: dict = {}

  def bind(v):
    names[v] = len(names)
    return v.aval

  def atom(a):
    if isinstance(a, core.Literal):
      return ("lit", _array_key(a.val), a.aval)
    n = names.get(a)
    if n is None:
      raise NoKey  # free variable: a malformed jaxpr
    return n

  head = (tuple(bind(v) for v in inner.constvars), tuple(bind(v) for v in inner.invars))
  eqns = []
  for e in inner.eqns:
    ins = tuple(atom(a) for a in e.invars)
    params = tuple((k, param(v)) for k, v in e.params.items())
    outs = tuple(("drop", v.aval) if isinstance(v, core.DropVar) else bind(v)
                 for v in e.outvars)
    eqn = (e.primitive, params, ins, outs, frozenset(e.effects), _context_key(e.ctx))
    if source_info is not None:
      eqn += (source_info(e.source_info),)
    eqns.append(eqn)
  key = (consts, head, tuple(eqns), tuple(atom(a) for a in inner.outvars),
         frozenset(inner.effects))
  if debug_info is not None:
    d = inner.debug_info
    key += (None if d is None else debug_info(d), getattr(inner, "is_high", False))
  return key


# --- the configuration, as text that another process can compare -------------

def _stable(v):
  """`v` as text that names it exactly, or None: atoms, enums and tuples or
  frozensets of them; an AxisEnv or mesh only when empty (what a load
  outside any trace sees)."""
  t = type(v)
  if v is None or t in (bool, int, str):
    return f"{t.__name__}:{v!r}"
  if t is float:
    return f"float:{struct.pack('<d', v).hex()}"
  if isinstance(v, enum.Enum):
    return f"{t.__module__}.{t.__qualname__}.{v.name}"
  if t is tuple or t is frozenset:
    parts = [_stable(x) for x in v]
    if None in parts:
      return None
    return f"{t.__name__}({','.join(parts if t is tuple else sorted(parts))})"
  if t is core.AxisEnv:
    empty = not (v.axis_sizes or v.spmd_axis_names or getattr(v, "explicit_mesh_axis_names", ()))
    return "AxisEnv()" if empty else None
  if getattr(v, "empty", False) is True and "Mesh" in t.__name__:
    return f"{t.__name__}()"
  return None


def stable_context_key() -> str | None:
  """`context_key()` as exact text, for keys that outlive the process (the
  persistent verdict cache), or None where some setting has no exact text
  (a mesh or named axes in scope: then nothing is kept)."""
  return _stable(config.trace_context())
