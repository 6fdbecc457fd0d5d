"""The arrays `run` reads and writes: inputs from .npz/.npy files (by name,
a Function's argument paths such as `p/w`, or in order) or random, and the
outputs to an .npz by name."""
from __future__ import annotations

import os
import re
import warnings
import zipfile
from io import BytesIO

import numpy as np

from jaxpr_proto.cli.exits import CheckFailed, UsageError
from jaxpr_proto.cli.printing import avals_str
from jaxpr_proto.wire import files

_IN_ORDER = re.compile(r"arr_(\d+)")  # as np.savez(path, *arrays) names them
_LISTED = 8  # names listed in one line of an error


def load_inputs(paths, in_avals, names=None, static=()):
  """.npz/.npy files -> one array per input, checked against `in_avals`.

  An .npz holds arr_0, arr_1, ... (np.savez(path, *arrays)), taken in order
  as .npy files are, or arrays named as the inputs `names` (a Function's
  argument paths, or a program's argument names): then every name must be
  there, and no other. `static` ({path: value}) are the leaves fixed when
  the Function was traced, which are not inputs.
  """
  ordered, named, where = [], {}, {}
  for path in paths:
    if path.endswith(".npy"):
      ordered.append((os.path.basename(path), np.load(path, allow_pickle=False)))
      continue
    if not path.endswith(".npz"):
      raise UsageError(f"{path}: inputs must be .npz or .npy files")
    with np.load(path, allow_pickle=False) as z:
      keys = list(z.files)
      if keys and all(_IN_ORDER.fullmatch(k) for k in keys):
        ordered.extend((k, z[k]) for k in sorted(keys, key=lambda k: int(k[4:])))
        continue
      for k in keys:
        if k in named:
          raise CheckFailed(f"{path}: input {k!r} is also in {where[k]}")
        named[k], where[k] = z[k], path
  if ordered and named:
    raise CheckFailed("give the inputs either by name (" + _listed(named) + ") or in order "
                      "(arr_0, arr_1, ..., .npy files), not both")
  if named:
    ordered = _by_name(named, names, static, in_avals, ", ".join(sorted(set(where.values()))))
  if len(ordered) != len(in_avals):
    raise CheckFailed(f"the program takes {len(in_avals)} inputs ({avals_str(in_avals)}); "
                      f"got {len(ordered)}")
  return [_checked(k, name, x, a) for k, ((name, x), a) in enumerate(zip(ordered, in_avals))]


def _by_name(named, names, static, in_avals, files_):
  """[(name, array)] in the inputs' order; one line naming every input
  that is missing and every array that is not an input."""
  if not names or len(set(names)) != len(names):
    raise CheckFailed(f"{files_}: the program's inputs have no names ({avals_str(in_avals)}); "
                      "give them in order, as arr_0, arr_1, ... (np.savez(path, *arrays))")
  missing = [f"{n} ({avals_str([a])})" for n, a in zip(names, in_avals) if n not in named]
  extra = [k for k in named if k not in names]
  if missing or extra:
    said = []
    if missing:
      said.append("missing " + _listed(missing))
    fixed = [k for k in extra if k in static]
    if fixed:
      said.append("static, fixed when traced (leave out): " + _listed(fixed))
    other = [k for k in extra if k not in static]
    if other:
      said.append("not an input: " + _listed(other))
    raise CheckFailed(f"{files_}: " + "; ".join(said) + f"; the inputs are {_listed(names)}")
  return [(n, named[n]) for n in names]


def _listed(names) -> str:
  names = list(names)
  more = f", ... ({len(names)} in all)" if len(names) > _LISTED else ""
  return ", ".join(names[:_LISTED]) + more


def _checked(k, name, x, a):
  """`x` as input `k` of type `a`: the same shape, and the same dtype or
  one whose values all convert to it exactly."""
  shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
  got = f"{x.dtype}[{','.join(map(str, x.shape))}]"
  if shape is None or tuple(x.shape) != tuple(shape):
    raise CheckFailed(f"input {k} ({name}): expected {avals_str([a])}, got {got}")
  if x.dtype != dtype:
    x, bad = _exactly(x, dtype)
    if bad:
      raise CheckFailed(f"input {k} ({name}): expected {avals_str([a])}, got {got}, whose "
                        f"values {bad} {dtype} cannot hold exactly")
  return x


def write_outputs(path, names, outs) -> None:
  """The outputs to an .npz, each under its name, as np.savez writes them
  (written here: np.savez takes the names as keywords, and an output may be
  named `file`)."""
  buf = BytesIO()
  with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
    for name, x in zip(names, outs):
      with z.open(f"{name}.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array(f, np.asarray(x), allow_pickle=False)
  files.write_atomic(path, buf.getvalue())


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
