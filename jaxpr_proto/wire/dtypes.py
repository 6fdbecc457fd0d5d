"""The names of the schema's Dtype enum: the one dtype table.

Each `DTYPE_<NAME>` of `jaxpr_proto.v1.Dtype` stands for the numpy /
ml_dtypes dtype named `<name>` (`DTYPE_FLOAT8_E4M3FN` is `float8_e4m3fn`);
`DTYPE_KEY` is a typed PRNG key, whose impl the message names. The codec
builds its numpy table from these names (`codec.dtypes`), and the CLI and
`info` print them.
"""
from __future__ import annotations

from jaxpr_proto.v1 import jaxpr_pb2 as pb

# Dtype enum number -> dtype name, for every Dtype but UNSPECIFIED and KEY.
NAMES: dict[int, str] = {
    num: name[len("DTYPE_"):].lower() for name, num in pb.Dtype.items()
    if num not in (pb.DTYPE_UNSPECIFIED, pb.DTYPE_KEY)}


def dtype_name(num: int) -> str:
  """'float32' for DTYPE_FLOAT32 (and 'key', 'unspecified'); the number for others."""
  return pb.Dtype.Name(num)[len("DTYPE_"):].lower() if num in pb.Dtype.values() else str(num)


def short_name(name: str) -> str:
  """JAX's short name of a dtype name, as jaxprs print it: 'f32', 'u8', 'bf16'."""
  if name == "float0":
    return name
  return name.replace("float", "f").replace("uint", "u").replace("int", "i").replace("complex", "c")
