"""jaxpr-proto: a versioned protobuf exchange format for JAX programs (jaxprs)."""
from jaxpr_proto._version import __version__
from jaxpr_proto._config import config

from jaxpr_proto.errors import (CheckError, DecodeError, EncodeError, Error, InternalError,
                                IsolatedRunError, PrimitiveVersionError, RuleNotSavedError,
                                UnknownPrimitiveError, UnresolvedError, UnsupportedJaxError,
                                VersionError)
from jaxpr_proto.api import (check, clear_caches, decode, dumps, encode, format, load, loads, parse,
                             save)
from jaxpr_proto.wire.jaxpr_text import TextError
from jaxpr_proto.codec.names import (register_callback, register_function, register_param_type,
                                     register_primitive, register_pytree_node)
from jaxpr_proto.v1 import jaxpr_pb2 as proto
from jaxpr_proto.function import Function, trace
from jaxpr_proto import pickling as _pickling, stages
from jaxpr_proto.check.checker import CheckReport
from jaxpr_proto.isolated import run_isolated
_pickling._install_on_import()
from jaxpr_proto import warmup as _warmup
_warmup.warm()

__all__ = [
    "DecodeError", "EncodeError", "Error", "UnknownPrimitiveError",
    "VersionError", "decode", "dumps", "encode", "load", "loads", "parse",
    "save", "clear_caches", "register_callback", "register_function", "register_primitive",
    "register_pytree_node",
    "register_param_type", "proto", "Function", "trace", "stages",
    "CheckError", "CheckReport", "check", "InternalError", "UnsupportedJaxError", "PrimitiveVersionError",
    "UnresolvedError", "RuleNotSavedError", "IsolatedRunError", "run_isolated", "config",
]
