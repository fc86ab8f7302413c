"""One module per ``speech-bench`` command, each with ``add_arguments(parser)`` and ``run(args) -> int``.

Measure: :mod:`~bench.commands.qmax`, :mod:`~bench.commands.ttotal`, :mod:`~bench.commands.tcopy`.
Plan: :mod:`~bench.commands.plan`, :mod:`~bench.commands.copies`, :mod:`~bench.commands.capacity`.
Try the plan: :mod:`~bench.commands.simulate`, :mod:`~bench.commands.tune`, :mod:`~bench.commands.replay`.
Keep the deployment equal to the measurements: :mod:`~bench.commands.drift`,
:mod:`~bench.commands.validate`, :mod:`~bench.commands.observe`, :mod:`~bench.commands.thaw`.
All of it on this machine: :mod:`~bench.commands.demo`.

No command imports another (an import-linter contract): what two commands share lives in
:mod:`bench.cli.options`, :mod:`bench.load`, :mod:`bench.aws` or :mod:`bench.report`.
"""
