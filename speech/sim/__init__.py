"""The fleet simulator: a measured instance model, scaling policies, traces (docs/design.md §10).

Imports :mod:`speech.schema`, :mod:`speech.plan` and :mod:`speech.deploy` (the scaling spec it
simulates); no I/O.

- :mod:`~speech.sim.instance`: one instance as a birth-death chain on the measured ladder
- :mod:`~speech.sim.scaler`: what a policy sees and the wrapper that runs it (bounds, tick, state)
- :mod:`~speech.sim.policies`: the policies compared (plan, reference, pressure, qps-ewma, kpa, ...),
  :mod:`~speech.sim.peers` the ones the plan is compared with, :mod:`~speech.sim.floor` the cost
  floor and perfect-forecast (the clairvoyant rows every cost is measured against)
- :mod:`~speech.sim.fleet`: stepping the fleet through a trace, summaries
- :mod:`~speech.sim.artifact`: the simulation artifact
- :mod:`~speech.sim.routes`: several routes under one budget, a batch route's backlog
- :mod:`~speech.sim.traces`, :mod:`~speech.sim.hotload`: trace generators and readers, hot loading
- :mod:`~speech.sim.tune`: ``bench tune``'s search for the cheapest parameters that keep the SLO share,
  over :mod:`~speech.sim.knobs` (the search space), :mod:`~speech.sim.evaluate` (cached simulated
  days) and :mod:`~speech.sim.promise` (the share bound for unseen draws)
"""
