"""Fuzz the .jaxpr text reader with mutations of real programs' texts.

Each case is a program's text (`jp.format`) with a few random edits: a line
deleted, repeated or moved, a word replaced by another of the text, a
character inserted or removed, the text cut short. The reader must answer
each with a TextError (line and column in range), or a Module that
`jp.decode` loads or refuses with a DecodeError (and `jp.check` reports on
without raising): any other exception, or a case slower than --case-seconds,
is a finding, written to --out with its text.

  .venv/bin/python tools/fuzz_text.py --seed 1 --cases 5000   # about 10 minutes here

tests/test_text_syntax.py runs `run` briefly (a few hundred cases).
"""
from __future__ import annotations

import argparse
import pathlib
import random
import re
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_WORD = re.compile(r"[A-Za-z_][\w\-]*|-?\d+(?:\.\d+)?|'[^'\n]*'|\S")


def mutate(text: str, rng: random.Random, edits: int = 2) -> str:
  """`text` with `edits` random edits."""
  for _ in range(edits):
    lines = text.split("\n")
    op = rng.randrange(8)
    k = rng.randrange(len(lines))
    if op == 0 and len(lines) > 1:
      del lines[k]
    elif op == 1:
      lines.insert(rng.randrange(len(lines) + 1), lines[k])
    elif op == 2:
      j = rng.randrange(len(lines))
      lines[k], lines[j] = lines[j], lines[k]
    elif op in (3, 4):  # a word replaced by another word of the text
      words = list(_WORD.finditer(text))
      if words:
        w, other = rng.choice(words), rng.choice(words)
        text = text[:w.start()] + other.group() + text[w.end():]
        continue
    elif op == 5:
      at = rng.randrange(len(text) + 1)
      text = text[:at] + rng.choice("{}[]()<>:;.,=_%#'\"\n -0123456789abcxyz") + text[at:]
      continue
    elif op == 6 and text:
      at = rng.randrange(len(text))
      text = text[:at] + text[at + 1:]
      continue
    else:
      text = text[:rng.randrange(len(text) + 1)]
      continue
    text = "\n".join(lines)
  return text


def judge(text: str) -> str | None:
  """None where the reader answered as it must; else what went wrong."""
  import jaxpr_proto as jp
  try:
    m = jp.parse(text)
  except jp.TextError as e:
    lines = text.count("\n") + 1
    if not (0 <= e.line <= lines + 1):
      return f"TextError at line {e.line} of {lines}: {e}"
    return None
  except Exception as e:  # noqa: BLE001 (anything else is a finding)
    return f"parse raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
  try:
    jp.check(m)
  except Exception as e:  # noqa: BLE001
    return f"check raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
  try:
    jp.decode(m)
  except jp.DecodeError as e:
    if isinstance(e, jp.InternalError):
      return f"decode raised InternalError: {e}"
    return None
  except Exception as e:  # noqa: BLE001
    return f"decode raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
  return None


def texts(names=None) -> dict[str, str]:
  """The texts of some corpus programs (all with debug info)."""
  import jaxpr_proto as jp
  from tests import corpus
  names = names or ["cond_switch", "scan_variants", "while_loop_newton", "user_custom_jvp",
                    "user_custom_vjp", "nested_jit", "random_key_arg", "named_scopes"]
  return {n: jp.format(corpus.trace(corpus.get(n))) for n in names}


def run(sources: dict[str, str], seed: int, cases: int, case_seconds: float = 30.0,
        out: pathlib.Path | None = None) -> list[tuple[str, str, str]]:
  """Findings as (source name, text, what went wrong)."""
  rng = random.Random(seed)
  findings = []
  names = sorted(sources)
  for k in range(cases):
    name = names[k % len(names)]
    text = mutate(sources[name], rng, rng.randint(1, 3))
    t0 = time.perf_counter()
    bad = judge(text)
    dt = time.perf_counter() - t0
    if bad is None and dt > case_seconds:
      bad = f"took {dt:.1f} s"
    if bad is not None:
      findings.append((name, text, bad))
      if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{seed}-{k}-{name}.jaxpr").write_text(text)
        (out / f"{seed}-{k}-{name}.txt").write_text(bad)
  return findings


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--cases", type=int, default=2000)
  ap.add_argument("--case-seconds", type=float, default=30.0)
  ap.add_argument("--out", type=pathlib.Path, default=ROOT / "tools" / "fuzz_text_findings")
  args = ap.parse_args()
  t0 = time.time()
  findings = run(texts(), args.seed, args.cases, args.case_seconds, args.out)
  print(f"{args.cases} cases in {time.time() - t0:.0f} s, {len(findings)} findings"
        + (f" (in {args.out})" if findings else ""))
  for name, _, bad in findings[:20]:
    print(f"  {name}: {bad.splitlines()[0]}")
  sys.exit(1 if findings else 0)


if __name__ == "__main__":
  main()
