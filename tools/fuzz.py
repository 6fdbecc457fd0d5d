"""A fuzzer for loading untrusted .jaxpb files: what loads must run.

Each case mutates one seed, a .jaxpb file of every corpus program
(tests/corpus.py, traced here, also with every jaxpr in columns) and of the
golden files (tests/golden/), at the protobuf field level (a random field
anywhere in the Module set to an interesting value: indices just in and out
of range, huge and negative
numbers, unknown enum numbers, other strings, repeated fields dropped,
duplicated or reordered, sub-messages cleared) or, less often, at the byte
level, and judges it (`judge`):

* `jp.loads` must return or raise a `jp.DecodeError` (not an InternalError,
  the decoder's last-resort wrapper for a check it lacks);
* `jp.check` must agree: ok exactly when `jp.loads` returned;
* what loaded must run: `jax.jit` of the program on inputs of its input
  types, and `jax.vjp` pulled back where the seed's program is
  differentiable, raise nothing (at vjp, JAX's own NotImplementedError for
  a valid program it has no rule for, such as a window-dilated max pool,
  counts as `not_differentiable`, as does its failure on a max pool with
  negative padding, which it cannot differentiate either, and a
  custom_linear_solve whose jvp rule JAX fails on, see _zero_tangent_solve);
* no case may crash the process (each runs in a worker process, restarted
  after a crash) or run past the time limit, except a program with a while
  loop that compiled and then runs on (`while_runs_on`: a loop whose
  condition stays true, as `lax.while_loop(lambda c: True, ...)`, runs
  forever under JAX too, and whether a loop ends cannot be decided; so does
  a scan, or an interpreted Pallas grid, of more than LONG_SCAN steps); a
  program that needs more memory
  than the machine has (`out_of_memory`, or `loaded_not_run` where a value
  it makes is over MAX_INPUT_BYTES) says nothing of the file; nor does a
  host callback that fails (`host_callback_failed`): the function a callback
  name is bound to is the reading process's own, and a file may declare
  other result types than it gives, which JAX finds only when it calls it;
  nor does a `check` eqn that JAX refuses to jit until checkify.checkify
  functionalizes it (`check_not_functionalized`), as it refuses the
  original program (a checkify.check traced without checkify); nor a Pallas
  kernel for a TPU or GPU, which this CPU runs only interpreted
  (`needs_accelerator`), or one whose index maps read out of bounds, which
  Pallas's TPU interpreter raises at run time as it is meant to
  (`kernel_out_of_bounds`: the values decide it, as for an original); nor a
  program that computes with a dtype this CPU backend cannot compile at all
  (`backend_lacks_dtype`), which another backend may run (float6 in JAX
  0.10-0.12, where even `x + x` fails, is refused on load on CPU and TPU:
  a constant of it aborts the process there); nor a `platform_dependent`
  with no branch for this backend and no default (`other_platform`), which
  JAX's lowering refuses here as it refuses the original; nor a program
  whose lowered chain of dependent ops is past check.bounds.XLA_CPU_CHAIN
  (`past_compile_limit`: not compiled, since XLA's CPU compiler crashes on
  such a chain, as on an original one; loading refuses no chain, and a file
  can describe one through shared calls or an unrolled scan); nor a program
  that XLA aborts on compiling, as it aborts for the same program written
  in JAX (`xla_aborts_as_in_jax`, judged in the parent after its worker
  died: a while loop whose counter is added to itself, under jaxlib 0.10,
  openxla/xla#47384; see _known_xla_abort).

    .venv/bin/python tools/fuzz.py --cases 20000 --seed 1 --jobs 2  # a long run
    .venv/bin/python tools/fuzz.py --replay tests/fuzz_regressions  # re-judge saved cases
    .venv/bin/python tools/fuzz.py --atheris -- -runs=100000        # coverage-guided

Bad cases are written to --save (default /tmp/jaxpr_proto_fuzz) as .jaxpb
files; those worth keeping go to tests/fuzz_regressions/, which the test
suite replays. `--atheris` runs the same judge under atheris's
coverage-guided engine with this field-level mutator as its custom mutator
(atheris-libprotobuf-mutator needs bazel to build, which this machine's
registries do not have). tests/test_fuzz.py runs a bounded run.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import math
import multiprocessing
import os
import pathlib
import queue
import random
import signal
import sys
import time
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
REGRESSIONS = ROOT / "tests" / "fuzz_regressions"
TIME_LIMIT_S = float(os.environ.get("JAXPR_PROTO_FUZZ_TIME_LIMIT", "20"))
# Inputs of more bytes than this are not made: the case counts as loaded, not run.
MAX_INPUT_BYTES = 1 << 26

sys.path.insert(0, str(ROOT))

import jaxpr_proto as jp  # noqa: E402
from jaxpr_proto.check import bounds  # noqa: E402
from jaxpr_proto.v1 import jaxpr_pb2 as pb  # noqa: E402
from google.protobuf import descriptor as _descriptor  # noqa: E402

_FD = _descriptor.FieldDescriptor

# The outcomes that are not bad.
GOOD = ("refused", "ran", "loaded_not_run", "not_differentiable", "while_runs_on", "out_of_memory",
        "host_callback_failed", "check_not_functionalized", "needs_accelerator", "other_platform",
        "kernel_out_of_bounds", "backend_lacks_dtype", "past_compile_limit", "xla_aborts_as_in_jax")
# Saved cases whose seed's program can be pulled back end in this: their
# replay judges vjp too.
VJP_SUFFIX = "_vjp"


# --- seeds ---------------------------------------------------------------------

def golden_seeds() -> list[tuple[str, bytes]]:
  """The newest golden file of each program."""
  latest: dict[str, pathlib.Path] = {}
  for f in sorted(GOLDEN.glob("v1.*/*.jaxpb")):
    latest[f.stem] = f
  return [(f"golden/{k}", f.read_bytes()) for k, f in sorted(latest.items())]


def corpus_seeds(names=None) -> list[tuple[str, bytes]]:
  """Every corpus program (or those named), traced and dumped here."""
  sys.path.insert(0, str(ROOT / "tests"))
  import corpus
  out = []
  for p in corpus.PROGRAMS:
    if names is not None and p.name not in names:
      continue
    try:
      cj = corpus.trace(p)
      out.append((f"corpus/{p.name}", jp.dumps(cj)))
      out.append((f"columns/{p.name}", _in_columns(cj)))
    except Exception:  # a program this JAX cannot trace or jaxpr_proto cannot save
      pass
  return out


def _in_columns(cj) -> bytes:
  """`cj` dumped with the eqns of every jaxpr in columns, as those of a
  jaxpr of many eqns are written."""
  from jaxpr_proto.wire import columns
  was, columns.COLUMNS_FROM = columns.COLUMNS_FROM, 0
  try:
    return jp.dumps(cj)
  finally:
    columns.COLUMNS_FROM = was


def seeds(corpus: bool = True) -> list[tuple[str, bytes]]:
  return golden_seeds() + (corpus_seeds() if corpus else [])


# --- mutations -----------------------------------------------------------------

_INT_RANGES = {
    _FD.TYPE_UINT32: (0, 2**32 - 1), _FD.TYPE_UINT64: (0, 2**64 - 1),
    _FD.TYPE_INT32: (-2**31, 2**31 - 1), _FD.TYPE_SINT32: (-2**31, 2**31 - 1),
    _FD.TYPE_INT64: (-2**63, 2**63 - 1), _FD.TYPE_SINT64: (-2**63, 2**63 - 1),
    _FD.TYPE_ENUM: (-2**31, 2**31 - 1),
}
_STRINGS = ("", "x", "jax", "add", "axes", "jax::io", "jax::lax.GatherScatterMode",
            "threefry2x32", "b", "2*b + 1", "b >= 2", "-", "99999999999999999999",
            "\u00e9\u4e2d", "a" * 300, "jax::UNSPECIFIED", "jax::prng_impl",
            "jax::ad_checkpoint.SaveOnlyTheseNames", "out_sharding", "call_jaxpr",
            "jaxpr", "branches", "jax.pallas.core", "1" * 5000)


def _fields(msg, out, rng, depth=0):
  """Reservoir of (message, field, index) over the whole message tree."""
  for fd, value in msg.ListFields():
    if fd.is_repeated:
      out.append((msg, fd, None))  # the list itself
      for i, v in enumerate(value):
        out.append((msg, fd, i))
        if fd.type == _FD.TYPE_MESSAGE and depth < 60:
          _fields(v, out, rng, depth + 1)
    else:
      out.append((msg, fd, -1))
      if fd.type == _FD.TYPE_MESSAGE and depth < 60:
        _fields(value, out, rng, depth + 1)


def _interesting_int(rng, fd, current):
  lo, hi = _INT_RANGES.get(fd.type, (0, 2**32 - 1))
  c = int(current) if isinstance(current, (int, np.integer)) else 0
  choices = [0, 1, 2, 3, c + 1, c - 1, c + 2, c * 2, hi, lo, hi // 2, 2**31 - 1,
             2**32 - 1, -1, 2**40, rng.randint(lo, hi), rng.randint(0, 64), 100, 255]
  v = rng.choice(choices)
  return min(max(v, lo), hi)


def _new_value(rng, fd, current):
  t = fd.type
  if t in _INT_RANGES:
    return _interesting_int(rng, fd, current)
  if t == _FD.TYPE_BOOL:
    return not current
  if t in (_FD.TYPE_DOUBLE, _FD.TYPE_FLOAT):
    return rng.choice([0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), 1e308, 2.5])
  if t == _FD.TYPE_STRING:
    return rng.choice(_STRINGS)
  if t == _FD.TYPE_BYTES:
    b = bytes(current)
    return rng.choice([b"", b[: len(b) // 2], b + b"\0", b * 2, bytes(rng.randrange(256) for _ in range(8))])
  return None


def mutate_message(m: pb.Module, rng: random.Random) -> None:
  cands: list = []
  _fields(m, cands, rng)
  if not cands:
    return
  msg, fd, i = rng.choice(cands)
  container = getattr(msg, fd.name)
  if i is None:  # the repeated field as a whole
    n = len(container)
    op = rng.choice(["clear", "drop", "dup", "swap"])
    if op == "clear" or n == 0:
      msg.ClearField(fd.name)
    elif op == "drop":
      del container[rng.randrange(n)]
    elif op == "dup":
      k = rng.randrange(n)
      if fd.type == _FD.TYPE_MESSAGE:
        container.add().CopyFrom(container[k])
      else:
        container.append(container[k])
    elif n >= 2:
      a, b = rng.sample(range(n), 2)
      if fd.type == _FD.TYPE_MESSAGE:
        x, y = type(container[a])(), type(container[b])()
        x.CopyFrom(container[a]), y.CopyFrom(container[b])
        container[a].CopyFrom(y), container[b].CopyFrom(x)
      else:
        container[a], container[b] = container[b], container[a]
    return
  if fd.type == _FD.TYPE_MESSAGE:
    target = container[i] if i >= 0 else container
    if rng.random() < 0.5 and i < 0:
      msg.ClearField(fd.name)
    else:
      sub: list = []
      _fields(target, sub, rng)
      if sub:
        m2, fd2, i2 = rng.choice(sub)
        if i2 is None or fd2.type == _FD.TYPE_MESSAGE:
          m2.ClearField(fd2.name)
        else:
          _set(m2, fd2, i2, rng)
      else:
        msg.ClearField(fd.name) if i < 0 else None
    return
  _set(msg, fd, i, rng)


def _set(msg, fd, i, rng):
  try:
    if i is not None and i >= 0:
      rep = getattr(msg, fd.name)
      rep[i] = _new_value(rng, fd, rep[i])
    else:
      setattr(msg, fd.name, _new_value(rng, fd, getattr(msg, fd.name)))
  except (ValueError, TypeError):  # e.g. a value outside the field's range
    pass


def mutate_bytes(data: bytes, other: bytes, rng: random.Random) -> bytes:
  b = bytearray(data)
  if not b:
    return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
  op = rng.choice(["flip", "flip", "set", "truncate", "delete", "dup", "splice", "insert", "random"])
  n = len(b)
  if op == "flip":
    for _ in range(rng.randint(1, 8)):
      k = rng.randrange(n)
      b[k] ^= 1 << rng.randrange(8)
  elif op == "set":
    for _ in range(rng.randint(1, 4)):
      b[rng.randrange(n)] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
  elif op == "truncate":
    del b[rng.randrange(n):]
  elif op == "delete":
    k = rng.randrange(n)
    del b[k:k + rng.randint(1, 64)]
  elif op == "dup":
    k = rng.randrange(n)
    chunk = b[k:k + rng.randint(1, 256)]
    j = rng.randrange(n)
    b[j:j] = chunk
  elif op == "splice":
    k, j = rng.randrange(n), rng.randrange(len(other) or 1)
    b = b[:k] + other[j:]
  elif op == "insert":
    k = rng.randrange(n)
    b[k:k] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
  else:
    return bytes(rng.randrange(256) for _ in range(rng.randrange(2 * n)))
  return bytes(b)


def make_case(seed_list, k: int, base_seed: int = 0) -> tuple[str, bytes]:
  """Case k of a run: (label, bytes)."""
  rng = random.Random(base_seed * 1_000_003 + k)
  name, data = seed_list[rng.randrange(len(seed_list))]
  if rng.random() < 0.2:
    other = seed_list[rng.randrange(len(seed_list))][1]
    return f"{name}/bytes", mutate_bytes(data, other, rng)
  m = pb.Module()
  m.ParseFromString(data)
  for _ in range(rng.choice([1, 1, 1, 2, 3])):
    mutate_message(m, rng)
  try:
    return f"{name}/message", m.SerializeToString()
  except Exception:  # a message protobuf refuses to write (nesting, ...)
    return f"{name}/message", data


# --- judging ---------------------------------------------------------------------

class _Timeout(BaseException):
  pass


_alarmed = [False]  # whether the alarm went off in this case


def _alarm(signum, frame):
  _alarmed[0] = True
  raise _Timeout()


def _timed_out(e: Exception) -> bool:
  """Whether `e` is the alarm, raised inside a host callback (an interpreted
  Pallas kernel) and handed back by XLA as its own error."""
  return _alarmed[0] and "_Timeout" in f"{type(e).__name__}: {e}"


def _example(aval):
  """An input of type `aval`, or None when it would be too big."""
  import jax
  import jax.numpy as jnp
  shape = tuple(aval.shape)
  dtype = aval.dtype
  if any(not isinstance(d, (int, np.integer)) for d in shape):
    return None  # a symbolic shape
  n = int(np.prod(shape, dtype=object)) if shape else 1
  if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
    impl = dtype._impl
    data = np.zeros(shape + tuple(impl.key_shape), np.uint32)
    return None if data.nbytes > MAX_INPUT_BYTES else jax.random.wrap_key_data(data, impl=impl)
  if n * max(np.dtype(dtype).itemsize, 1) > MAX_INPUT_BYTES:
    return None
  if dtype == jax.dtypes.float0:
    return np.zeros(shape, dtype)
  if jnp.issubdtype(dtype, jnp.inexact):
    return _in_memory_space(np.full(shape, 0.5, dtype), aval)
  return _in_memory_space(np.ones(shape, dtype), aval)


def _in_memory_space(x, aval):
  """`x` where a program's input or output of type `aval` is: in host memory
  for a `float32<host>[3]` (an argument placed by jax.device_put(x,
  jax.memory.Space.Host) is traced so, and JAX's vjp wants a cotangent of
  the output's memory space: a user's own program needs these too)."""
  import jax
  space = getattr(aval, "memory_space", None)
  if space is None or space == jax.memory.Space.Device:
    return x
  return jax.device_put(x, space)


def _differentiable_args(cj):
  import jax.numpy as jnp
  return [jnp.issubdtype(a.dtype, jnp.floating) for a in cj.in_avals]


def _any_eqn(jaxpr, pred, depth=0) -> bool:
  """Whether an eqn of the program, sub-jaxprs included, satisfies pred."""
  from jaxpr_proto import compat
  for eqn in jaxpr.eqns:
    if pred(eqn):
      return True
    if depth < 50 and any(_any_eqn(getattr(s, "jaxpr", s), pred, depth + 1)
                          for s in compat.jaxprs_in_params(eqn.params)):
      return True
  return False


def _makes_too_big(eqn) -> bool:
  """Whether a value the eqn makes is over MAX_INPUT_BYTES: a program may
  need more memory than this machine has, which says nothing of the file."""
  for v in eqn.outvars:
    shape, dtype = getattr(v.aval, "shape", ()), getattr(v.aval, "dtype", None)
    if dtype is None or any(not isinstance(d, (int, np.integer)) for d in shape):
      continue
    n = int(np.prod(shape, dtype=object)) if shape else 1
    if n * max(getattr(dtype, "itemsize", 1), 1) > MAX_INPUT_BYTES:
      return True
  return False


def _jax_cannot_differentiate(eqn) -> bool:
  """An eqn whose vjp fails inside JAX just as for a program a user wrote:
  a max or min pool with negative padding (JAX 0.10-0.12 transpose it to a
  slice with a negative start; checked with lax.reduce_window), a
  custom_root whose tangent_solve JAX cannot transpose (one that is not
  linear in its tangents, as `lambda g, y: g(1.0) / y` is not), or betainc,
  which JAX does not differentiate in a and b (`jax.grad(lambda a:
  lax.betainc(a, 2., .5))(1.)` raises the same ValueError)."""
  if eqn.primitive.name in ("reduce_window_max", "reduce_window_min"):
    return any(p < 0 for pair in eqn.params["padding"] for p in pair)
  if eqn.primitive.name == "regularized_incomplete_beta":
    return True
  prim = eqn.params.get("_prim")
  return type(prim).__name__ == "CustomRoot" and not _transposes(prim, "tangent_solve")


def _zero_tangent_solve(e, cj) -> bool:
  """custom_linear_solve's jvp rule binds a symbolic zero (ad_util.Zero) as
  the right-hand side where that and the matvec's consts have zero tangents
  but the solve's consts do not; JAX fails so on a program a user wrote too
  (`lax.custom_linear_solve(lambda x: M @ x, b, solve=lambda mv, r:
  jnp.linalg.solve(A, r))`, its grad in A; device seed 761)."""
  return (isinstance(e, TypeError) and "custom_linear_solve" in str(e) and "Zero" in str(e)
          and _any_eqn(cj.jaxpr, lambda q: q.primitive.name == "custom_linear_solve"))


def _transposes(prim, param) -> bool:
  """Whether jax.linear_transpose takes a HiPrim's function param in its last argument."""
  import jax
  from jaxpr_proto import compat
  (*known, y), out, _ = compat.hiprim_functions(prim)[param]
  sds = lambda t: jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), t)
  fn = prim.params[param]

  def transposed(known, ct):
    return jax.linear_transpose(lambda y: fn(*known, y), sds(y))(ct)
  try:
    jax.make_jaxpr(transposed)(sds(known), sds(out))
    return True
  except Exception:
    return False


