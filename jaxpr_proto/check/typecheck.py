"""JAX's type rules, applied to a decoded program: the last stage of the
checker, and the check every loader runs (`jaxpr_proto.check.decode`).

Each jaxpr that decoding built (the program's, and those of its custom
differentiation rules) is checked by JAX's abstract evaluation of each eqn
(`jax.extend.core.check_jaxpr`); constants must match their variables, and
custom_jvp/vjp calls must match their jaxpr's signature.
"""
from __future__ import annotations

import contextlib
import re

from jaxpr_proto import compat


_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")
_MISSING = re.compile(r"missing \d+ required (?:keyword-only |positional )?arguments?: (.+)$")


def _first_paragraph(msg: str) -> str:
  head, _, rest = msg.partition("\n\nin equation:\n\n")
  if rest:
    eqn_text = rest.split("\n\nfrom source")[0].strip()
    return f"{head.strip()} (in: {' '.join(eqn_text.split())[:300]})"
  return " ".join(msg.split())[:500]


def _explain(eqn, e: Exception, upgrader) -> tuple[str, bool]:
  """(message, whether a newer JAX is the cause) for an exception of JAX's
  type check of `eqn`."""
  text = str(e)
  prim = eqn.primitive.name if eqn is not None else "?"
  newer = upgrader is not None and upgrader.newer
  m = _UNEXPECTED.search(text)
  if m and isinstance(e, TypeError):
    if newer:
      return (f"primitive {prim} has param {m.group(1)!r}, which this JAX's {prim} lacks "
              f"({upgrader.describe()})"), True
    return f"primitive {prim} does not take a param {m.group(1)!r}", False
  m = _MISSING.search(text.splitlines()[0] if text else "")
  if m and isinstance(e, TypeError):
    return f"primitive {prim} lacks the param(s) {m.group(1)}", False
  if isinstance(e, compat.JaxprTypeError):
    return _first_paragraph(e.args[0] if e.args else text), False
  return f"{prim}: {type(e).__name__}: {_first_paragraph(text)}", False


def _check_one(jaxpr, upgrader, contexts=()):
  """(eqn index or None, (message, is_version)) of the first type error of one
  jaxpr, checked inside `contexts` (see compat.sub_jaxpr_contexts), or None."""
  try:
    with contextlib.ExitStack() as stack:
      for make in contexts:
        stack.enter_context(make())
      compat.check_jaxpr_eqns(jaxpr)
  except compat.JaxprTypeError as e:
    k = e.args[1] if len(e.args) == 2 else None
    eqn = jaxpr.eqns[k] if isinstance(k, int) and 0 <= k < len(jaxpr.eqns) else None
    return k, _explain(eqn, e, upgrader)
  except RecursionError:
    return None, ("type check nested too deeply", False)
  except Exception as e:  # a rule of JAX that raised on bad input
    k = compat.check_jaxpr_frame_eqn_index(e.__traceback__)
    eqn = jaxpr.eqns[k] if isinstance(k, int) and 0 <= k < len(jaxpr.eqns) else None
    return k, _explain(eqn, e, upgrader)
  return None


def _calls(dec) -> list:
  """The decoded jaxprs from the root down (outer jaxprs finish decoding
  last), each with its eqns that hold jaxprs and those jaxprs:
  [(jaxpr, [(eqn, subs)])], in one walk; an eqn's jaxprs are found once per
  params dict, which the decoder gives eqns of equal params one."""
  found: dict = {}
  out = []
  for i in reversed(list(dec.state.jaxpr_paths)):
    jaxpr = dec.state.decoded["jaxprs"].get(i)
    if not isinstance(jaxpr, compat.Jaxpr):
      continue
    calls = []
    for eqn in jaxpr.eqns:
      key = compat.memo.identity(eqn.params)
      subs = found.get(key)
      if subs is None:
        try:
          subs = list(compat.jaxprs_in_params(eqn.params))
        except Exception:  # (params that will not say)
          subs = []
        found[key] = subs
        found[key, "params"] = eqn.params  # (kept: its identity stays its own)
      if subs:
        calls.append((eqn, subs))
    out.append((jaxpr, calls))
  return out


