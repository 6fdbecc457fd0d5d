"""Words: the grammar's keywords, the words values spell, variable names as
JAX prints them, and strings as the text quotes them."""
from __future__ import annotations

import ast
import re

from jaxpr_proto.v1 import jaxpr_pb2 as pb
from jaxpr_proto.wire import dtypes as wire_dtypes

IDENT = re.compile(r"[A-Za-z_]\w*(?:-\w+)*\Z")
QNAME = re.compile(r"[A-Za-z_][\w\-]*::[\w\-]+(?:\.[\w\-]+)*\Z")
PLAIN_NAME = re.compile(r"[A-Za-z_]\w*\Z")

# The grammar's keywords: a name spelled so where the grammar takes a keyword
# would be read as the keyword, so the printer never names anything so.
KEYWORDS = frozenset("""
    format producer namespace features symbolic_scope params let root rule function
    context seed lambda open in to loc scope ctx effects debug high columns messages
    record enum singleton extension namedtuple custom_node""".split())

# Words with a meaning of their own where a value is read (so a str spelled
# so is quoted): Python's constants, the dtypes and the call forms.
CONSTANTS = {"None": None, "True": True, "False": False}
DTYPE_NAMES: dict[str, int] = {name: num for num, name in wire_dtypes.NAMES.items()}
DTYPE_BY_NUM: dict[int, str] = dict(wire_dtypes.NAMES)
CALLS = frozenset("""
    array base64 external py value complex frozenset nan float big_int dim traceback
    function primitive aval closed open PyTreeDef Mesh AbstractDevice P NamedSharding
    AxisNames Ref debug custom_jvp custom_vjp custom_lin empty_rule proto np jnp inf key
    UNCONSTRAINED Tok dtype
    """.split())
RESERVED = KEYWORDS | CALLS | set(CONSTANTS) | set(DTYPE_NAMES)


def short_dtype(num: int) -> str | None:
  name = wire_dtypes.NAMES.get(num)
  return None if name is None else wire_dtypes.short_name(name)


# 'f32' -> DTYPE_FLOAT32 (short names, as avals print them)
SHORT_DTYPES: dict[str, int] = {wire_dtypes.short_name(n): num for num, n in wire_dtypes.NAMES.items()}
SHORT_DTYPES["bool"] = pb.DTYPE_BOOL


def var_name(n: int) -> str:
  """JAX's name of its n-th variable: a, b, ..., z, ba, bb, ..."""
  s = ""
  while not s or n:
    n, i = divmod(n, 26)
    s = chr(97 + i) + s
  return s


class VarNames:
  """Names in the order a printout meets variables, as JAX gives them,
  skipping words the grammar reads otherwise (`in`, `let`, `inf`, ...)."""

  def __init__(self):
    self.n = 0

  def next(self) -> str:
    while True:
      s = var_name(self.n)
      self.n += 1
      if s not in RESERVED and s not in ("nan", "inf"):
        return s


def quote(s: str) -> str:
  """A str as the text writes it in quotes (Python's repr, which
  `unquote` reads back)."""
  return repr(s)


def unquote(token: str) -> str:
  """The str of a STRING or BYTES token (a Python literal: only such tokens
  reach here, so literal_eval reads nothing but the literal)."""
  return ast.literal_eval(token)


def word(s: str, taken=frozenset()) -> str:
  """`s` bare where the text reads it back as this str, else quoted."""
  if IDENT.match(s) and s not in RESERVED and s not in taken and s not in ("inf", "nan"):
    return s
  return quote(s)


def identifier(s: str, fallback: str) -> str:
  """A name made of `s`'s letters (for definitions named after functions)."""
  out = re.sub(r"\W+", "_", s).strip("_")
  if not out or not PLAIN_NAME.match(out) or out[0].isdigit():
    out = fallback
  return out