class _Executing:
  """Whether a case is executing its compiled program: 1 for a program with a
  while loop, 2 for one without, 0 before (loading, checking, compiling). A
  worker shares it with its Runner (a multiprocessing.Value), which reads it
  when XLA holds the worker so that its alarm cannot get through."""
  value = 0


_executing = _Executing()


# A scan of more steps than this may run past the time limit as it should;
# and an interpreted Pallas kernel simulating more cores or threads than
# MANY_CORES (each a Python thread: 255 of them took 26 s for a grid of 2).
LONG_SCAN = 10 ** 6
MANY_CORES = 16


def _loops_on(eqn) -> bool:
  """Whether the eqn is a loop that may run on: a while loop, or a scan or
  an interpreted Pallas grid of more than LONG_SCAN steps (lax.scan of
  length 2**31 - 1 runs for hours under JAX too), or an interpreted kernel
  on more than MANY_CORES cores."""
  name = eqn.primitive.name
  if name == "pallas_call":
    interpret = eqn.params.get("interpret")
    grid = getattr(eqn.params.get("grid_mapping"), "grid", ())
    cores = getattr(interpret, "num_cores_or_threads", None) or 1
    return bool(interpret) and (math.prod(d for d in grid if isinstance(d, int)) > LONG_SCAN
                                or cores > MANY_CORES)
  return name == "while" or (name == "scan" and eqn.params.get("length", 0) > LONG_SCAN)