def _contexts(calls) -> dict[int, tuple]:
  """compat.jaxpr_key(jaxpr) -> the contexts its parents' eqns bind, from the root down."""
  out: dict[int, tuple] = {}
  for jaxpr, eqns in calls:
    ctx = out.setdefault(compat.jaxpr_key(jaxpr), ())
    for eqn, subs in eqns:
      extra = ctx + tuple(compat.sub_jaxpr_contexts(eqn))
      for sub in subs:
        out.setdefault(compat.jaxpr_key(sub), extra)
  return out


def _not_reached(calls) -> set[int]:
  """ids of the decoded jaxprs that JAX's check of their parent does not check
  (such as cond branches and scan bodies), and the root."""
  reached: set[int] = set()
  alone: set[int] = set()
  for jaxpr, eqns in calls:
    if compat.jaxpr_key(jaxpr) not in reached:
      alone.add(compat.jaxpr_key(jaxpr))
    for eqn, subs in eqns:
      try:
        recurses = compat.typecheck_reaches_sub_jaxprs(eqn)
      except Exception:
        continue
      if recurses:
        reached.update(map(compat.jaxpr_key, subs))
  return alone


def iter_type_errors(dec):
  """(path, message, is_version) of the type errors of all jaxprs that `dec`
  decoded, innermost first; an eqn that only fails because a jaxpr it holds
  does is not reported again.

  A first pass checks only the jaxprs that JAX's checks of their parents do
  not reach; only when it fails is every jaxpr checked on its own, to find
  the innermost place of each error."""
  with compat.shared_sub_jaxprs_checked_once():
    yield from _type_errors(dec)


def _type_errors(dec):
  upgrader = dec.upgrader
  calls = _calls(dec)
  contexts, alone = _contexts(calls), _not_reached(calls)
  clean = True
  for i in dec.state.jaxpr_paths:
    jaxpr = dec.state.decoded["jaxprs"].get(i)
    if isinstance(jaxpr, compat.Jaxpr) and compat.jaxpr_key(jaxpr) in alone:
      if _check_one(jaxpr, upgrader, contexts.get(compat.jaxpr_key(jaxpr), ())) is not None:
        clean = False
        break
  if clean:
    yield from _const_errors(dec)
    return
  failed: set[int] = set()
  for i, path in list(dec.state.jaxpr_paths.items()):  # in the order decoding finished: inner first
    jaxpr = dec.state.decoded["jaxprs"].get(i)
    if not isinstance(jaxpr, compat.Jaxpr):
      continue
    found = _check_one(jaxpr, upgrader, contexts.get(compat.jaxpr_key(jaxpr), ()))
    if found is None:
      continue
    failed.add(compat.jaxpr_key(jaxpr))
    k, (msg, is_version) = found
    prefix = f"{path}." if path else ""
    if k is not None:
      subs = {compat.jaxpr_key(j) for j in compat.jaxprs_in_params(jaxpr.eqns[k].params)}
      if subs & failed:
        continue
      yield f"{prefix}eqn[{k}]", msg, is_version
    else:
      yield path, msg, is_version
  yield from _const_errors(dec)


def _const_errors(dec):
  """Constants against their variables."""
  for i, cj in list(dec.state.decoded["closed_jaxprs"].items()):
    if not isinstance(cj, compat.ClosedJaxpr):
      continue
    jpath = dec.state.jaxpr_paths.get(dec.m.closed_jaxprs[i].jaxpr, f"closed_jaxprs[{i}]")
    for k, (v, c) in enumerate(zip(cj.jaxpr.constvars, cj.consts)):
      try:
        ok = compat.core.typecheck(v.aval, c)
      except Exception:
        ok = False
      if not ok:
        prefix = f"{jpath}." if jpath else ""
        yield f"{prefix}consts[{k}]", f"constant does not match its variable's type {v.aval.str_short()}", False
