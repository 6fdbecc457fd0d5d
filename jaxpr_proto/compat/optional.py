"""JAX's optional modules: the public modules of JAX that `import jax` does
not import (Pallas and its backends, Mosaic, jax.experimental.sparse, ...),
and the names that their primitives and param types take in a file.

A file that names one of these (`jax.experimental.pallas::pallas_call`,
`jax::pallas.mosaic.core.MemorySpace`, `jax::bcoo_dot_general`) loads in a
process that never imported the module: where a name is not found, the
registry of names (`codec/names.py`) imports the module that this fixed table
gives for it, and looks again. Only modules of this table are ever imported,
by the names written here: a name read from a file only picks an entry, and
a name that no entry covers (`os::system`) imports nothing.

Each entry is (a name, or a prefix of names, as `namespace::name`; the
public JAX module that defines it). A prefix ends with ".", "::" or "_"; the
longest entry that covers a name wins. The names are those the running JAX
gives (a primitive of a Pallas module takes a namespace named after that
module, see names.py; a param type is `jax::<module less jax._src.>.<class>`).
A module that this JAX lacks, or that fails to import here (Mosaic GPU on
some builds), is reported by the lookup that needed it.
"""
from __future__ import annotations

import importlib

_PALLAS = "jax.experimental.pallas"
_TPU = "jax.experimental.pallas.tpu"
_TRITON = "jax.experimental.pallas.triton"
_MOSAIC_GPU = "jax.experimental.pallas.mosaic_gpu"
_SPARSE = "jax.experimental.sparse"

OPTIONAL_MODULES: tuple[tuple[str, str], ...] = (
    # Pallas's primitives: pallas_call (namespace named after the public module
    # that exports it), and those of Pallas's own modules.
    ("jax.experimental.pallas::", _PALLAS),
    ("jax.pallas.", _PALLAS),
    ("jax.pallas.mosaic.", _TPU),
    ("jax.pallas.einshape::", _TPU),
    ("jax.pallas.mosaic.sc_primitives::", "jax.experimental.pallas.tpu_sc"),
    ("jax.pallas.triton.", _TRITON),
    ("jax.pallas.mosaic_gpu.", _MOSAIC_GPU),
    ("jax.pallas.fuser.", "jax.experimental.pallas.fuser"),
    # Pallas's param types (block dims, memory spaces, compiler params, ...).
    ("jax::pallas.", _PALLAS),
    ("jax::pallas.mosaic.", _TPU),
    ("jax::pallas.triton.", _TRITON),
    ("jax::pallas.mosaic_gpu.", _MOSAIC_GPU),
    ("jax::experimental.mosaic.gpu.", _MOSAIC_GPU),
    # Core JAX's namespace: primitives that optional modules define.
    ("jax::tpu_custom_call", "jax.experimental.mosaic"),
    ("jax::mosaic_gpu_p", "jax.experimental.mosaic.gpu"),
    ("jax::bcoo_", _SPARSE), ("jax::bcsr_", _SPARSE), ("jax::coo_", _SPARSE),
    ("jax::csr_", _SPARSE), ("jax::spsolve", _SPARSE), ("jax::todense", _SPARSE),
    ("jax::buffer_callback", "jax.experimental.buffer_callback"),
    ("jax::compute_on", "jax.experimental.compute_on"),
    ("jax::fused_call", "jax.experimental.fused"),
    ("jax::global_array_to_host_local_array", "jax.experimental.multihost_utils"),
    ("jax::host_local_array_to_global_array", "jax.experimental.multihost_utils"),
    ("jax::rnn_fwd", "jax.experimental.rnn"), ("jax::rnn_bwd", "jax.experimental.rnn"),
    ("jax::shard_alike", "jax.experimental.shard_alike"),  # (JAX 0.10 and older)
    ("jax::xla_metadata_call", "jax.experimental.scheduling_groups"),
    ("jax::xla_metadata_value", "jax.experimental.xla_metadata"),
    ("jax::program_order", "jax.experimental.overlap"),  # (JAX 0.11 on)
    ("jax::thunky.", "jax.experimental.thunky"),  # (JAX 0.12 on)
    # The key-reuse checker's primitives: JAX imports their module (not a
    # public one) only when jax_debug_key_reuse is on.
    ("jax::consume", "jax.experimental.key_reuse._core"),
    ("jax::assert_consumed_value", "jax.experimental.key_reuse._core"),
)

MODULES = frozenset(m for _, m in OPTIONAL_MODULES)


def module_for(name: str) -> str | None:
  """The module of OPTIONAL_MODULES that defines `name` (`namespace::name`),
  or None."""
  best = None
  for entry, module in OPTIONAL_MODULES:
    if (name == entry or (entry[-1] in ".:_" and name.startswith(entry))) and (
        best is None or len(entry) > len(best[0])):
      best = entry, module
  return best and best[1]


def import_optional(module: str) -> None:
  """Imports `module`, one of MODULES (anything else is refused)."""
  if module not in MODULES:
    raise ValueError(f"{module!r} is not one of JAX's optional modules")
  importlib.import_module(module)
