"""Lark's parser for the grammar (grammar.lark), with the bounds a hostile
text meets before lark does anything per token, and errors that say where.

`tree(text)` gives lark's parse tree. What the grammar cannot say is here:
`Layout` keeps a newline only where it ends a top-level item or an eqn (the
printout breaks params, tuples and jaxprs over lines as it likes), and
counts the brackets open, refusing a text nested deeper than MAX_NESTING
before lark's tree (and the builder's walk over it) could be.
"""
from __future__ import annotations

import ast
import functools
import pathlib

from jaxpr_proto.errors import DecodeError

# A text this long is refused before it is parsed. lark's tree costs a few
# hundred bytes per token, so this bounds the memory of a parse too: the
# text of a program of a million eqns is about 60 MB.
MAX_TEXT_BYTES = 256 << 20
# Brackets open at once, of all kinds. A sub-jaxpr inside a param opens
# three ({, [ and the tuple around it); the decoder accepts 100 jaxprs
# nested (codec.state.MAX_DEPTH), and values nest 90 deep (wire.walk).
MAX_NESTING = 400


class TextError(DecodeError):
  """A .jaxpr text that does not parse, or names what it does not define:
  `.line` and `.column` (1-based) say where."""

  def __init__(self, message: str, line: int = 0, column: int = 0):
    self.line, self.column = line, column
    super().__init__(message, f"line {line}, column {column}" if line else "")


def error_at(token, message: str) -> TextError:
  """A TextError at a lark Token or Tree (its first token)."""
  import lark  # (here, not at import: `import jaxpr_proto` need not load lark)
  line = getattr(token, "line", None)
  if line is None and isinstance(token, lark.Tree):
    first = next(iter(token.scan_values(lambda v: isinstance(v, lark.Token))), None)
    return error_at(first, message) if first is not None else TextError(message)
  return TextError(message, line or 0, getattr(token, "column", 0) or 0)


_OPEN = {"LPAR", "LSQB", "LBRACE", "LAMBDA"}
_CLOSE = {"RPAR", "RSQB", "RBRACE"}


class Layout:
  """Keeps the newlines that end an item or an eqn: those at the top level
  and those between the `let` and `in` of a jaxpr, outside any other
  bracket; one for a run of them, none first or after `let`. (It looks at
  no token ahead: lark's contextual lexer needs each token passed on as it
  comes.)"""

  always_accept = ("_NL",)

  def process(self, stream):
    stack = []  # per open bracket: "group", or for a jaxpr "head", "eqns", "tail"
    last = None
    for tok in stream:
      t = tok.type
      if t == "_NL":
        if (not stack or stack[-1] == "eqns") and last not in (None, "_NL", "LET"):
          last = t
          yield tok
        continue
      if t in _OPEN:
        if len(stack) >= MAX_NESTING:
          raise error_at(tok, f"brackets nested deeper than {MAX_NESTING}")
        stack.append("head" if t == "LAMBDA" else "group")
      elif t in _CLOSE:
        if stack:
          stack.pop()
      elif t == "LET" and stack and stack[-1] == "head":
        stack[-1] = "eqns"
      elif t == "IN" and stack and stack[-1] == "eqns":
        stack[-1] = "tail"
      last = t
      yield tok


def _literal(tok):
  """A STRING or BYTES token, refused here (with its place) unless it is a
  Python literal that protobuf can hold: `names.unquote` reads it later."""
  try:
    v = ast.literal_eval(tok)
    if isinstance(v, str):
      v.encode("utf-8")
  except (SyntaxError, ValueError, UnicodeEncodeError) as e:
    raise TextError(f"a bad string: {e}", tok.line, tok.column) from None
  return tok


@functools.cache
def _parser() -> lark.Lark:
  import lark
  grammar = (pathlib.Path(__file__).parent / "grammar.lark").read_text()
  return lark.Lark(grammar, parser="lalr", lexer="contextual", postlex=Layout(),
                   maybe_placeholders=True, cache=False,
                   lexer_callbacks={"STRING": _literal, "BYTES": _literal})


def tree(text: str) -> lark.Tree:
  """The parse tree of a .jaxpr text; a TextError, with line and column,
  for a text that is too big, too deeply nested or not in the grammar."""
  if not isinstance(text, str):
    raise TypeError(f"expected a str, got {type(text).__name__}")
  if len(text) > MAX_TEXT_BYTES:
    raise TextError(f"a text of {len(text)} characters, more than a .jaxpr may have ({MAX_TEXT_BYTES})")
  import lark
  try:
    return _parser().parse(text)
  except TextError:
    raise
  except lark.exceptions.UnexpectedCharacters as e:
    raise TextError(f"unexpected character {text[e.pos_in_stream]!r}", e.line, e.column) from None
  except lark.exceptions.UnexpectedEOF as e:
    raise TextError(f"the text ends early; expected {_expected(e.expected)}",
                    *_end(text)) from None
  except lark.exceptions.UnexpectedToken as e:
    tok = e.token
    if tok.type == "$END":
      raise TextError(f"the text ends early; expected {_expected(e.expected)}", *_end(text)) from None
    what = "a line break" if tok.type == "_NL" else repr(str(tok))
    raise TextError(f"unexpected {what}; expected {_expected(e.expected)}", tok.line, tok.column) from None
  except lark.exceptions.VisitError as e:  # (a Layout error comes through lark wrapped)
    if isinstance(e.orig_exc, TextError):
      raise e.orig_exc from None
    raise


def _end(text: str) -> tuple[int, int]:
  lines = text.split("\n")
  return len(lines), len(lines[-1]) + 1


_NAMES = {"NAME": "a name", "QNAME": "a qualified name", "NUMBER": "a number",
          "STRING": "a string", "_NL": "a line break", "LAMBDA": "'{ lambda'",
          "VARID": "a variable id", "LOCREF": "#locN", "CTXREF": "#ctxN",
          "NEG_SPECIAL": "-inf", "BYTES": "b'bytes'", "ALIAS_KIND": "record (or enum, ...)"}


def _expected(names) -> str:
  out = []
  for n in sorted(names):
    if n in _NAMES:
      out.append(_NAMES[n])
    else:
      try:
        out.append(repr(_parser().get_terminal(n).pattern.value))
      except (KeyError, AttributeError):
        out.append(n)
  if len(out) > 8:
    out = out[:8] + ["..."]
  return ", ".join(out) if out else "nothing more"
