"""The command's name, its exit statuses, and the two exceptions that end a
command with status 2 (UsageError) or 1 (CheckFailed)."""

PROG = "jaxpr-proto"
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
  """A bad argument that argparse could not catch (exit status 2)."""


class CheckFailed(Exception):
  """A failed check: the message goes to stderr (exit status 1)."""
