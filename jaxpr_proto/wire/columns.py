"""A jaxpr's eqns in columns (Jaxpr.columns), and as messages (Jaxpr.eqns).

A jaxpr of many eqns is written in columns: a list of ints per field, with
no message per eqn, which protobuf reads and writes about ten times faster.
`of` gives the eqns of either form as a `Columns` (lists), which the
checker's structure stage and bounds and the decoder read; `as_eqns` gives
them as Eqn messages, for the checker's path-by-path reports and `info`.
"""
from __future__ import annotations

from jaxpr_proto.errors import DecodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb

# Writers put the eqns of a jaxpr of at least this many eqns in columns: from
# there columns are the faster and smaller form (an 8-layer MLP step's jaxpr
# of 146 eqns: written 22% faster, a file 19% smaller); the smaller jaxprs of
# most programs stay as messages, readable in text form and by format 1.2.
COLUMNS_FROM = 64

# The most operands, and results, of one eqn. Checked before anything is done
# per operand: a file of 8 MB could give one eqn 2M operands, each cheap to
# read and dear to check (JAX's type rule of `sin` looked at all 2M before
# it found that sin takes one: 8 s). Far beyond real programs (a jit of a
# model's parameters, a concatenate of many arrays, an unstack: thousands),
# and not below what XLA compiles: a million.
MAX_PER_EQN = 1 << 20
# The most params of one eqn: JAX's primitives have at most 11 (pallas_call).
MAX_PARAMS_PER_EQN = 256

_PER_EQN = ("primitive", "operand_count", "result_count", "param_count",
            "traceback", "name_stack", "context")


class Columns:
  """The eqns of one jaxpr as lists: the fields of EqnColumns, with
  `effects` as {eqn index: its Effect messages}, and `n` eqns. `unset`:
  some eqn message has an operand or output binder of no kind (read as a
  literal or a dropped output here; the checker's structure stage refuses it)."""

  __slots__ = ("n", "primitive", "operand_count", "operands", "literals", "result_count",
               "results", "result_avals", "param_count", "params", "traceback",
               "name_stack", "context", "effects", "unset")


_LISTS = Columns.__slots__[1:-2]  # the fields that are lists of EqnColumns' own


def of(j: pb.Jaxpr, prefix: str = "") -> Columns:
  """The eqns of `j`, in either form. Columns whose lengths disagree are
  refused (a DecodeError at `{prefix}columns`); eqns as messages must have
  passed the checker's structure stage (every operand and binder set)."""
  c = Columns()
  if j.HasField("columns"):
    m = j.columns
    for f in _LISTS:
      setattr(c, f, list(getattr(m, f)))
    c.n = len(c.primitive)
    c.effects, c.unset = {}, False
    where = f"{prefix}columns"
    for f in _PER_EQN:
      if len(getattr(c, f)) != c.n:
        raise DecodeError(f"{len(getattr(c, f))} entries in {f} for {c.n} eqns", f"{where}.{f}")
    for count, f in (("operand_count", "operands"), ("result_count", "results"),
                     ("result_count", "result_avals"), ("param_count", "params")):
      if sum(getattr(c, count)) != len(getattr(c, f)):
        raise DecodeError(f"{len(getattr(c, f))} entries in {f}, where {count} adds up to "
                          f"{sum(getattr(c, count))}", f"{where}.{f}")
    for counts, what in ((c.operand_count, "operands"), (c.result_count, "results")):
      if counts and max(counts) > MAX_PER_EQN:
        k = next(k for k, n in enumerate(counts) if n > MAX_PER_EQN)
        raise DecodeError(too_many(counts[k], what), f"{prefix}eqn[{k}]")
    if c.operands.count(0) != len(c.literals):
      raise DecodeError(f"{len(c.literals)} literals for {c.operands.count(0)} literal operands",
                        f"{where}.literals")
    last = -1
    for k, e in enumerate(m.effects):
      if not last < e.eqn < c.n:
        raise DecodeError(f"effects of eqn {e.eqn}: not an eqn after {last} (of {c.n})",
                          f"{where}.effects[{k}]")
      last = e.eqn
      c.effects[e.eqn] = list(e.effects)
    return c
  eqns = j.eqns
  c.n = len(eqns)
  c.primitive, c.traceback, c.name_stack, c.context = [], [], [], []
  c.operand_count, c.operands, c.literals = [], [], []
  c.result_count, c.results, c.result_avals = [], [], []
  c.param_count, c.params, c.effects = [], [], {}
  kinds = set()
  for k, e in enumerate(eqns):
    c.primitive.append(e.primitive)
    c.traceback.append(e.traceback)
    c.name_stack.append(e.name_stack)
    c.context.append(e.context)
    ins, outs = e.invars, e.outvars
    for n, what in ((len(ins), "operands"), (len(outs), "results")):
      if n > MAX_PER_EQN:  # (before anything per operand)
        raise DecodeError(too_many(n, what), f"{prefix}eqn[{k}]")
    c.operand_count.append(len(ins))
    for a in ins:
      kind = a.WhichOneof("kind")
      if kind == "var":
        c.operands.append(a.var + 1)
      else:
        kinds.add(kind)
        c.operands.append(0)
        c.literals.append(a.literal)
    c.result_count.append(len(outs))
    for b in outs:
      kind = b.WhichOneof("kind")
      if kind == "var":
        c.results.append(b.var.id + 1)
        c.result_avals.append(b.var.aval)
      else:
        kinds.add(kind)
        c.results.append(0)
        c.result_avals.append(b.drop.aval)
    c.param_count.append(len(e.params))
    c.params.extend(e.params)
    if e.effects:
      c.effects[k] = list(e.effects)
  c.unset = None in kinds
  return c


