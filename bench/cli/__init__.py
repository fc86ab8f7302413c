"""The command line around the commands: the ``speech-bench`` entry point and what every command shares.

- :mod:`bench.cli.main`: ``speech-bench`` / ``python -m bench``; the command table, exit codes,
  one-line errors (imports a command's module only when that command runs).
- :mod:`bench.cli.bounds`: every numeric flag finite and inside its stated range; stack names.
- :mod:`bench.cli.options`: flags and argument helpers more than one command uses (the target
  flags, the plan inputs, ``--serve-cmd``), so that no command imports another.
"""
