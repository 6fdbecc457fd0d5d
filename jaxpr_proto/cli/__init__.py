"""The `jaxpr-proto` command (`main`)."""
from jaxpr_proto.cli.commands import main

__all__ = ["main"]