def _run_program(cj, vjp: bool) -> str:
  """'ran', 'loaded_not_run' or 'past_compile_limit'; raises what JAX raised."""
  import jax
  from jax.extend.core import jaxpr_as_fun
  args = [_example(a) for a in cj.in_avals]
  if any(a is None for a in args) or _any_eqn(cj.jaxpr, _makes_too_big):
    return "loaded_not_run"
  f = jaxpr_as_fun(cj)
  loops = _any_eqn(cj.jaxpr, _loops_on)

  def execute(fn) -> bool:  # compiled first: only the execution may be a loop that runs on
    lowered = jax.jit(fn).lower(*args)
    if bounds.compiled_chain(lowered.compiler_ir("stablehlo")) > bounds.XLA_CPU_CHAIN:
      return False  # XLA's CPU compiler would crash (SIGSEGV) on it
    compiled = lowered.compile()
    _executing.value = 1 if loops else 2
    jax.block_until_ready(compiled(*args))
    _executing.value = 0
    return True

  if not execute(f):
    return "past_compile_limit"
  if vjp:  # under jit, as grad is used (JAX's eager impls differ: sharding_constraint's)
    def pulled_back(*args):
      out, pull = jax.vjp(f, *args)
      return pull([np.zeros(o.shape, o.dtype) if o.dtype == jax.dtypes.float0
                   else _in_memory_space(jax.numpy.ones(o.shape, o.dtype), jax.typeof(o))
                   for o in out])
    if not execute(pulled_back):
      return "past_compile_limit"
  return "ran"


