"""A mutation fuzzer for decoding untrusted .jaxpb files.

Seeds are .jaxpb files of the test corpus (tests/golden/) plus a small
program built here. Each case mutates one seed, either its bytes (bit flips,
byte edits, truncations, deletions, duplications, splices with another seed)
or its message (a random field anywhere in the Module set to an interesting
value: indices just in and out of range, huge and negative numbers, unknown
enum numbers, other strings, repeated fields dropped, duplicated or
reordered, sub-messages cleared), then

* decodes it with `jp.loads`, which must return or raise `jp.DecodeError`;
  any other exception, or a DecodeError from the decoder's last-resort
  wrapper (`jp.InternalError`: a check the decoder lacks), fails the test;
* checks it with `jp.check`, which must return a report and raise nothing;

each under a time limit (a hang fails the test), and watches the process's
peak memory.

CI runs `JAXPR_PROTO_FUZZ_CASES` cases (default 400, a few seconds). Run
more on demand:

    JAXPR_PROTO_FUZZ_CASES=20000 .venv/bin/python -m pytest tests/test_fuzz.py -n0 -s
    .venv/bin/python -m tests.test_fuzz --cases 20000 --seed 1   # same, as a script

A failing case prints its seed number: `--first N --cases 1` replays it.
"""
from __future__ import annotations

import argparse
import collections
import os
import pathlib
import random
import resource
import signal
import sys
import time
import traceback

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import jaxpr_proto as jp
from jaxpr_proto.v1 import jaxpr_pb2 as pb
from google.protobuf import descriptor as _descriptor

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
CASES = int(os.environ.get("JAXPR_PROTO_FUZZ_CASES", "400"))
TIME_LIMIT_S = float(os.environ.get("JAXPR_PROTO_FUZZ_TIME_LIMIT", "20"))
_FD = _descriptor.FieldDescriptor

# Corpus programs used as seeds: small, and together they cover control flow,
# custom derivative rules, keys, sub-byte and float8 types, literals, effects.
SEED_PROGRAMS = (
    "cond_switch", "while_loop_newton", "scan_variants", "nested_jit",
    "user_custom_jvp", "user_custom_vjp", "random_key_arg", "lowbit_int_roundtrip", "sorting_ops", "custom_root_sqrt",
    "float8_roundtrip", "float0_traced_grad", "named_scopes", "state_refs",
    "lax_gather_scatter_direct", "tokens_and_barrier", "checkpoint_policies",
)


def _inline_seed() -> bytes:
  def f(x, y):
    z = jax.lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
    w = jax.lax.fori_loop(0, 3, lambda i, c: c + i, y)
    return jnp.sin(z) + w * np.arange(3, dtype=np.float32)
  cj = jax.make_jaxpr(f)(np.ones(3, np.float32), np.float32(2.0))
  return jp.dumps(cj)


def seeds() -> list[tuple[str, bytes]]:
  out = [("inline", _inline_seed())]
  for name in SEED_PROGRAMS:
    files = sorted(GOLDEN.glob(f"v*/{name}.jaxpb"))
    if files:
      out.append((name, files[-1].read_bytes()))
  return out


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
  rng = random.Random(base_seed * 1_000_003 + k)
  name, data = seed_list[rng.randrange(len(seed_list))]
  if rng.random() < 0.35:
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


# --- running cases ---------------------------------------------------------------

class _Timeout(BaseException):
  pass


def _alarm(signum, frame):
  raise _Timeout()


def run_case(data: bytes) -> tuple[str, str]:
  """(outcome, detail): outcome is 'ok', 'decode_error', or a failure kind."""
  old = signal.signal(signal.SIGALRM, _alarm)
  signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
  try:
    try:
      jp.loads(data)
      outcome, detail = "ok", ""
    except jp.DecodeError as e:
      if isinstance(e, jp.InternalError):
        outcome, detail = "unchecked", f"{type(e).__name__}: {e}"
      else:
        outcome, detail = "decode_error", type(e).__name__
    except _Timeout:
      return "hang", "jp.loads"
    except Exception as e:
      return "escaped", f"jp.loads: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-6)}"
    try:
      report = jp.check(data)
      if outcome == "ok" and not report.ok:
        # loading accepted what the checker rejects: only in parts decoding
        # does not build (custom rules' jaxprs, unreached table entries).
        detail = "check rejects a loadable file"
    except _Timeout:
      return "hang", "jp.check"
    except Exception as e:
      return "escaped", f"jp.check: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-6)}"
    return outcome, detail
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def fuzz(n_cases: int, first: int = 0, base_seed: int = 0, log=None):
  seed_list = seeds()
  counts: collections.Counter = collections.Counter()
  failures: list = []
  kinds: collections.Counter = collections.Counter()
  rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  t0 = time.time()
  for k in range(first, first + n_cases):
    label, data = make_case(seed_list, k, base_seed)
    outcome, detail = run_case(data)
    counts[outcome] += 1
    if outcome == "decode_error":
      kinds[detail] += 1
    if outcome in ("hang", "escaped", "unchecked"):
      failures.append((k, label, outcome, detail))
    if log and (k - first + 1) % 1000 == 0:
      log(f"{k - first + 1} cases, {dict(counts)}, {time.time() - t0:.0f}s")
  rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
  return {"cases": n_cases, "counts": dict(counts), "error_kinds": dict(kinds),
          "failures": failures, "seconds": time.time() - t0, "rss_growth_mb": rss_growth_mb,
          "seeds": [name for name, _ in seed_list]}


def _format(result) -> str:
  lines = [f"{result['cases']} cases in {result['seconds']:.1f}s over seeds "
           f"{', '.join(result['seeds'])}: {result['counts']}; DecodeError kinds "
           f"{result['error_kinds']}; peak RSS grew {result['rss_growth_mb']:.0f} MB"]
  for k, label, outcome, detail in result["failures"][:20]:
    lines.append(f"  case {k} ({label}): {outcome}: {detail}")
  return "\n".join(lines)


def test_fuzz_decode_and_check():
  result = fuzz(CASES)
  print(_format(result))
  assert len(result["seeds"]) >= 5, "the golden corpus files are missing (tests/golden/)"
  assert not result["failures"], _format(result)
  assert result["counts"].get("decode_error", 0) > CASES // 4  # the mutations do bite
  assert result["rss_growth_mb"] < 1024, _format(result)


def main(argv=None):
  ap = argparse.ArgumentParser(description="Fuzz jp.loads / jp.check.")
  ap.add_argument("--cases", type=int, default=CASES)
  ap.add_argument("--first", type=int, default=0)
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args(argv)
  result = fuzz(args.cases, args.first, args.seed, log=lambda s: print(s, flush=True))
  print(_format(result))
  return 1 if result["failures"] else 0


if __name__ == "__main__":
  sys.exit(main())
