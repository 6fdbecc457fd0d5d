"""Verdicts on custom_jvp rules found before the param checks trace them.

The param checks (check.param_rules) decide once per rule whether grad can
linearize it, by tracing it, and keep the verdict in the rule's `checked`
dict ("linear": None, or why not). Before they run, `prefill` puts there
the verdicts known without tracing: the rule's jaxpr shows it
(check.linearity), or the persistent verdict cache holds it (under the
SHA-256 of the rule's encoding, without debug info). After they run,
`keep` writes the verdicts they traced to the cache.
"""
from __future__ import annotations

import hashlib
import struct

from jaxpr_proto._config import config
from jaxpr_proto.check import linearity
from jaxpr_proto.codec import custom_rules, encoder

_KIND = "jvp"


def _store():
  """The verdict cache's Store, or None (imported only where one is set)."""
  if not config.verdict_cache_dir:
    return None
  from jaxpr_proto.check import verdict_cache
  return verdict_cache.store()


def _jvp_rules(dec):
  """(rule, jvp ClosedJaxpr, primals, outputs) of each custom_jvp rule that
  the decoded program's eqns call, once per rule."""
  seen = set()
  for groups in dec.state.calls.values():
    for prim, params, _ in groups:
      if prim.name != "custom_jvp_call":
        continue
      rule = custom_rules.rule_of(params.get("jvp_jaxpr_fun"))
      if not isinstance(rule, custom_rules.JvpRule) or id(rule) in seen:
        continue
      seen.add(id(rule))
      sig, call, n = rule.signature(), params.get("call_jaxpr"), params.get("num_consts")
      if sig is None or type(n) is not int or not hasattr(call, "in_avals"):
        continue
      yield rule, sig[0], len(call.in_avals) - n, len(call.out_avals)


def _key(jvp, n_primals: int, n_outs: int) -> bytes | None:
  from jaxpr_proto.check import verdict_cache
  ctx = verdict_cache.context()
  if ctx is None:
    return None
  try:
    data = encoder.encode(jvp, debug_info=False).SerializeToString(deterministic=True)
  except Exception:  # (a rule the encoder cannot write again: no key)
    return None
  return b"\0".join((hashlib.sha256(data).digest(), struct.pack("<qq", n_primals, n_outs), ctx))


def prefill(dec) -> list:
  """Puts the verdicts known without tracing into the rules' `checked`;
  returns [(rule, key)] of those left to trace, whose verdicts the cache
  would keep (for `keep`)."""
  store = _store()
  left = []
  try:
    rules = list(_jvp_rules(dec))
  except Exception:  # (a rule that will not say: the param checks tell why)
    return left
  for rule, jvp, n_primals, n_outs in rules:
    if "linear" in rule.checked:
      continue
    try:
      if linearity.shows_linear(jvp, n_primals, n_outs):
        rule.checked["linear"] = None
        continue
    except Exception:
      continue
    key = _key(jvp, n_primals, n_outs) if store is not None else None
    if key is None:
      continue
    value = store.get(_KIND, key)
    if value == b"\0":
      rule.checked["linear"] = None
    elif value is not None and value[:1] == b"\1":
      rule.checked["linear"] = value[1:].decode("utf-8", "replace")
    else:
      left.append((rule, key))
  return left


def keep(left) -> None:
  """Writes the verdicts traced for the rules of `prefill`'s list."""
  store = _store()
  if store is None:
    return
  for rule, key in left:
    if "linear" in rule.checked:
      why = rule.checked["linear"]
      if why is None or isinstance(why, str):
        store.put(_KIND, key, b"\0" if why is None else b"\1" + why.encode("utf-8"))