def _vjp_ok(cj) -> bool:
  """Whether a seed's program can be pulled back (JAX's vjp of it works)."""
  import jax.numpy as jnp
  if not all(jnp.issubdtype(a.dtype, jnp.floating) for a in list(cj.in_avals) + list(cj.out_avals)):
    return False
  try:
    return _run_program(cj, vjp=True) == "ran"
  except Exception:
    return False


# Run outcomes by program (`_program_key`): most mutations that load change
# only what running does not read (source info), and compiling again the
# same program is most of a case's time.
_RUNS: dict = {}


def _program_key(data: bytes) -> bytes:
  """A digest of the file without its source info (tracebacks, frames and
  their strings): everything else, custom rules and their debug info
  included, is part of the key, so that two cases that may run differently
  never share an outcome."""
  import hashlib
  m = pb.Module()
  m.ParseFromString(data)
  for field in ("strings", "frames", "tracebacks"):
    m.ClearField(field)
  for j in m.jaxprs:
    for e in j.eqns:
      e.traceback = 0
  return hashlib.sha256(m.SerializeToString(deterministic=True)).digest()


def _closed(x):
  return x.closed_jaxpr if isinstance(x, jp.Function) else x


_RUNS_ON = ("while_runs_on", "a loop (a while, a long scan, an interpreted kernel on many cores) "
            "ran past the time limit after compiling")


