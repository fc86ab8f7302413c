"""``speech-deploy``'s parsers, apart from the commands (as ``bench/cli/parsers``): each module holds
one subcommand's ``DESCRIPTION``, ``EPILOG`` and ``add_arguments(parser)`` and imports nothing
heavy, so ``speech-deploy COMMAND --help`` and a refused argument answer before the stack reader,
pydantic or Pulumi load (an import-linter contract in pyproject.toml holds the list)."""
