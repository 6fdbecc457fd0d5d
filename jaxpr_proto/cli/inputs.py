"""What the commands read: programs from files (with progress, and the file
named in errors), and the arrays `run` feeds them (.npz/.npy, or random)."""
from __future__ import annotations

import contextlib
import os
import re
import warnings

import numpy as np

import jaxpr_proto
from jaxpr_proto.cli.exits import CheckFailed, UsageError
from jaxpr_proto.cli.printing import avals_str
from jaxpr_proto.cli.progress import Progress
from jaxpr_proto.errors import Error
from jaxpr_proto.wire import external, files


@contextlib.contextmanager
def _naming_file(path):
  """Attach `path` to a jp.Error, so that the message says which file."""
  try:
    yield
  except Error as e:
    e.file = path
    raise


# --- programs ------------------------------------------------------------------

def read_module(path, progress: Progress | None = None):
  """Any form (by extension) -> Module, by jaxpr_proto.wire.files.read_module."""
  with _naming_file(path):
    if progress is not None:
      progress.stage(f"reading {os.path.basename(path)}")
    return files.read_module(path)


def decode(m, path, progress: Progress | None = None, unresolved: str = "error",
           keep_function: bool = False):
  """Module (read from `path`) -> ClosedJaxpr (a jp.Function's, for a file
  that holds one, unless `keep_function`: convert writes its signature);
  `unresolved` as for jp.decode (the commands that only show a program take
  placeholders)."""
  with _naming_file(path):
    if progress is not None:
      progress.stage(f"decoding {os.path.basename(path)}")
    out = jaxpr_proto.decode(m, external=external.Folder.beside(path), unresolved=unresolved)
  if isinstance(out, jaxpr_proto.Function) and not keep_function:
    return out.closed_jaxpr
  return out


def read_program(path, progress: Progress | None = None, unresolved: str = "error",
                 keep_function: bool = False):
  """-> (Module, ClosedJaxpr, or the Function with `keep_function`)."""
  m = read_module(path, progress)
  return m, decode(m, path, progress, unresolved, keep_function)


# --- arrays for `run` ------------------------------------------------------------

def load_inputs(paths, in_avals, arg_names):
  """.npz/.npy files -> one array per input, checked against `in_avals`.

  An .npz holds arr_0, arr_1, ... (as np.savez(*arrays) writes them) or the
  argument names `arg_names`; otherwise its arrays are taken in file order.
  """
  arrays, names = [], []
  for path in paths:
    if path.endswith(".npy"):
      arrays.append(np.load(path, allow_pickle=False))
      names.append(os.path.basename(path))
      continue
    if not path.endswith(".npz"):
      raise UsageError(f"{path}: inputs must be .npz or .npy files")
    with np.load(path, allow_pickle=False) as z:
      keys = list(z.files)
      if keys and all(re.fullmatch(r"arr_\d+", k) for k in keys):
        keys.sort(key=lambda k: int(k[4:]))  # arr_10 after arr_9
      elif arg_names and set(keys) == set(arg_names) and len(keys) == len(arg_names):
        keys = list(arg_names)
      arrays.extend(z[k] for k in keys)
      names.extend(keys)
  if len(arrays) != len(in_avals):
    raise CheckFailed(f"the program takes {len(in_avals)} inputs ({avals_str(in_avals)}); "
                      f"got {len(arrays)}")
  for k, (x, a, name) in enumerate(zip(arrays, in_avals, names)):
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    got = f"{x.dtype}[{','.join(map(str, x.shape))}]"
    if shape is None or tuple(x.shape) != tuple(shape):
      raise CheckFailed(f"input {k} ({name}): expected {avals_str([a])}, got {got}")
    if x.dtype != dtype:
      arrays[k], bad = _exactly(x, dtype)
      if bad:
        raise CheckFailed(f"input {k} ({name}): expected {avals_str([a])}, got {got}, whose "
                          f"values {bad} {dtype} cannot hold exactly")
  return arrays


def _exactly(x, dtype):
  """(x converted to dtype, '' ) when every value converts exactly (a step
  count saved as int64 for an i32[] input), else (x, the values that do not,
  a few of them with their indices)."""
  try:
    dt = np.dtype(dtype)
    with np.errstate(all="ignore"), warnings.catch_warnings():
      warnings.simplefilter("ignore")  # (complex to real, out-of-range casts)
      y = x.astype(dt)
      back = y.astype(x.dtype)
  except (TypeError, ValueError):  # PRNG keys and other extended dtypes
    return x, "(all of them)"
  same = back == x
  if np.issubdtype(x.dtype, np.inexact):
    same |= np.isnan(back) & np.isnan(x)
  if np.issubdtype(x.dtype, np.complexfloating) and not np.issubdtype(dt, np.complexfloating):
    same &= x.imag == 0
  if np.issubdtype(x.dtype, np.integer) and np.issubdtype(dt, np.integer):
    info = np.iinfo(dt)  # (a round trip through the other signedness wraps back)
    same &= (x >= info.min) & (x <= info.max)
  if np.all(same):
    return y, ""
  where = np.argwhere(~np.asarray(same))[:5]
  at = lambda i: f"[{','.join(map(str, i))}] " if x.ndim else ""
  shown = ", ".join(f"{at(i)}{x[tuple(i)].item()!r}" for i in where)
  return x, shown + (", ..." if np.count_nonzero(~np.asarray(same)) > 5 else "")


def random_inputs(in_avals, seed: int):
  """One array per input from a seeded generator: normal floats, small ints."""
  import ml_dtypes
  rng = np.random.default_rng(seed)
  out = []
  for k, a in enumerate(in_avals):
    shape = getattr(a, "shape", None)
    try:
      dt = np.dtype(getattr(a, "dtype", None))
    except TypeError:  # PRNG keys and other extended dtypes
      dt = None
    if dt is None or shape is None or not all(isinstance(d, int) for d in shape):
      raise CheckFailed(f"input {k}: cannot make a random {avals_str([a])}; use --inputs")
    if dt == np.bool_:
      x = rng.random(shape) < 0.5
    elif np.issubdtype(dt, np.complexfloating):
      x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    elif "int" in dt.name:  # int8..uint64, and ml_dtypes' int2/int4/uint2/uint4
      info = ml_dtypes.iinfo(dt)
      x = rng.integers(max(int(info.min), 0), min(int(info.max), 9) + 1, shape)
    elif "float" in dt.name and dt.itemsize > 0:
      x = rng.standard_normal(shape)
    else:
      raise CheckFailed(f"input {k}: cannot make a random {avals_str([a])}; use --inputs")
    out.append(np.asarray(x).astype(dt))
  return out