def _past_time_limit(stage: str) -> tuple[str, str]:
  if _executing.value == 1:
    # A while loop whose condition stays true runs on under JAX too: whether
    # a loop ends is undecidable, so no loader can refuse it.
    return _RUNS_ON
  return "hang", f"{stage} (executing)" if _executing.value else stage


def _failed(stage: str, e: Exception, cj) -> tuple[str, str]:
  """What JAX raised: out of memory is a program bigger than this machine
  (a 2**31-element padding that the gradient materialises), as _makes_too_big."""
  if "RESOURCE_EXHAUSTED: Out of memory" in str(e):
    return "out_of_memory", f"{stage}: {str(e)[:300]}"
  if cj is not None and "callback" in str(e).lower() and _any_eqn(cj.jaxpr, _calls_back):
    # The host function (the reader's own, bound by name) raised, or gave
    # other types than the file declares: as it would for a user's program.
    return "host_callback_failed", f"{stage}: {str(e)[:300]}"
  if (cj is not None and "checkify.check which was not functionalized" in str(e)
      and _any_eqn(cj.jaxpr, lambda eqn: eqn.primitive.name == "check")):
    return "check_not_functionalized", f"{stage}: {str(e)[:300]}"
  if (cj is not None and "'platform_index(" in str(e) and "not found for platform" in str(e)
      and _any_eqn(cj.jaxpr, _for_other_platforms)):
    return "other_platform", f"{stage}: {str(e)[:300]}"
  if cj is not None and _any_eqn(cj.jaxpr, lambda eqn: eqn.primitive.name == "pallas_call"):
    if "Only interpret mode is supported on CPU backend" in str(e):
      return "needs_accelerator", f"{stage}: {str(e)[:300]}"
    if "IndexError: Out-of-bounds " in f"{type(e).__name__}: {e}":  # (under jit: in a callback)
      return "kernel_out_of_bounds", f"{stage}: {str(e)[:300]}"
  if cj is not None and _any_eqn(cj.jaxpr, lambda eqn: any(
      getattr(v.aval, "dtype", None) in _cpu_unusable_dtypes() for v in (*eqn.invars, *eqn.outvars))):
    return "backend_lacks_dtype", f"{stage}: {str(e)[:300]}"
  return "fails_in_jax", f"{stage}: {type(e).__name__}: {str(e)[:1500]}"


