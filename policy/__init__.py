"""CrossGuard policy pack for speech-endpoints.

``policy/__main__.py`` serves the pack (what ``pulumi preview --policy-pack policy`` starts);
``python -m policy check`` runs the program under Pulumi's mocks and sends every resource to
that same pack process over the analyzer protocol (:mod:`policy.harness`).

- :mod:`policy.policies`: the 25 policies as pulumi_policy sees them; :mod:`policy.rules` the
  validators behind them, one module per family
- :mod:`policy.recompute`: tags + provenance document -> the plan, with the program's ``build_plan``
- :mod:`policy.resources`: a plain view of the resources the engine sends; :mod:`policy.config` defaults
- :mod:`policy.check`, :mod:`policy.harness`, :mod:`policy.inprocess`: the pack run offline, over
  the analyzer protocol or in process
"""
