"""`python -m jaxpr_proto ...` is the `jaxpr-proto` command."""
from jaxpr_proto.cli.commands import main

raise SystemExit(main())
