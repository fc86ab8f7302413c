"""The plan layer: pure arithmetic from measurements to thresholds, fleet and cooldowns.

Imports only :mod:`speech.schema` (and :mod:`speech.errors`). Start with :mod:`~speech.plan.formulas`.

- :mod:`~speech.plan.formulas`: start here: every formula of the plan (thresholds, time, the
  scale-in step, the fleet), one small function each with its rule and units (docs/design.md §3),
  and one serving unit's sizing (``unit_sizing``, ``capacity_at``, ``surge_at_target``) that the
  instance plan and the copy plan share
- :mod:`~speech.plan.realtime`: the instance plan of a real-time endpoint (``build_plan``, ``bench plan``)
- :mod:`~speech.plan.findings`: the plan's ok / warn / stop findings, each with the number it rests on;
  the rules the copy plan reuses
- :mod:`~speech.plan.survival`: the birth-death chain on the measured throughput
- :mod:`~speech.plan.copies`: the plan for copies of an inference component (``bench copies``)
- :mod:`~speech.plan.copy_findings`: the copy plan's findings
- :mod:`~speech.plan.batch`: the plan of an asynchronous (batch) route
- :mod:`~speech.plan.budget`: several models under one daily budget
- :mod:`~speech.plan.capacity`: where more concurrency goes (copies into spare room, new instances)
  (``bench capacity``), over :mod:`~speech.plan.fleet` (the fleet file) and
  :mod:`~speech.plan.placement` (the resources a copy requests, best-fit decreasing)
- :mod:`~speech.plan.calibration`: CloudWatch history held against the plan (``bench observe``)
- :mod:`~speech.plan.schedule`: scheduled floors for the tide, from the user's own traffic
"""
