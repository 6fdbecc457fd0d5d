"""Split a jaxpr into stages of consecutive eqns, to run them one after another
(for example each on a different Dask worker).

    staged = jp.stages.split(closed_jaxpr, num_stages=4)
    outs = staged(*args)                                   # run locally
    futs = staged.run(*args, submit=client.submit)         # or on Dask
    outs = client.gather(futs)

Values are numbered: the program's flat inputs are 0 .. n-1, and every value a
stage hands on gets the next number. Stage k is a ClosedJaxpr whose inputs are
the values it uses that come from outside it (program inputs or outputs of
earlier stages), in `stage.inputs` order, and whose outputs are the values
it defines that later stages or the program's outputs need (`stage.outputs`).
The program's constants go to the stages that use them, as their consts.
"""
from __future__ import annotations

import dataclasses
import operator

from jaxpr_proto import compat
from jaxpr_proto.function import Function


@dataclasses.dataclass(frozen=True)
class Stage:
  """One stage: `closed_jaxpr(*values[inputs]) -> values[outputs]`."""
  closed_jaxpr: object
  inputs: tuple[int, ...]
  outputs: tuple[int, ...]
  eqns: range  # which eqns of the original jaxpr this stage runs

  @property
  def function(self) -> Function:
    """The stage as a `jp.Function` of the flat inputs returning a list."""
    f = self.__dict__.get("_function")
    if f is None:
      f = Function.from_closed_jaxpr(
          self.closed_jaxpr, name=f"stage_{self.eqns.start}_{self.eqns.stop}")
      object.__setattr__(self, "_function", f)
    return f


@dataclasses.dataclass(frozen=True)
class Staged:
  """A jaxpr split into stages; `outputs` are the value numbers of its results."""
  stages: tuple[Stage, ...]
  num_inputs: int
  outputs: tuple[int, ...]

  def __call__(self, *args):
    """Runs the stages here, one after another; returns the list of outputs."""
    return self.run(*args)

  def run(self, *args, submit=None):
    """Runs the stages through `submit(fn, *args) -> handle` (default: call
    it now), e.g. `client.submit` of Dask, whose futures may be passed on to
    later submits. Returns the list of the program's output handles."""
    if len(args) != self.num_inputs:
      raise TypeError(f"expected {self.num_inputs} inputs, got {len(args)}")
    if submit is None:
      submit = lambda fn, *a: fn(*a)
    env = dict(enumerate(args))
    for s in self.stages:
      res = submit(s.function, *[env[i] for i in s.inputs])
      for j, v in enumerate(s.outputs):
        env[v] = submit(operator.getitem, res, j)
    return [env[v] for v in self.outputs]


