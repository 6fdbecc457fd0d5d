"""Small helpers shared by several test files."""
import fcntl
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest


def buf() -> str:
  """The buf binary: next to the running interpreter (buf-bin in the venv), else PATH."""
  exe_dir = pathlib.Path(sys.executable).parent
  for cand in (exe_dir / "buf", exe_dir / "buf.exe"):
    if cand.is_file() and os.access(cand, os.X_OK):
      return str(cand)
  found = shutil.which("buf")
  if found is None:
    pytest.fail("buf not found next to sys.executable nor on PATH; "
                "install the test extras: pip install -e '.[test]'")
  return found


def run_script(script: str, *args) -> str:
  """The stdout of `script` run with `args` in a fresh Python process (one
  that never imports the test's code), which must exit 0."""
  r = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                     text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  return r.stdout


def run_json(script: str, *args):
  """What `script`, run as `run_script` runs it, prints as JSON on its last line."""
  return json.loads(run_script(script, *args).strip().splitlines()[-1])


# --- node and tools/js's npm dependencies ---------------------------------------------

JS_DIR = pathlib.Path(__file__).resolve().parent.parent / "tools" / "js"

# Network errors of npm (and of node's fetch) that mean "no network", not a
# broken lockfile or package.
_NO_NETWORK = re.compile(r"E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|NETUNREACH|HOSTUNREACH"
                         r"|NOTCACHED)|network|socket hang up|fetch failed", re.I)


def js_deps_installed() -> bool:
  """Whether tools/js's node_modules has every package of its package.json
  (npm writes node_modules/.package-lock.json last: a complete install)."""
  pkg = json.loads((JS_DIR / "package.json").read_text())
  names = [*pkg.get("dependencies", {}), *pkg.get("devDependencies", {})]
  nm = JS_DIR / "node_modules"
  return (nm / ".package-lock.json").is_file() and all(
      (nm / name / "package.json").is_file() for name in names)


def js_node(whose: str, announce=None) -> str:
  """node, with tools/js's dependencies: `npm ci` runs once when they are
  missing, under a lock on tools/js (pytest-xdist workers share it). Skips
  the test where node or npm is missing or npm has no network; `whose`
  names the tests ("the JavaScript reader's tests"); `announce(line)` tells
  the terminal before a first `npm ci`."""
  node, npm = shutil.which("node"), shutil.which("npm")
  missing = [name for name, path in (("node", node), ("npm", npm)) if path is None]
  if missing:
    pytest.skip(f"{whose} need node and npm; {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not installed (not on PATH)")
  fd = os.open(JS_DIR, os.O_RDONLY)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    if not js_deps_installed():
      if announce is not None:
        announce(f"running `npm ci` in tools/js for {whose} (once)")
      # Offline, npm's default retries (2, backing off up to a minute) only delay the skip.
      env = {"npm_config_fetch_retries": "1", "npm_config_fetch_retry_mintimeout": "2000",
             "npm_config_fetch_retry_maxtimeout": "10000", **os.environ}
      try:
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, env=env,
                              capture_output=True, text=True, timeout=600)
      except subprocess.TimeoutExpired:
        pytest.skip(f"`npm ci` in tools/js did not finish in 10 minutes (no network?), so "
                    f"{whose} cannot run")
      out = (done.stdout + done.stderr)[-3000:]
      cause = _NO_NETWORK.search(out)
      if done.returncode != 0 and cause:
        line = next(l for l in out.splitlines() if cause.group(0) in l).strip()
        pytest.skip(f"`npm ci` in tools/js failed for lack of network, so {whose} cannot "
                    f"run ({line[:200]})")
      assert done.returncode == 0, f"`npm ci` in tools/js failed: {out}"
      assert js_deps_installed(), f"`npm ci` in tools/js did not install its packages: {out}"
  finally:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
  return node


def str_values(v):
  """The str Values nested in a Value or TreeNode (of jaxpr_pb2)."""
  stack = [v]
  while stack:
    x = stack.pop()
    if type(x).__name__ == "TreeNode":
      stack.extend(x.children)
      stack.extend(x.keys)
      if x.HasField("aux"):
        stack.append(x.aux)
      continue
    kind = x.WhichOneof("kind")
    if kind == "str":
      yield x
    elif kind in ("tuple", "list"):
      stack.extend(getattr(x, kind).items)
    elif kind == "dict":
      stack.extend(e.value for e in x.dict.entries)
      stack.extend(e.key for e in x.dict.entries)
    elif kind in ("record", "extension"):
      stack.extend(f.value for f in getattr(x, kind).fields)
    elif kind == "treedef":
      stack.append(x.treedef.root)
