"""Each command's parser apart from the command (as pip's ``cli/`` and Locust's argument parser):
``bench/cli/parsers/<command>.py`` holds the command's ``DESCRIPTION`` and ``add_arguments(parser)``
and imports nothing heavy (no numpy, pydantic, AWS, Kubernetes or Pulumi client), so ``speech-bench
--help`` and ``speech-bench COMMAND --help`` build their text from these modules alone.
:mod:`bench.cli.main` imports the command's module (``bench/commands/<command>.py``, which imports
its dependencies at its top) only once the arguments parse.
"""
