"""JAX 0.11's HiJAX primitives that files may carry (custom_root and its
linear map), rebuilt from their parts with the checks JAX's tracing makes."""
import jax
from jax._src import core
from jax._src import hijax as _hijax
from jax._src.lax.control_flow import solves as _solves


def is_hiprim(v) -> bool:
  return isinstance(v, _hijax.HiPrim)


# HiJAX primitives a file may carry, by registered name: (class, build(in
# avals, out aval, params)); `hiprim_functions` names the params that are
# Python functions, which files carry as jaxprs (codec.extensions.TracedFunction).
def _tangents(avals):
  return jax.tree.map(lambda a: a.to_tangent_aval(), avals)


_CUSTOM_ROOT_PARAMS = frozenset({"f", "solve", "tangent_solve", "solve_jaxpr", "has_aux"})


def _custom_root(in_avals, out_aval, params):
  """custom_root's HiPrim, from its parts (its constructor wants a jax.stages.Traced)."""
  _in_parts(in_avals, 4, "solve consts, guess, f consts and tangent_solve consts")
  if set(params) != _CUSTOM_ROOT_PARAMS:
    raise TypeError(f"custom_root takes the params {sorted(_CUSTOM_ROOT_PARAMS)}, not {sorted(params)}")
  has_aux, solve_jaxpr = params["has_aux"], params["solve_jaxpr"]
  if type(has_aux) is not bool or not isinstance(solve_jaxpr, core.Jaxpr):
    raise TypeError("custom_root's has_aux must be a bool and its solve_jaxpr a jaxpr")
  # What custom_root's tracing guarantees (its _check_tree) and its rules use:
  # the solution (the first of two outputs with has_aux) is shaped as the guess.
  if has_aux and not (type(out_aval) is tuple and len(out_aval) == 2):
    raise TypeError("with has_aux, its output must be a pair (solution, aux)")
  _same_avals("its solution", out_aval[0] if has_aux else out_aval, "the guess", in_avals[1])
  _same_avals("solve_jaxpr's inputs", [v.aval for v in solve_jaxpr.invars],
              "solve's consts and guess", jax.tree.leaves(in_avals[:2]))
  _same_avals("solve_jaxpr's outputs", [v.aval for v in solve_jaxpr.outvars],
              "its output", jax.tree.leaves(out_aval))
  prim = _solves.CustomRoot.__new__(_solves.CustomRoot)
  prim.in_avals, prim.out_aval, prim.params = in_avals, out_aval, dict(params)
  prim.effects = frozenset()
  _hijax.HiPrim.__init__(prim)
  return prim


def _same_avals(what, avals, what_else, others):
  leaves, tree = jax.tree.flatten(avals)
  other_leaves, other_tree = jax.tree.flatten(others)
  if tree != other_tree or not all(map(core.typecompat, leaves, other_leaves)):
    raise TypeError(f"{what} ({avals}) do not match {what_else} ({others})")


def _in_parts(in_avals, n, what):
  if type(in_avals) is not tuple or len(in_avals) != n:
    raise TypeError(f"its in_avals must be {n} parts ({what})")


def _root_linear_map(in_avals, out_aval, params):
  _in_parts(in_avals, 3, "consts, x and the linear input")
  if set(params) != {"f", "transposed"} or type(params["transposed"]) is not bool:
    raise TypeError("_RootLinearMap takes the params f and transposed (a bool)")
  # It applies D_x f (or its transpose): x's tangents go in (or come out).
  x_tangents = _tangents(in_avals[1])
  _same_avals("its output" if params["transposed"] else "its linear input",
              out_aval if params["transposed"] else in_avals[2], "x's tangents", x_tangents)
  return _solves._RootLinearMap(params["f"], in_avals, out_aval, frozenset(), params["transposed"])


HIPRIMS = {
    "jax::lax.control_flow.solves.CustomRoot": (_solves.CustomRoot, _custom_root),
    "jax::lax.control_flow.solves._RootLinearMap": (_solves._RootLinearMap, _root_linear_map),
}


def hiprim_functions(prim) -> dict:
  """{param: (args, outs, as_tangents)} of a HiPrim's function params: the
  pytree of input avals each is called with, and the avals its outputs must
  have (the tangent avals of its outputs, where as_tangents)."""
  if type(prim) is _solves.CustomRoot:
    solve_consts, guess, f_consts, tangent_consts = prim.in_avals
    return {"f": ((f_consts, guess), guess, False),
            "solve": ((solve_consts, guess), prim.out_aval, False),
            "tangent_solve": ((tangent_consts, guess, _tangents(guess)), _tangents(guess), False)}
  if type(prim) is _solves._RootLinearMap:
    consts, x, v = prim.in_avals
    return {"f": ((consts, x), v if prim.params["transposed"] else prim.out_aval, True)}
  return {}
