"""Measurement CLI: ``speech-bench`` (``python -m bench``), one command per step of the chain.

Commands (``bench/commands/``, one module each):

- measure: ``qmax`` (concurrency ladder -> Q_max), ``ttotal`` (a real scale-out, phase by phase),
  ``tcopy`` (a second model copy beside a running one)
- plan: ``plan`` (artifacts -> thresholds, fleet, cooldowns, stack entry), ``copies`` (the plan of
  a model hosted as copies), ``capacity`` (where more concurrency goes)
- try the plan: ``simulate`` (a trace against a simulated fleet), ``tune`` (search the scaling
  parameters), ``replay`` (a trace open-loop against a real target)
- keep the deployment equal to the measurements: ``drift``, ``validate``, ``observe``, ``thaw``
- all of it on this machine: ``demo``

Rooms (imports run one way, kept by import-linter contracts in pyproject.toml: ``cli.main`` >
``commands`` > ``report`` | ``load`` > ``aws`` > ``cli.options`` | ``cli.bounds`` > ``errors``):

- :mod:`bench.cli`: the entry point (:mod:`bench.cli.main`), flag bounds and the options
  commands share (:mod:`bench.cli.options`)
- :mod:`bench.commands`: the commands above; no command imports another
- :mod:`bench.report`: terminal report, plots, the HTML report
- :mod:`bench.load`: the load engine, targets, the Q_max ladder, traces, a synthetic server
- :mod:`bench.aws`: AWS reads and writes (sessions, freeze, fleet reading, scaling checks, receipts)
- :mod:`bench.errors`: the errors a command reports in one line

Public surface here: :func:`tool_version` and :func:`target_region`, recorded in every artifact's
provenance.
"""

from speech.cli import version as tool_version  # noqa: F401  (the one version function: the distribution's)


def target_region(target: object) -> str | None:
    """AWS region of a SageMaker target's session; None for a local target."""
    session = getattr(target, "session", None) if str(getattr(target, "name", "")).startswith("sagemaker:") else None
    return getattr(session, "region_name", None) if session is not None else None
