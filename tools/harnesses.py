"""Round-trips every one of JAX's own primitive harnesses through jaxpr_proto.

    .venv/bin/python tools/harnesses.py                 # all harnesses this backend runs
    .venv/bin/python tools/harnesses.py --x64 --jobs 8  # with jax_enable_x64, 8 processes
    .venv/bin/python tools/harnesses.py --per-group 1   # a sample: the first of each group
    .venv/bin/python tools/harnesses.py --from-rank 5 --by-rank --skip done.json --time-limit 540
        # each group's 5th harness on, the 5th of every group first, leaving out
        # those done.json judged; stops starting harnesses after 540 s

JAX's harnesses (`jax._src.internal_test_util.test_harnesses`, the ones its
own export and lowering tests run) bind every primitive with the params JAX
gives it, including primitives bound without their optional params. They are
programs we did not write, so they measure what the param schemas refuse.

Each harness that JAX itself can run on this backend (its `jax_unimplemented`
limitations excluded, and a program whose original fails to trace or run is
counted as `jax_fails`, not against us) is traced with `jax.make_jaxpr`,
written with `jp.dumps`, read with `jp.loads`, and must

* print as the original (`str` of the ClosedJaxpr);
* give the same outputs, bit for bit, under `jax.jit`;
* `vmap` as the original does (a batch of two, the same bits);
* `jvp` as the original does (tangents of ones for inexact inputs; the same bits).

A harness that binds a primitive without a param JAX's rules need (`mul`
without `out_dtype`, `conj` without `input_dtype`: JAX runs it, but can
neither print nor differentiate it) is saved completed as JAX's public
function binds it (compat.public_defaults); it must print, vmap and jvp as
the original so completed, and give the original's outputs. It counts as
ok, with the message COMPLETED.

The verdicts, one per harness, are `ok` or the first check that failed, with
its message; the totals are printed per verdict, and `--json F` writes all.
tests/test_param_schemas.py runs a bounded sample of this in the suite.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import sys
import time
import traceback

import numpy as np

# The message of an ok harness whose eqns lacked a param that the encoder
# completed as JAX's public function binds it (see _completed).
COMPLETED = "completed as JAX's public function binds it"
VERDICTS = ("ok", "jax_fails", "save_fails", "load_fails", "prints_differently",
            "outputs_differ", "vmap_differs", "jvp_differs")


def harnesses(per_group: int | None = None, contains: str | None = None, *,
              from_rank: int = 1, by_rank: bool = False, skip=(),
              platform: str | None = None) -> list:
  """The harnesses JAX runs on this backend (or on `platform`), by name; with
  `per_group`, only the first N of each group. (By name, not in JAX's order:
  JAX defines some over sets of dtypes, whose order differs from process to
  process.) A harness's rank is its place in its group by name, counting
  from 1, among those this backend runs: with `from_rank`, only each group's
  from_rank-th on (up to its per_group-th); with `by_rank`, ordered by rank,
  then name (every group's first, then every group's second, ...), so that
  a run cut short has covered the groups alike; harnesses named in `skip`
  are left out (after ranking: the ranks do not move)."""
  from jax._src.internal_test_util import test_harnesses as th
  if platform is None:
    import jax
    platform = jax.devices()[0].platform
  skip = set(skip)
  out, seen = [], collections.Counter()
  for h in sorted(th.all_harnesses, key=lambda h: h.fullname):
    if not h.filter(platform, one_containing=contains):
      continue
    if per_group is not None and seen[h.group_name] >= per_group:
      continue
    seen[h.group_name] += 1
    if seen[h.group_name] >= from_rank and h.fullname not in skip:
      out.append((seen[h.group_name], h))
  if by_rank:
    out.sort(key=lambda t: (t[0], t[1].fullname))
  return [h for _, h in out]


def judged(path: str) -> set[str]:
  """The names of the harnesses a file of verdicts holds: this tool's --json
  output, or a --progress log (lines `verdict<TAB>harness<TAB>message`; other
  lines, such as JAX's warnings, are ignored)."""
  with open(path) as f:
    text = f.read()
  try:
    rows = json.loads(text)
  except ValueError:
    return {line.split("\t")[1] for line in text.splitlines()
            if line.split("\t")[0] in VERDICTS + ("tool_error",) and line.count("\t") >= 1}
  return {r["harness"] if isinstance(r, dict) else r for r in rows}


def _same(a, b) -> bool:
  """Whether two pytrees of arrays are equal bit for bit (dtypes and shapes too)."""
  import jax
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  if len(la) != len(lb):
    return False
  for x, y in zip(la, lb):
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype != y.dtype or x.shape != y.shape:
      return False
    if x.dtype.kind == "V" or x.dtype.name.startswith("key"):
      continue
    if x.tobytes() != y.tobytes():
      return False
  return True


def _text(closed_jaxpr) -> str:
  """The printed jaxpr, or the error JAX's printer raises (JAX cannot print
  `mul` bound without out_dtype, as its harnesses bind it)."""
  try:
    return str(closed_jaxpr)
  except Exception as e:
    return f"<JAX cannot print it: {type(e).__name__}: {e}>"


def _completed(closed_jaxpr):
  """The program with each eqn that lacks a param JAX's public function binds
  completed as that function binds it (compat.public_defaults, what the
  encoder writes: `mul` bound bare gets out_dtype=None), or the program
  itself where none lacks one. The loaded program prints and transforms as
  this; its outputs must equal the original's."""
  from jax.extend.core import ClosedJaxpr
  from jaxpr_proto.compat import public_defaults
  eqns = list(closed_jaxpr.jaxpr.eqns)
  changed = False
  for k, e in enumerate(eqns):
    full = public_defaults.completed(e)
    if full is not None:
      eqns[k], changed = e.replace(params=full), True
  if not changed:
    return closed_jaxpr, False
  return ClosedJaxpr(closed_jaxpr.jaxpr.replace(eqns=eqns), closed_jaxpr.consts), True


def _batch(args):
  """A batch of two of each argument: the argument and the argument reversed
  along a new leading axis, so that the two rows differ where they can."""
  out = []
  for a in args:
    a = np.asarray(a)
    out.append(np.stack([a, a[::-1] if a.ndim else a]))
  return out


def _tangents(args):
  import jax.numpy as jnp
  from jax import dtypes
  out = []
  for a in args:
    a = np.asarray(a)
    if jnp.issubdtype(a.dtype, jnp.inexact):
      out.append(np.ones_like(a))
    else:
      out.append(np.zeros(a.shape, dtypes.float0))
  return out


def check(h, rng_seed: int = 0) -> tuple[str, str]:
  """(verdict, message) of one harness."""
  import jax
  import jax.numpy as jnp
  import jaxpr_proto as jp
  from jax.extend.core import jaxpr_as_fun
  rng = np.random.RandomState(rng_seed)
  try:
    args = [np.asarray(a) if not isinstance(a, jax.Array) else a for a in h.dyn_args_maker(rng)]
    orig = jax.make_jaxpr(h.dyn_fun)(*args)
    f = jax.jit(jaxpr_as_fun(orig))
    want = f(*args)
    jax.block_until_ready(want)
  except Exception as e:
    return "jax_fails", f"{type(e).__name__}: {e}"[:300]
  try:
    data = jp.dumps(orig)
  except Exception as e:
    return "save_fails", f"{type(e).__name__}: {e}"[:300]
  try:
    loaded = jp.loads(data)
  except Exception as e:
    return "load_fails", f"{type(e).__name__}: {e}"[:300]
  ref, completed = _completed(orig)
  if _text(loaded) != _text(ref):
    return "prints_differently", _text(loaded)[:300]
  f = jax.jit(jaxpr_as_fun(ref))  # (vmap and jvp below: a bare mul's transpose rule needs out_dtype)
  g = jax.jit(jaxpr_as_fun(loaded))
  try:
    got = g(*args)
  except Exception as e:
    return "outputs_differ", f"{type(e).__name__}: {e}"[:300]
  if not _same(want, got):
    return "outputs_differ", "the loaded program's outputs differ"
  # vmap and jvp: compared only where the original itself transforms.
  arrays = all(isinstance(a, (np.ndarray, jax.Array)) for a in args)
  if arrays and args:
    batch = _batch(args)
    try:
      want_v = jax.jit(jax.vmap(f))(*batch)
    except Exception:
      want_v = None
    if want_v is not None:
      try:
        got_v = jax.jit(jax.vmap(g))(*batch)
      except Exception as e:
        return "vmap_differs", f"{type(e).__name__}: {e}"[:300]
      if not _same(want_v, got_v):
        return "vmap_differs", "the loaded program's vmap outputs differ"
    if any(jnp.issubdtype(np.asarray(a).dtype, jnp.inexact) for a in args):
      tangents = _tangents(args)
      try:
        want_t = jax.jit(lambda *a: jax.jvp(f, a, tangents))(*args)
      except Exception:
        want_t = None
      if want_t is not None:
        try:
          got_t = jax.jit(lambda *a: jax.jvp(g, a, tangents))(*args)
        except Exception as e:
          return "jvp_differs", f"{type(e).__name__}: {e}"[:300]
        if not _same(want_t, got_t):
          return "jvp_differs", "the loaded program's jvp outputs differ"
  return "ok", COMPLETED if completed else ""


def _run_slice(job):
  """The verdicts of harnesses k, k + n, k + 2n, ... (one worker process)."""
  k, n, opts = job
  import jax
  if opts["x64"]:
    jax.config.update("jax_enable_x64", True)
  out = []
  for h in harnesses(opts["per_group"], opts["contains"], from_rank=opts["from_rank"],
                     by_rank=opts["by_rank"], skip=opts["skip"])[k::n]:
    if opts["deadline"] is not None and time.time() >= opts["deadline"]:
      break  # (the harnesses not started are not in the verdicts)
    try:
      verdict, msg = check(h)
    except Exception:
      verdict, msg = "tool_error", traceback.format_exc()[-500:]
    out.append((h.fullname, h.group_name, verdict, msg))
    if opts["progress"]:  # (a run cut short by a time limit keeps what it judged)
      print(f"{verdict}\t{h.fullname}\t{' '.join(msg.split())[:200]}", flush=True)
    jax.clear_caches()
  return out


def run(*, jobs: int = 1, x64: bool = False, per_group: int | None = None,
        contains: str | None = None, progress: bool = False, from_rank: int = 1,
        by_rank: bool = False, skip=(), time_limit: float | None = None,
        ) -> list[tuple[str, str, str, str]]:
  """[(harness, group, verdict, message)] of every harness selected (see
  `harnesses`); with `progress`, each verdict is printed as it is reached;
  with `time_limit`, no harness is started after that many seconds."""
  deadline = None if time_limit is None else time.time() + time_limit
  opts = {"x64": x64, "per_group": per_group, "contains": contains, "progress": progress,
          "from_rank": from_rank, "by_rank": by_rank, "skip": sorted(set(skip)),
          "deadline": deadline}
  if jobs <= 1:
    return _run_slice((0, 1, opts))
  ctx = multiprocessing.get_context("spawn")
  with ctx.Pool(jobs) as pool:
    parts = pool.map(_run_slice, [(k, jobs, opts) for k in range(jobs)])
  return sorted((r for p in parts for r in p), key=lambda r: r[0])


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--jobs", type=int, default=1, help="worker processes")
  ap.add_argument("--x64", action="store_true", help="with jax_enable_x64")
  ap.add_argument("--per-group", type=int, default=None, help="the first N harnesses of each group")
  ap.add_argument("--contains", default=None, help="only harnesses whose name contains this")
  ap.add_argument("--json", default=None, help="write every verdict to this file")
  ap.add_argument("--progress", action="store_true", help="print each verdict as it is reached")
  ap.add_argument("--from-rank", type=int, default=1, metavar="N",
                  help="only each group's Nth harness on (its place in the group by name, from 1)")
  ap.add_argument("--by-rank", action="store_true",
                  help="in order of rank in the group, then name (every group's first, then "
                       "every group's second, ...), not by name")
  ap.add_argument("--skip", action="append", default=[], metavar="FILE",
                  help="leave out the harnesses this file judged (a --json output or a "
                       "--progress log); may be given more than once")
  ap.add_argument("--time-limit", type=float, default=None, metavar="S",
                  help="start no harness after S seconds; what was judged is reported and written")
  a = ap.parse_args(argv)
  if a.from_rank < 1:
    ap.error("--from-rank counts from 1")
  import jax
  skip = set().union(*(judged(f) for f in a.skip))
  rows = run(jobs=a.jobs, x64=a.x64, per_group=a.per_group, contains=a.contains,
             progress=a.progress, from_rank=a.from_rank, by_rank=a.by_rank, skip=skip,
             time_limit=a.time_limit)
  counts = collections.Counter(r[2] for r in rows)
  ran = len(rows) - counts["jax_fails"]
  if a.time_limit is not None:
    selected = len(harnesses(a.per_group, a.contains, from_rank=a.from_rank, skip=skip))
    print(f"time limit {a.time_limit:g} s: {len(rows)} of the {selected} selected judged")
  print(f"JAX {jax.__version__} on {jax.devices()[0].platform}, x64={a.x64}: {len(rows)} harnesses, "
        f"{counts['jax_fails']} that JAX itself cannot run here; of the other {ran}: "
        f"{counts['ok']} ok ({sum(r[3] == COMPLETED for r in rows)} of them with params "
        "completed as JAX's public function binds them)")
  for v, n in sorted(counts.items()):
    print(f"  {v:20s} {n}")
  for name, group, verdict, msg in rows:
    if verdict not in ("ok", "jax_fails"):
      print(f"{verdict}: {name}: {' '.join(msg.split())[:240]}")
  if a.json:
    with open(a.json, "w") as f:
      json.dump([dict(zip(("harness", "group", "verdict", "message"), r)) for r in rows], f, indent=0)
  return 0 if counts["ok"] == ran else 1


if __name__ == "__main__":
  sys.exit(main())