def _known_xla_abort(data: bytes) -> bool:
  """Whether the case's program meets an XLA bug that aborts the process
  compiling it, as it aborts for the same program written in JAX: a while
  loop whose body adds a carried value to itself (`i + i`) fails a CHECK in
  the trip count analysis of jaxlib 0.10's XLA (openxla/xla#47384, fixed in
  0.11). No loader can refuse every program that XLA simplifies to that, so
  the README and docs/untrusted.md say to compile untrusted programs in a
  process of their own (jp.run_isolated). Judged in the parent after its
  worker died of SIGABRT (loading is safe here; nothing is compiled)."""
  import jaxlib
  from jaxpr_proto import compat
  if compat.parse_version(jaxlib.__version__)[:2] >= (0, 11):
    return False
  try:
    cj = _closed(jp.loads(data))
  except Exception:
    return False

  def doubles_a_counter(eqn) -> bool:
    if eqn.primitive.name != "while":
      return False
    body = eqn.params["body_jaxpr"].jaxpr
    carried = body.invars[eqn.params["body_nconsts"]:]
    made = {id(e.outvars[0]): e for e in body.eqns if len(e.outvars) == 1}
    for k, out in enumerate(body.outvars):
      e = made.get(id(out))
      if (e is not None and e.primitive.name == "add" and k < len(carried)
          and all(x is carried[k] for x in e.invars)):
        return True
    return False
  return _any_eqn(cj.jaxpr, doubles_a_counter)


def _for_other_platforms(eqn) -> bool:
  """A platform_index with no branch for this backend and no default."""
  import jax
  platforms = eqn.params.get("platforms") if eqn.primitive.name == "platform_index" else None
  return bool(platforms) and None not in platforms and not any(
      jax.default_backend() in ps for ps in platforms)


_UNUSABLE = None


def _cpu_unusable_dtypes() -> frozenset:
  """The dtypes with which the CPU backend compiles not even `x + x`."""
  global _UNUSABLE
  if _UNUSABLE is None:
    import jax
    import ml_dtypes
    found = set()
    for name in dir(ml_dtypes):
      try:
        dt = np.dtype(getattr(ml_dtypes, name))
        x = np.zeros(2, dt)
      except Exception:  # not a dtype
        continue
      try:
        jax.jit(lambda x: x + x)(x).block_until_ready()
      except TypeError:  # not one JAX takes
        pass
      except Exception:  # XLA's: the backend cannot compile it
        found.add(dt)
    _UNUSABLE = frozenset(found)
  return _UNUSABLE


def _calls_back(eqn) -> bool:
  from jaxpr_proto import compat
  return eqn.primitive.name in compat.CALLBACK_PRIMITIVES


def judge(data: bytes) -> tuple[str, str]:
  """(outcome, detail) of one case, run in this process: an outcome in GOOD,
  or 'escaped', 'unchecked', 'disagree', 'fails_in_jax', 'hang'."""
  old = signal.signal(signal.SIGALRM, _alarm)
  _alarmed[0] = False
  signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
  _executing.value = 0
  stage = "jp.loads"
  try:
    try:
      loaded = jp.loads(data)
      error = None
    except jp.DecodeError as e:
      if isinstance(e, jp.InternalError):
        return "unchecked", f"jp.loads: {e}"
      loaded, error = None, e
    stage = "jp.check"
    report = jp.check(data)
    if report.ok != (error is None):
      said = f"loads: {error}" if error else "loads accepts it"
      return "disagree", f"{said}; check: {report.format()[:2000]}"
    if error is not None:
      return "refused", type(error).__name__
    stage = "running"
    cj = _closed(loaded)
    key = _program_key(data)
    if key not in _RUNS:
      try:
        _RUNS[key] = _run_program(cj, vjp=False), ""
      except _Timeout:
        raise
      except Exception as e:
        if _timed_out(e):
          raise _Timeout() from None
        _RUNS[key] = _failed("jit", e, cj)
    return _RUNS[key]
  except _Timeout:
    return _past_time_limit(stage)
  except Exception as e:
    return "escaped", f"{stage}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-6)}"
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def judge_vjp(data: bytes) -> tuple[str, str]:
  """For a case that ran, of a differentiable seed: its vjp must run too."""
  old = signal.signal(signal.SIGALRM, _alarm)
  _alarmed[0] = False
  signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
  _executing.value = 0
  cj = None
  try:
    cj = _closed(jp.loads(data))
    if not all(d for d in _differentiable_args(cj)):
      return "ran", ""
    key = (_program_key(data), "vjp")
    if key not in _RUNS:
      _RUNS[key] = _run_program(cj, vjp=True), ""
    return _RUNS[key]
  except _Timeout:
    return _past_time_limit("vjp")
  except NotImplementedError as e:  # JAX has no rule for it (a window-dilated max pool): it ran
    return "not_differentiable", f"vjp: {e}"
  except Exception as e:
    if _timed_out(e):
      return _past_time_limit("vjp")
    if cj is not None and (_any_eqn(cj.jaxpr, _jax_cannot_differentiate)
                           or _zero_tangent_solve(e, cj)):
      return "not_differentiable", f"vjp: {type(e).__name__}: {e}"
    return _failed("vjp", e, cj)
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


