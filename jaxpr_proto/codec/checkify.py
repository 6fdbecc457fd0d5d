"""checkify's errors as data: the `Error` pytree (in check's `err_tree` param
and in a checkified Function's output tree), its error effects, and the
exceptions its metadata holds, encode and decode side by side.

An Error's pytree aux is its metadata, {code: treedef of a JaxException};
each exception's aux holds its traceback (a Value `traceback`), its message
format or primitive name, and its operand shape. The effects (dict keys of
the Error's children, and the effects of check eqns) are written by the
extension below. Decoding checks each of these has the shape JAX reads, so
that `Error.get()` of a loaded program formats only the file's own message
with the program's own values: a format field may name an argument, never an
attribute or item of one.
"""
from __future__ import annotations

import re
import string

import jax

from jaxpr_proto import compat
from jaxpr_proto.codec import extensions, pytrees
from jaxpr_proto.errors import DecodeError, EncodeError

FEATURE = "checkify"
EFFECT = "jax::checkify.error"  # the Effect name of an ErrorEffect
_CODEC = "jax::checkify.error_effect"
_POSITION = re.compile(r"[0-9]{1,9}")  # a message format field that is a position


# --- ErrorEffect: the error's type by name, its payload's shapes as avals -------------

def _error_effect_fields(v):
  if type(v) is not compat.CheckifyErrorEffect:
    return None

  def fields(path):
    avals = []
    for i, sd in enumerate(v.shape_dtypes):
      if getattr(sd, "sharding", None) is not None:
        raise EncodeError("a checkify error payload with a sharding is not supported",
                          f"{path}.shape_dtypes[{i}]")
      avals.append(compat.ShapedArray(sd.shape, sd.dtype, weak_type=sd.weak_type))
    return [("error_type", v.error_type.__name__), ("shape_dtypes", tuple(avals))]
  return _CODEC, fields


def _build_error_effect(codec, fields, path):
  cls = compat.CHECKIFY_EXCEPTIONS.get(fields.get("error_type"))
  shapes = fields.get("shape_dtypes")
  if set(fields) != {"error_type", "shape_dtypes"} or cls is None:
    raise DecodeError(f"{_CODEC} needs error_type (one of "
                      f"{', '.join(sorted(compat.CHECKIFY_EXCEPTIONS))}) and shape_dtypes", path)
  if not isinstance(shapes, tuple) or not all(type(a) is compat.ShapedArray for a in shapes):
    raise DecodeError(f"{_CODEC}.shape_dtypes must be a tuple of array types", path)
  return compat.CheckifyErrorEffect(cls, tuple(
      jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in shapes))


extensions.register(_error_effect_fields, lambda name: name == _CODEC, _build_error_effect,
                    feature=FEATURE)


# --- the pytree nodes' aux data, checked on decode -------------------------------------

def _is_traceback(x) -> bool:
  return isinstance(x, compat.Traceback)


def _is_shape(x) -> bool:
  return isinstance(x, tuple) and all(type(d) is int and d >= 0 for d in x)


def _check_error(aux, children, path):
  """Error: aux {code: treedef of one of the exceptions}; children the dicts
  pred, code and payload, keyed by error effects. The codes are taken: this
  process gives out only others from now on (they are int32 in programs)."""
  if not isinstance(aux, dict) or not all(
      type(k) is int and 0 <= k < 2**31 and isinstance(t, jax.tree_util.PyTreeDef)
      and pytrees.node_type(t) in _EXCEPTION_TYPES for k, t in aux.items()):
    return "an Error's metadata must map int codes to checkify exception structures"
  if len(children) != 3 or not all(
      pytrees.node_type(c) is dict
      and all(type(k) is compat.CheckifyErrorEffect for k in c.node_data()[1])
      for c in children):
    return "an Error's children must be three dicts keyed by checkify error effects"
  compat.reserve_checkify_codes(max(aux, default=0))
  return None


def _safe_format(fmt: str, n_args: int, kwargs) -> str | None:
  """Why `fmt.format(*args, **kwargs)` could reach past its arguments, or
  fail, or None: fields are argument positions or keyword names only."""
  auto = 0
  try:
    parsed = list(string.Formatter().parse(fmt))
  except ValueError as e:
    return f"bad message format: {e}"
  manual = False
  for _, field, spec, conversion in parsed:
    if field is None:
      continue
    if spec and ("{" in spec or "}" in spec):
      return "a message format field may not nest fields"
    if conversion not in (None, "r", "s", "a"):
      return f"message format field {{{field[:40]}}} has an unknown conversion {conversion!r}"
    if field == "":
      field, auto = str(auto), auto + 1
    elif field.isdecimal():
      manual = True
    if auto and manual:  # str.format refuses to switch between the two
      return "a message format may not mix automatic ({}) and numbered fields"
    if "." in field or "[" in field:  # str.format reads '0.x' as args[0].x, even with a key '0.x'
      return (f"message format field {{{field[:40]}}} may name an argument only, "
              "not an attribute or item of one")
    if field.isdecimal():  # str.format reads it as a position, in any script ('{١}' is {1})
      if not (_POSITION.fullmatch(field) and int(field) < n_args):
        return f"message format field {{{field[:40]}}} names no argument of the check"
    elif field not in kwargs:  # '²' is no decimal: a keyword name, as str.format reads it
      return f"message format field {{{field[:40]}}} names no argument of the check"
  return None


def _check_failed_check(aux, children, path):
  if not (isinstance(aux, tuple) and len(aux) == 2 and _is_traceback(aux[0])
          and isinstance(aux[1], str)):
    return "FailedCheckError's aux must be (traceback, message format)"
  if len(children) != 2 or pytrees.node_type(children[0]) is not tuple \
      or pytrees.node_type(children[1]) is not dict:
    return "FailedCheckError's children must be its args (a tuple) and kwargs (a dict)"
  kwargs = children[1].node_data()[1]
  if not all(isinstance(k, str) for k in kwargs):
    return "FailedCheckError's kwargs must have str keys"
  return _safe_format(aux[1], len(jax.tree_util.treedef_children(children[0])), kwargs)


def _check_nan(aux, children, path):
  if not (isinstance(aux, tuple) and len(aux) == 2 and _is_traceback(aux[0])
          and isinstance(aux[1], str)) or children:
    return "NaNError's aux must be (traceback, primitive name), with no children"
  return None


def _check_oob(aux, children, path):
  if not (isinstance(aux, tuple) and len(aux) == 3 and _is_traceback(aux[0])
          and isinstance(aux[1], str) and _is_shape(aux[2])) or len(children) != 1:
    return "OOBError's aux must be (traceback, primitive name, operand shape), with one child"
  return None


def _check_division(aux, children, path):
  if not _is_traceback(aux) or children:
    return "DivisionByZeroError's aux must be a traceback, with no children"
  return None


_EXCEPTION_CHECKS = {"FailedCheckError": _check_failed_check, "NaNError": _check_nan,
                     "OOBError": _check_oob, "DivisionByZeroError": _check_division}
_EXCEPTION_TYPES = frozenset(compat.CHECKIFY_EXCEPTIONS.values())
pytrees.AUX_CHECKS[compat.CheckifyError] = _check_error
for _name, _check in _EXCEPTION_CHECKS.items():
  pytrees.AUX_CHECKS[compat.CHECKIFY_EXCEPTIONS[_name]] = _check
