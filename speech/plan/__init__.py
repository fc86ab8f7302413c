"""The plan layer: pure arithmetic from measurements to thresholds, fleet and cooldowns.

Imports only :mod:`speech.schema` (and :mod:`speech.errors`). Start with :mod:`~speech.plan.formulas`.

- :mod:`~speech.plan.formulas`: every rule of the plan, one small function each with its units
  (headroom, thresholds, cooldowns, T_total, the scale-in step, the fleet), and one serving unit's
  sizing (``unit_sizing``, ``capacity_at``, ``surge_at_target``) that both plans below share
- :mod:`~speech.plan.realtime`: the instance plan of a real-time endpoint (``bench plan``)
- :mod:`~speech.plan.findings`: the instance plan's findings and verdict; the rules the copy plan reuses
- :mod:`~speech.plan.survival`: the birth-death chain on the measured throughput
- :mod:`~speech.plan.copies`: the plan for copies of an inference component (``bench copies``)
- :mod:`~speech.plan.copy_findings`: the copy plan's findings
- :mod:`~speech.plan.batch`: the plan of an asynchronous (batch) route
- :mod:`~speech.plan.budget`: several models under one daily budget
- :mod:`~speech.plan.schedule`: scheduled floors for the daily tide, from the traffic
- :mod:`~speech.plan.capacity`: where more concurrency goes (copies into spare room, new instances)
  (``bench capacity``), over :mod:`~speech.plan.fleet` (the fleet file) and
  :mod:`~speech.plan.placement` (the resources a copy requests, best-fit decreasing)
- :mod:`~speech.plan.calibration`: CloudWatch history held against the plan (``bench observe``)
"""