# --- a worker process, so that a crash is a finding, not the end -----------------

def _worker(conn, executing):
  global _executing
  _executing = executing
  import jax
  jax.config.update("jax_platforms", "cpu")
  _import_pallas()  # (decoding never imports: a process that reads kernels has Pallas)
  vjp_seeds: dict[str, bool] = {}
  cases = 0
  while True:
    msg = conn.recv()
    if msg is None:
      return
    data, seed_name, seed_data, vjp = msg
    cases += 1
    if cases % 500 == 0:  # what jit keeps of each program it compiled
      jax.clear_caches()
    outcome, detail = judge(data)
    if outcome != "refused" and vjp is None:  # judged by whether the seed's vjp runs
      vjp = vjp_seeds.get(seed_name)
      if vjp is None:
        try:
          vjp = _vjp_ok(_closed(jp.loads(seed_data)))
        except Exception:
          vjp = False
        vjp_seeds[seed_name] = vjp
    if outcome == "ran" and vjp:
      outcome, detail = judge_vjp(data)
    conn.send((outcome, detail, bool(vjp)))


def _import_pallas() -> None:
  import importlib
  for name in ("jax.experimental.pallas", "jax.experimental.pallas.tpu",
               "jax.experimental.pallas.triton", "jax.experimental.pallas.mosaic_gpu"):
    try:
      importlib.import_module(name)
    except ImportError:  # (a backend this jaxlib lacks)
      pass


# Outcomes where the worker's alarm stopped a case mid-way.
_STOPPED = ("hang", "while_runs_on")


class Runner:
  """Judges cases in a worker process; a worker that dies or stops
  answering is a crash or a hang, and is replaced."""

  def __init__(self):
    self._ctx = multiprocessing.get_context("spawn")
    self._proc = None

  def _start(self):
    self._conn, child = self._ctx.Pipe()
    self._executing = self._ctx.Value("b", 0, lock=False)
    self._proc = self._ctx.Process(target=_worker, args=(child, self._executing), daemon=True)
    self._proc.start()
    child.close()

  def judge(self, data: bytes, seed_name: str = "", seed_data: bytes = b"",
            vjp: bool | None = None) -> tuple[str, str, bool]:
    """(outcome, detail, whether vjp is judged) of one case. vjp=None judges
    it where the seed's program can be pulled back."""
    if self._proc is None or not self._proc.is_alive():
      self._start()
    self._conn.send((data, seed_name, seed_data, vjp))
    # Startup (importing JAX) and a first compile take a while; then the
    # worker's own alarm answers within TIME_LIMIT_S per stage.
    if self._conn.poll(4 * TIME_LIMIT_S + 60):
      try:
        result = self._conn.recv()
      except (EOFError, ConnectionResetError):  # the worker died mid-answer
        pass
      else:
        if result[0] in _STOPPED:  # XLA may still be running it: the next case gets a new worker
          self.close()
        return result
    else:
      self.close()
      if self._executing.value == 1:  # XLA held it in a while loop (see _past_time_limit)
        return (*_RUNS_ON, bool(vjp))
      return "hang", "the worker did not answer", bool(vjp)
    code = None
    if self._proc is not None:
      self._proc.join(5)  # (then its exit code is known: read before, it was often None)
      code = self._proc.exitcode
    self._proc = None
    sig = -code if code is not None and code < 0 else None
    if sig == signal.SIGABRT and _known_xla_abort(data):
      return ("xla_aborts_as_in_jax", "XLA aborted compiling a while loop whose counter is added "
              "to itself (openxla/xla#47384, jaxlib < 0.11), as for the program written in JAX",
              bool(vjp))
    return "crash", (f"the worker died of signal {sig} ({signal.Signals(sig).name})"
                     if sig else f"the worker exited with {code}"), bool(vjp)

  def close(self):
    if self._proc is not None:
      if self._proc.is_alive():
        self._proc.kill()
      self._proc.join(5)
      self._proc = None


def fuzz(n_cases: int, first: int = 0, base_seed: int = 0, seed_list=None, save=None, log=None,
         jobs: int = 1, seconds: float | None = None):
  """Runs cases first .. first+n_cases-1 in `jobs` worker processes, or as
  many of them as `seconds` allows (cases not started by then are not
  judged, nor counted); returns a summary dict."""
  seed_list = seed_list if seed_list is not None else seeds()
  seed_bytes = dict(seed_list)
  runners: queue.SimpleQueue = queue.SimpleQueue()
  all_runners = [Runner() for _ in range(jobs)]
  for r in all_runners:
    runners.put(r)
  counts: collections.Counter = collections.Counter()
  failures = []
  t0 = time.time()

  def one(k):
    if seconds is not None and time.time() - t0 > seconds:
      return None
    label, data = make_case(seed_list, k, base_seed)
    seed_name = label.rsplit("/", 1)[0]
    runner = runners.get()
    try:
      return k, label, data, runner.judge(data, seed_name, seed_bytes[seed_name])
    finally:
      runners.put(runner)

  try:
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
      for result in pool.map(one, range(first, first + n_cases)):
        if result is None:
          continue
        k, label, data, (outcome, detail, vjp) = result
        counts[outcome] += 1
        if outcome not in GOOD:
          failures.append((k, label, outcome, detail))
          if save:
            os.makedirs(save, exist_ok=True)
            suffix = VJP_SUFFIX if vjp else ""  # replay judges vjp too
            pathlib.Path(save, f"s{base_seed}_c{k}_{outcome}{suffix}.jaxpb").write_bytes(data)
        done = sum(counts.values())
        if log and done % 500 == 0:
          log(f"{done} cases, {dict(counts)}, {time.time() - t0:.0f}s")
  finally:
    for r in all_runners:
      r.close()
  return {"cases": sum(counts.values()), "counts": dict(counts), "failures": failures,
          "seconds": time.time() - t0, "seeds": len(seed_list), "base_seed": base_seed,
          "first": first}


