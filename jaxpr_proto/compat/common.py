"""What every supported JAX minor shares (the JAX 0.10 form). The per-minor
adapters (v0_9/adapter.py ... v0_12/adapter.py) start from this (`from
jaxpr_proto.compat.common import *`) and redefine what differs; see
jaxpr_proto/compat/__init__.py.

It gathers the modules that hold it, one concern each:

* `own_frames`: jaxpr_proto's own frames, registered as not the user's;
* `jax_names`: JAX's classes, functions and primitives under the names the
  rest of jaxpr_proto uses (`compat.ClosedJaxpr`, `compat.pp_eqn`, ...);
* `dtypes`: PRNG key dtypes, and the dtypes a backend cannot compile;
* `symbolic_dims`: symbolic dims' sizes and their scope's constraints;
* `remat_policies`: remat policies as records and as closures, their
  fields, and the factories of those written by their arguments;
* `param_forms`: params whose form a later minor changed (unreduced kinds,
  FlatTrees, HiJAX primitives, custom_vjp's bwd, jit's inline), in the
  JAX 0.10 form;
* `tracing`: jaxprs copied and keyed, jax.jit's wrapped function, and the
  contexts JAX traces or computes in;
* `named_objects`: the objects that the value codec writes by name;
* `type_checks`: JAX's type check of a jaxpr, made cheap while loading
  (jaxpr_proto.check.checker);
* `host_callbacks`: the user's function inside a callback param;
* `custom_vmap`: custom_vmap's rule param, and dim_as_value;
* `checkify_errors`: checkify's errors in err_tree and out_trees;
* `unresolved`: what a file names that this process lacks
  (unresolved="placeholder").

Each name is defined in one of them, and what they keep (memos, caches,
the type check's per-thread state) lives there, once; a minor's adapter
redefines a name after its `import *`, so that its definition wins.
"""
from __future__ import annotations

from jaxpr_proto.compat.own_frames import *  # noqa: F401,F403
from jaxpr_proto.compat.jax_names import *  # noqa: F401,F403
from jaxpr_proto.compat.dtypes import *  # noqa: F401,F403
from jaxpr_proto.compat.symbolic_dims import *  # noqa: F401,F403
from jaxpr_proto.compat.remat_policies import *  # noqa: F401,F403
from jaxpr_proto.compat.param_forms import *  # noqa: F401,F403
from jaxpr_proto.compat.tracing import *  # noqa: F401,F403
from jaxpr_proto.compat.named_objects import *  # noqa: F401,F403
from jaxpr_proto.compat.type_checks import *  # noqa: F401,F403
from jaxpr_proto.compat.host_callbacks import *  # noqa: F401,F403
from jaxpr_proto.compat.custom_vmap import *  # noqa: F401,F403
from jaxpr_proto.compat.checkify_errors import *  # noqa: F401,F403
from jaxpr_proto.compat.unresolved import *  # noqa: F401,F403
