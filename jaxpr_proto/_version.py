"""The version of jaxpr_proto, for the files it writes and its error messages."""
__version__ = "0.1.0"