def format_result(result) -> str:
  bad = sum(v for k, v in result["counts"].items() if k not in GOOD)
  lines = [f"{result['cases']} cases (seed {result['base_seed']}, from case {result['first']}) over {result['seeds']} seeds "
           f"in {result['seconds']:.0f}s: {result['counts']}; {bad} bad"]
  for k, label, outcome, detail in result["failures"][:40]:
    lines.append(f"  case {k} ({label}): {outcome}: {detail[:600]}")
  return "\n".join(lines)


def replay(folder) -> list[tuple[str, str, str]]:
  """(file, outcome, detail) of each saved case, judged again (vjp too
  where the file name ends in VJP_SUFFIX)."""
  runner = Runner()
  out = []
  try:
    for f in sorted(pathlib.Path(folder).glob("*.jaxpb")):
      outcome, detail, _ = runner.judge(f.read_bytes(), vjp=f.stem.endswith(VJP_SUFFIX))
      out.append((f.name, outcome, detail))
  finally:
    runner.close()
  return out


# --- atheris ---------------------------------------------------------------------

def run_atheris(argv, corpus: bool = True) -> None:
  """Coverage-guided fuzzing: atheris picks inputs; this module's field-level
  mutator (`mutate_message`) changes them; `judge` runs in this process, so
  a crash or an uncaught exception stops atheris with the input saved."""
  import atheris
  seed_list = seeds(corpus=corpus)

  def custom_mutator(data, max_size, seed):
    rng = random.Random(seed)
    m = pb.Module()
    try:
      m.ParseFromString(data)
    except Exception:
      m.ParseFromString(seed_list[rng.randrange(len(seed_list))][1])
    if not m.ListFields():
      m.ParseFromString(seed_list[rng.randrange(len(seed_list))][1])
    mutate_message(m, rng)
    try:
      out = m.SerializeToString()
    except Exception:
      out = data
    return out[:max_size] if len(out) > max_size else out

  def test_one_input(data):
    outcome, detail = judge(bytes(data))
    if outcome not in GOOD:
      raise RuntimeError(f"{outcome}: {detail}")

  corpus_dir = pathlib.Path("/tmp/jaxpr_proto_atheris_corpus")
  corpus_dir.mkdir(exist_ok=True)
  for name, data in seed_list:
    (corpus_dir / (name.replace("/", "_") + ".jaxpb")).write_bytes(data)
  atheris.instrument_all()  # jaxpr_proto is imported already
  if not any(a.startswith("-max_len=") for a in argv):  # libFuzzer's default, 4096, cuts every seed
    argv = [*argv, f"-max_len={max(len(d) for _, d in seed_list) * 2}"]
  if not any(a.startswith("-artifact_prefix=") for a in argv):  # not crash-* files in the checkout
    argv = [*argv, f"-artifact_prefix={corpus_dir.parent}/jaxpr_proto_atheris_"]
  atheris.Setup([sys.argv[0], *argv, str(corpus_dir)], test_one_input, custom_mutator=custom_mutator)
  atheris.Fuzz()


def main(argv=None):
  ap = argparse.ArgumentParser(description="Fuzz loading .jaxpb files: what loads must run.")
  ap.add_argument("--cases", type=int, default=1000)
  ap.add_argument("--first", type=int, default=0)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--jobs", type=int, default=1, help="worker processes judging cases at once")
  ap.add_argument("--seconds", type=float, help="start no case after this many seconds")
  ap.add_argument("--golden-only", action="store_true", help="seeds: the golden files only")
  ap.add_argument("--save", default="/tmp/jaxpr_proto_fuzz", help="folder for bad cases")
  ap.add_argument("--replay", help="judge the .jaxpb files of a folder again")
  ap.add_argument("--atheris", action="store_true", help="coverage-guided, with atheris")
  args, rest = ap.parse_known_args(argv)
  if args.atheris:
    run_atheris(rest, corpus=not args.golden_only)
    return 0
  if args.replay:
    bad = 0
    for name, outcome, detail in replay(args.replay):
      print(f"{name}: {outcome} {detail[:300]}")
      bad += outcome not in GOOD
    return 1 if bad else 0
  result = fuzz(args.cases, args.first, args.seed, seeds(corpus=not args.golden_only),
                save=args.save, log=lambda s: print(s, flush=True), jobs=args.jobs,
                seconds=args.seconds)
  print(format_result(result), flush=True)
  return 1 if result["failures"] else 0


if __name__ == "__main__":
  sys.exit(main())
