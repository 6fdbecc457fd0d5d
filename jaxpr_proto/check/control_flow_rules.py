"""The param rules (`param_rules`) of control flow: while, cond, scan,
platform_index, custom_linear_solve (consts and carries within the
operands, the jaxprs against them, scan's trip count and unrolling)."""
from __future__ import annotations

from jaxpr_proto import compat
from jaxpr_proto.check import bounds
from jaxpr_proto.check.jaxpr_fits import _BOOL, _avals, _count, _jaxpr_fits, _match, _out_avals


def _while(eqn, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
  ins = _avals(eqn.invars)
  for bad in (_count("cond_nconsts", cond_nconsts, len(ins)),
              _count("body_nconsts", body_nconsts, len(ins) - min(cond_nconsts, len(ins)))):
    if bad:
      yield bad
      return
  carry = ins[cond_nconsts + body_nconsts:]
  yield from _jaxpr_fits("cond_jaxpr", cond_jaxpr, ins[:cond_nconsts] + carry, None)
  cond_out = _out_avals(cond_jaxpr)
  if len(cond_out) != 1 or not _match(cond_out[0], _BOOL):
    yield "cond_jaxpr", "cond_jaxpr must give one bool scalar"
  body_consts = ins[cond_nconsts:cond_nconsts + body_nconsts]
  yield from _jaxpr_fits("body_jaxpr", body_jaxpr, body_consts + carry, carry)
  if len(eqn.outvars) != len(carry):
    yield None, f"while gives {len(eqn.outvars)} outputs for a carry of {len(carry)}"


def _custom_linear_solve(eqn, *, const_lengths, jaxprs, **_):
  """Each of the solve's jaxprs takes its consts (in the order of
  const_lengths, before the right-hand sides b) and b, and gives b's avals
  (solve: then its aux outputs). JAX's rules use them unchecked."""
  ins = _avals(eqn.invars)
  names = ("matvec", "vecmat", "solve", "transpose_solve")
  lengths = [getattr(const_lengths, n) for n in names]
  if any(type(n) is not int or n < 0 for n in lengths) or sum(lengths) > len(ins):
    yield "const_lengths", f"const_lengths {tuple(lengths)} do not fit {len(ins)} operands"
    return
  b, start = ins[sum(lengths):], 0
  for name, n in zip(names, lengths):
    consts, start = ins[start:start + n], start + n
    j = getattr(jaxprs, name)
    if j is None:
      if name in ("matvec", "solve"):
        yield "jaxprs", f"custom_linear_solve lacks its {name} jaxpr"
      continue
    outs = b if name != "solve" else b + _out_avals(j)[len(b):]
    yield from _jaxpr_fits(f"jaxprs.{name}", j, consts + b, outs)
  if len(eqn.outvars) != len(_out_avals(jaxprs.solve)):
    yield None, f"custom_linear_solve gives {len(eqn.outvars)} outputs where its solve gives {len(_out_avals(jaxprs.solve))}"


def _scan(eqn, *, length, unroll, jaxpr, num_consts=None, num_carry=None, **_):
  """Consts and carry within the operands (JAX 0.10's type rule splits the
  operands by them and takes a short split; from 0.11 flat trees say it), a
  trip count XLA's loop counter holds, and an unrolled body within the
  size bound of check.bounds."""
  if num_consts is not None:
    n_in = len(eqn.invars)
    bad = (_count("num_consts", num_consts, n_in)
           or _count("num_carry", num_carry, n_in - num_consts)
           or _count("num_carry", num_carry, len(_out_avals(jaxpr))))
    if bad:
      yield bad
      return
  if type(unroll) is bool or not 1 <= unroll:
    yield "unroll", f"unroll={unroll!r} is not a positive int"
    return
  if type(length) is not int:  # symbolic: the shapes bound it when it is known
    return
  if not 0 <= length < (1 << 31):
    yield "length", f"scan length {length} is beyond XLA's int32 trip count"
    return
  body = jaxpr.jaxpr if isinstance(jaxpr, compat.ClosedJaxpr) else jaxpr
  copies = min(unroll, length)
  if copies > 1 and copies * len(body.eqns) > bounds.MAX_INLINED_EQNS:
    yield "unroll", (f"unroll={unroll} copies of a body of {len(body.eqns)} eqns make more than "
                     f"{bounds.MAX_INLINED_EQNS} eqns (see check.bounds)")


def _platform_index(eqn, *, platforms, **_):
  """Each branch's platforms, a non-empty tuple, or None for the default
  (lowering finds no rule in an empty table)."""
  if not platforms or any(p is not None and not p for p in platforms):
    yield "platforms", f"platforms {platforms} names no platform for a branch"
  elif sum(p is None for p in platforms) > 1:
    yield "platforms", f"platforms {platforms} has more than one default"


def _cond(eqn, *, branches, branches_platforms=None, **_):
  """The branch index is a scalar (JAX's rule checks its dtype, not its
  shape; XLA's case refuses any other); platform-dependent branches name
  one platform list per branch."""
  index = eqn.invars[0].aval
  if getattr(index, "shape", None) != ():
    yield None, f"cond's branch index is {index.str_short()}, not a scalar"
  if branches_platforms is not None and len(branches_platforms) != len(branches):
    yield "branches_platforms", (f"branches_platforms has {len(branches_platforms)} entries "
                                 f"for {len(branches)} branches")
