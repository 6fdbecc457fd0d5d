"""`python -m jaxpr_proto ...` is the `jaxpr-proto` command."""
from jaxpr_proto.cli import main

raise SystemExit(main())