def too_many(n: int, what: str) -> str:
  """The message for an eqn of `n` operands or results, more than MAX_PER_EQN."""
  return f"{n} {what}, more than an eqn may have ({MAX_PER_EQN})"


def as_eqns(j: pb.Jaxpr, prefix: str = ""):
  """The eqns of `j` as Eqn messages: `j.eqns` itself, or made from its
  columns (see `of` for what is refused)."""
  return _eqn_messages(of(j, prefix)) if j.HasField("columns") else j.eqns


def write(msg: pb.Jaxpr, c: Columns) -> bool:
  """Writes the eqns `c` into `msg`: in columns when there are at least
  COLUMNS_FROM of them (then True), else as Eqn messages."""
  if c.n < COLUMNS_FROM:
    msg.eqns.extend(_eqn_messages(c))
    return False
  out = msg.columns
  for f in _LISTS:
    getattr(out, f).extend(getattr(c, f))
  for k in sorted(c.effects):
    out.effects.add(eqn=k, effects=c.effects[k])
  return True


def _eqn_messages(c: Columns) -> list:
  out = []
  ops = res = pars = lits = 0
  for k in range(c.n):
    e = pb.Eqn(primitive=c.primitive[k], traceback=c.traceback[k],
               name_stack=c.name_stack[k], context=c.context[k])
    for x in c.operands[ops:ops + c.operand_count[k]]:
      if x:
        e.invars.add(var=x - 1)
      else:
        e.invars.add(literal=c.literals[lits])
        lits += 1
    ops += c.operand_count[k]
    n_res = c.result_count[k]
    for x, a in zip(c.results[res:res + n_res], c.result_avals[res:res + n_res]):
      if x:
        e.outvars.add(var=pb.Var(id=x - 1, aval=a))
      else:
        e.outvars.add(drop=pb.DropVar(aval=a))
    res += n_res
    e.params.extend(c.params[pars:pars + c.param_count[k]])
    pars += c.param_count[k]
    if k in c.effects:
      e.effects.extend(c.effects[k])
    out.append(e)
  return out


def eqn_count(j: pb.Jaxpr) -> int:
  return len(j.columns.primitive) if j.HasField("columns") else len(j.eqns)
