"""The param rules (`param_rules`) of shardings and meshes: a sharding
against the shape it places (jit, device_put, sharding_constraint,
reshard), and shard_map's body against its mesh (each eqn's context mesh,
the collectives' params against the sizes of the axes they name)."""
from __future__ import annotations

import numpy as np

from jaxpr_proto import compat
from jaxpr_proto.check import param_schema


def _shardings_fit(param, shardings, variables):
  """Each Sharding of `shardings` (one per variable) fits its variable's
  shape, as JAX checks when it traces (`check_compatible_aval`); its lowering
  fails on one that does not (a spec of rank 1 on a scalar)."""
  for k, (s, v) in enumerate(zip(shardings, variables)):
    yield from _sharding_fits(param, f"{param}[{k}]", s, v)


def _sharding_fits(param, what, s, v):
  check = getattr(s, "check_compatible_aval", None)
  shape = getattr(v.aval, "shape", None)
  if check is None or shape is None:
    return
  try:
    check(shape)
  except ValueError as e:
    yield param, f"{what} does not fit {v.aval.str_short()}: {' '.join(str(e).split())[:200]}"


def _one_sharding(param):
  """A rule for a primitive whose one `param` is its output's sharding."""
  def rule(eqn, **params):
    if len(eqn.outvars) == 1:
      yield from _sharding_fits(param, param, params.get(param), eqn.outvars[0])
  return rule


def _device_put(eqn, *, devices, srcs, copy_semantics, **_):
  n = len(eqn.invars)
  for param, v in (("devices", devices), ("srcs", srcs), ("copy_semantics", copy_semantics)):
    if len(v) != n:
      yield param, f"{param} has {len(v)} entries for {n} operands"
  yield from _shardings_fit("devices", devices, eqn.outvars)


# Collectives name the axes of the mesh of the shard_map around them; their
# params must fit those axes' sizes (JAX checks them when the collective is
# traced, not in its type rule; lowering indexes with them).
#
# Every eqn of the body was traced under the shard_map's mesh with its newly
# manual axes Manual, and records that mesh in its context: JAX re-enters it
# when it transposes the eqn (ad.backward_pass3, `with eqn.ctx.manager`), and
# a varying type on a mesh without those axes fails an assert in core.get_mat.
def _shard_map(eqn, *, mesh, jaxpr, newly_manual_axes, **_):
  sizes = dict(getattr(mesh, "shape", {}))
  device = _abstract_device(mesh)
  seen: set[int] = set()
  stack = [(jaxpr, "jaxpr")]
  while stack:
    j, where = stack.pop()
    j = j.jaxpr if isinstance(j, compat.ClosedJaxpr) else j
    if not isinstance(j, compat.Jaxpr) or id(j) in seen:
      continue
    seen.add(id(j))
    for k, inner in enumerate(j.eqns):
      name = inner.primitive.name
      ctx_mesh = inner.ctx.cur_abstract_mesh
      ctx_types = dict(zip(ctx_mesh.axis_names, ctx_mesh.axis_types))
      ctx_sizes = dict(getattr(ctx_mesh, "shape", {}))
      not_manual = sorted(a for a in newly_manual_axes
                          if ctx_types.get(a) != compat.AxisType.Manual or ctx_sizes.get(a) != sizes.get(a))
      if not_manual:
        yield (f"{where}.eqn[{k}]", f"{name} in a shard_map body has the context mesh {ctx_mesh}, "
               f"where the shard_map's axes {not_manual} are not Manual")
        return
      if _abstract_device(ctx_mesh) != device:
        # JAX traces the body under the shard_map's own mesh: a context mesh
        # with another device than its (one with none, the other with this
        # process's) fails the collectives' check of their operands' meshes
        # (core.check_avals_context_mesh) when the program runs.
        yield (f"{where}.eqn[{k}]", f"{name} in a shard_map body has the context mesh {ctx_mesh}, "
               f"whose device is not that of the shard_map's mesh {mesh}")
        return
      check = _COLLECTIVES.get(name)
      if check is not None and not any(param_schema.errors(name, inner.params)):
        axes = inner.params.get("axis_name", inner.params.get("axes"))
        axes = axes if type(axes) is tuple else (axes,)
        if all(isinstance(a, str) and a in sizes for a in axes):
          n = int(np.prod([sizes[a] for a in axes], dtype=object))
          for param, message in check(inner, n):
            yield f"{where}.eqn[{k}].params.{param}", f"{name}'s {message}"
      if name != "shard_map":  # a shard_map inside checks its own
        for param, v in inner.params.items():
          for q, sub in enumerate(v if type(v) is tuple else (v,)):
            if isinstance(sub, (compat.Jaxpr, compat.ClosedJaxpr)):
              index = f"[{q}]" if type(v) is tuple else ""
              stack.append((sub, f"{where}.eqn[{k}].params.{param}{index}"))


def _abstract_device(mesh):
  """The device an abstract mesh (or a concrete mesh's) is bound to, or None."""
  mesh = getattr(mesh, "abstract_mesh", mesh)
  return getattr(mesh, "abstract_device", None)


def _ppermute(eqn, n):
  perm = eqn.params["perm"]
  if not all(type(p) is tuple and len(p) == 2 for p in perm):
    yield "perm", "perm is not a tuple of (source, destination) pairs"
    return
  if not all(type(i) is int and 0 <= i < n for p in perm for i in p):
    yield "perm", f"perm {perm} names devices beyond the axis size {n}"
  for what, ids in (("sources", [p[0] for p in perm]), ("destinations", [p[1] for p in perm])):
    if len(set(ids)) != len(ids):
      yield "perm", f"perm repeats {what}"


def _axis_size(eqn, n):
  if eqn.params["axis_size"] != n:
    yield "axis_size", f"axis_size={eqn.params['axis_size']!r} where the mesh axes give {n}"


_COLLECTIVES = {"ppermute": _ppermute, "all_gather": _axis_size, "reduce_scatter": _axis_size}
