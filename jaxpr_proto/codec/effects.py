"""Effects, by name: JAX's effect singletons, effects on an input variable
(by the variable), named-axis effects (by the axis name), and parametrized
effects (checkify's error effects) by the generic value codec."""
from __future__ import annotations

import sys

from jaxpr_proto import compat
from jaxpr_proto.codec import checkify
from jaxpr_proto.errors import DecodeError, EncodeError
from jaxpr_proto.v1 import jaxpr_pb2 as pb


def _effects_table():
  table = {}
  for name, (mod, attr) in compat.EFFECT_SINGLETONS.items():
    m = sys.modules.get(mod)
    if m is not None and hasattr(m, attr):
      table[name] = getattr(m, attr)
  return table


EFFECTS = _effects_table()
_EFFECT_NAMES = {id(v): k for k, v in EFFECTS.items()}
INPUT_EFFECTS = dict(compat.INPUT_EFFECTS)
_INPUT_EFFECT_NAMES = {v: k for k, v in INPUT_EFFECTS.items()}
# Effects that are values of a class, written in Effect.value.
PARAMETRIZED = {checkify.EFFECT: compat.CheckifyErrorEffect}
_PARAMETRIZED_NAMES = {v: k for k, v in PARAMETRIZED.items()}


def effect_name(eff):
  """(name, input var or None) of an effect; None if not allow-listed."""
  name = _EFFECT_NAMES.get(id(eff))
  if name is not None:
    return name, None
  name = _INPUT_EFFECT_NAMES.get(type(eff))
  if name is not None:
    return name, eff.input
  if type(eff) is compat.NamedAxisEffect:
    return "jax::named_axis", None
  return _PARAMETRIZED_NAMES.get(type(eff)), None


def sorted_effects(effs, ids: dict) -> list:
  """A set of effects in the order files write them."""
  def key(e):
    name, var = effect_name(e)
    return (name or "", ids.get(var, -1) if var is not None else -1, repr(e))
  return sorted(effs, key=key)


def encode_effect(enc, eff, ids: dict, path: str) -> pb.Effect:
  """An effect; `ids` numbers the jaxpr's variables, for input effects."""
  name, var = effect_name(eff)
  if name is None:
    raise EncodeError(f"unsupported effect {eff!r} ({type(eff).__qualname__})", path)
  out = pb.Effect(name=name)
  if name == "jax::named_axis":
    if not isinstance(eff.name, str):
      raise EncodeError(f"axis name {eff.name!r} is not a str", path)
    out.axis_name = eff.name
  if name in PARAMETRIZED:
    out.value.CopyFrom(enc.value(eff, f"{path}.value"))
  if var is not None:
    if isinstance(var, int):
      raise EncodeError(f"effect {eff!r} refers to an input by position", path)
    try:
      out.input_var = ids[var]
    except KeyError:
      raise EncodeError(f"effect {eff!r} refers to an unknown variable", path) from None
  return out


def decode_effects(dec, msgs, scope, path: str) -> set:
  """The effects of a jaxpr or eqn; `scope` (a wire.walk.Scope) has its variables."""
  out = set()
  for k, m in enumerate(msgs):
    if m.name == "jax::named_axis":
      if not m.axis_name:
        raise DecodeError("named_axis effect needs an axis name", f"{path}[{k}]")
      out.add(compat.named_axis_effect(m.axis_name))
      continue
    eff = EFFECTS.get(m.name)
    if eff is not None:
      out.add(eff)
      continue
    cls = PARAMETRIZED.get(m.name)
    if cls is not None:
      eff = dec.value(m.value, f"{path}[{k}].value") if m.HasField("value") else None
      if type(eff) is not cls:
        raise DecodeError(f"effect {m.name} needs its value", f"{path}[{k}]")
      out.add(eff)
      continue
    cls = INPUT_EFFECTS.get(m.name)
    if cls is None:
      raise DecodeError(f"unknown effect {m.name!r}", f"{path}[{k}]")
    out.add(cls(scope.effect_input(m, f"{path}[{k}]")))
  return out
