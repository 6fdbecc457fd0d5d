"""Running a program from an untrusted file in a process of its own.

Loading a file never crashes the process (see docs/checker.md, "What loading
guarantees"); compiling the program it holds is XLA's work, and XLA has
bugs that abort the process on a valid program: with jaxlib 0.10, a while
loop whose counter is added to itself (`i + i`) fails a CHECK in XLA's trip
count analysis (openxla/xla#47384, fixed in jaxlib 0.11), and the same
program written in JAX aborts as well. No loader can refuse every program
that meets such a bug, so a service that compiles programs from files it
does not trust needs a process boundary: `run_isolated` loads, compiles and
runs a program in a child process, and a crash there is an exception here
(`jp.IsolatedRunError`).

    outs = jp.run_isolated("f.jaxpb", x, y, timeout=60)

The child is a fresh Python (`isolated._child`): it imports
jaxpr_proto (and the modules named in `setup`, which register primitives,
callbacks or pytree nodes, as the reading process would), loads the file
with every check, and calls `jax.jit` of the program on the arguments.
Arguments go to it pickled (they are the caller's); results come back as
NumPy arrays in an .npz (no pickle), errors as JSON.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import signal
import subprocess
import sys

import numpy as np

from jaxpr_proto import errors
from jaxpr_proto.errors import DecodeError, IsolatedRunError


def run_isolated(program, *args, timeout: float | None = None, setup=(),
                 python: str | None = None) -> list:
  """Loads `program` (a .jaxpb path, its bytes, or a ClosedJaxpr or
  jp.Function, written with jp.dumps first), then compiles and runs it on
  `args` in a child process; returns its outputs (the flat leaves, for a
  Function) as NumPy arrays.

  A file the child refuses raises `jp.DecodeError` (with its path); any
  other failure, a crash of the child or a `timeout` (seconds) passed, an
  `IsolatedRunError`. `setup` names modules the child imports before
  loading (where the program's primitives, callbacks or pytree nodes are
  registered). The child takes the caller's JAX configuration of 64-bit
  types and platforms; JAX picks its devices as any process does (where one
  process at a time may hold an accelerator, the caller should not).
  """
  import jax
  if isinstance(program, (str, os.PathLike)):
    with open(program, "rb") as f:
      data = f.read()
  elif isinstance(program, (bytes, bytearray, memoryview)):
    data = bytes(program)
  else:
    from jaxpr_proto import api
    data = api.dumps(program)
  request = {"data": data, "args": jax.device_get(args), "setup": list(setup),
             "x64": bool(jax.config.jax_enable_x64),
             "platforms": jax.config.jax_platforms or None}
  cmd = [python or sys.executable, "-c", "from jaxpr_proto.isolated import _child; _child()"]
  try:
    done = subprocess.run(cmd, input=pickle.dumps(request), capture_output=True,
                          timeout=timeout)
  except subprocess.TimeoutExpired as e:  # (subprocess.run kills the child)
    raise IsolatedRunError(f"the program ran past {timeout} s in its process", timed_out=True,
                           stderr=_tail(e.stderr)) from None
  out, stderr = done.stdout, _tail(done.stderr)
  if done.returncode < 0:
    sig = -done.returncode
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    raise IsolatedRunError(f"the program's process died of {name}: {_why(stderr)}",
                           signal=sig, returncode=done.returncode, stderr=stderr)
  if out[:1] == b"R":
    with np.load(io.BytesIO(out[1:]), allow_pickle=False) as z:
      return [z[f"arr_{k}"] for k in range(len(z.files))]
  if out[:1] == b"E":
    e = json.loads(out[1:].decode())
    if e.get("decode_error"):  # (its class, where it is one of jaxpr_proto's)
      cls = getattr(errors, e["kind"], DecodeError)
      cls = cls if isinstance(cls, type) and issubclass(cls, DecodeError) else DecodeError
      raise cls(e["message"], e.get("path", ""))
    raise IsolatedRunError(f"{e['kind']}: {e['message']}", kind=e["kind"],
                           returncode=done.returncode, stderr=stderr)
  raise IsolatedRunError(f"the program's process exited with {done.returncode}: {_why(stderr)}",
                         returncode=done.returncode, stderr=stderr)


def _tail(b, n: int = 4000) -> str:
  return (b or b"")[-n:].decode(errors="replace")


def _why(stderr: str) -> str:
  """The line of XLA's CHECK failure (or the last line) of the child's stderr."""
  lines = [ln for ln in stderr.splitlines() if ln.strip()]
  for ln in lines:
    if "Check failed" in ln or "F0" in ln[:3]:
      return ln.strip()[:500]
  return lines[-1].strip()[:500] if lines else "(nothing on stderr)"


def _child() -> None:
  out = os.fdopen(os.dup(1), "wb")
  os.dup2(2, 1)  # what JAX, XLA or the program print goes to stderr, not into the reply
  request = pickle.loads(sys.stdin.buffer.read())
  import importlib
  import jax
  if request["platforms"]:
    jax.config.update("jax_platforms", request["platforms"])
  jax.config.update("jax_enable_x64", request["x64"])
  for name in request["setup"]:
    importlib.import_module(name)
  from jaxpr_proto import api, function
  try:
    loaded = api.loads(request["data"])
    if isinstance(loaded, function.Function):
      results = jax.jit(loaded)(*request["args"])
    else:
      results = jax.jit(jax.extend.core.jaxpr_as_fun(loaded))(*request["args"])
    leaves = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(results))]
    buf = io.BytesIO()
    np.savez(buf, *leaves)
    out.write(b"R" + buf.getvalue())
  except DecodeError as e:
    out.write(b"E" + json.dumps({"decode_error": True, "kind": type(e).__name__,
                                 "message": e.message, "path": e.path}).encode())
  except Exception as e:
    out.write(b"E" + json.dumps({"kind": type(e).__name__, "message": str(e)[:20000]}).encode())
  out.flush()