def split(closed_jaxpr, num_stages: int | None = None, *,
          boundaries: list[int] | None = None) -> Staged:
  """Splits the top-level eqns of `closed_jaxpr` into consecutive stages.

  Give either `num_stages` (the eqns are shared out as evenly as possible) or
  `boundaries`, the indices of the eqns that start a new stage (0 < b < the
  number of eqns, increasing). Stages are never empty, except the single
  stage of a jaxpr without eqns.
  """
  jaxpr = closed_jaxpr.jaxpr
  n = len(jaxpr.eqns)
  if (num_stages is None) == (boundaries is None):
    raise TypeError("give exactly one of num_stages and boundaries")
  ok = _allowed_boundaries(jaxpr)
  if boundaries is None:
    if num_stages < 1:
      raise ValueError("num_stages must be at least 1")
    k = max(1, min(num_stages, n))
    boundaries = []
    for i in range(1, k):  # the allowed boundary nearest to the even share
      ideal = round(i * n / k)
      cands = [b for b in ok if b > (boundaries[-1] if boundaries else 0)]
      if cands:
        b = min(cands, key=lambda b: (abs(b - ideal), b))
        if b not in boundaries:
          boundaries.append(b)
    boundaries.sort()
  else:
    boundaries = list(boundaries)
    bad = [b for b in boundaries if 0 < b < n and b not in ok]
    if bad:
      raise ValueError(f"cannot split before eqns {bad}: a mutable array reference "
                       "(Ref) is live there, and Refs cannot pass between stages")
  bounds = [0, *boundaries, n]
  if (n and any(not a < b for a, b in zip(bounds, bounds[1:]))) or (not n and boundaries):
    raise ValueError(f"bad boundaries {boundaries} for {n} eqns")
  if not n:
    bounds = [0, 0]
  ranges = [range(a, b) for a, b in zip(bounds, bounds[1:])]

  consts = dict(zip(jaxpr.constvars, closed_jaxpr.consts))
  # The stage that defines each variable (-1: a program input).
  stage_of = {v: -1 for v in jaxpr.invars}
  for s, r in enumerate(ranges):
    for e in jaxpr.eqns[r.start:r.stop]:
      for v in e.outvars:
        if not isinstance(v, compat.DropVar):
          stage_of[v] = s
  is_var = lambda x: isinstance(x, compat.Var) and not isinstance(x, compat.Literal)

  # The values each stage needs from outside.
  needs = []
  for s, r in enumerate(ranges):
    need = {}
    for e in jaxpr.eqns[r.start:r.stop]:
      for x in e.invars:
        if is_var(x) and x not in consts and stage_of.get(x, s) != s:
          need.setdefault(x, None)
    needs.append(list(need))
  final = [x for x in jaxpr.outvars if is_var(x) and x not in consts]

  # Number the values: program inputs, then each stage's hand-on outputs.
  ids = {v: i for i, v in enumerate(jaxpr.invars)}
  next_id = len(jaxpr.invars)
  last = len(ranges) - 1
  stages = []
  for s, r in enumerate(ranges):
    later = {x for t in range(s + 1, len(ranges)) for x in needs[t]} | set(final)
    eqns = jaxpr.eqns[r.start:r.stop]
    outs = {}
    for e in eqns:
      for v in e.outvars:
        if not isinstance(v, compat.DropVar) and v in later:
          outs[v] = None
    outvars = list(outs)
    if s == last:  # the program outputs that are literals or consts
      outvars += [x for x in jaxpr.outvars if not is_var(x) or x in consts]
    for v in outs:
      ids[v] = next_id
      next_id += 1
    used = {x for e in eqns for x in e.invars if is_var(x)} | {x for x in outvars if is_var(x)}
    constvars = [v for v in jaxpr.constvars if v in used]
    sub = jaxpr.replace(
        constvars=constvars, invars=list(needs[s]), outvars=outvars, eqns=list(eqns),
        effects=_effects(eqns),
        debug_info=compat.DebugInfo("jaxpr_proto.stages", f"stage {s}",
                                  (None,) * len(needs[s]), None))
    stages.append(Stage(compat.ClosedJaxpr(sub, [consts[v] for v in constvars]),
                        tuple(ids[v] for v in needs[s]),
                        tuple(ids[v] for v in outvars[:len(outs)]) +
                        tuple(range(next_id, next_id + len(outvars) - len(outs))), r))
    next_id += len(outvars) - len(outs)

  outputs, k = [], 0
  tail = stages[-1].outputs[len(stages[-1].outputs) - _num_tail(jaxpr, consts, is_var):]
  for x in jaxpr.outvars:
    if is_var(x) and x not in consts:
      outputs.append(ids[x])
    else:
      outputs.append(tail[k])
      k += 1
  return Staged(tuple(stages), len(jaxpr.invars), tuple(outputs))


def _allowed_boundaries(jaxpr) -> set[int]:
  """The eqn indices b (0 < b < n) before which no Ref value is live."""
  n = len(jaxpr.eqns)
  defined, last = {}, {}
  for i, e in enumerate(jaxpr.eqns):
    for x in e.invars:
      if isinstance(x, compat.Var) and x in defined:
        last[x] = i
    for v in e.outvars:
      if not isinstance(v, compat.DropVar) and _is_ref(v.aval):
        defined[v] = i
  for x in jaxpr.outvars:
    if isinstance(x, compat.Var) and x in defined:
      last[x] = n
  ok = set(range(1, n))
  for v, d in defined.items():
    ok -= set(range(d + 1, last.get(v, d) + 1))
  return ok


def _is_ref(aval) -> bool:
  return type(aval).__name__ == "AbstractRef"


def _num_tail(jaxpr, consts, is_var):
  return sum(1 for x in jaxpr.outvars if not is_var(x) or x in consts)


def _effects(eqns):
  out = set()
  for e in eqns:
    out |= set(e.effects)
  return out
