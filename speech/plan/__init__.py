"""The plan layer: pure arithmetic from measurements to thresholds, fleet and cooldowns.

Imports only :mod:`speech.schema` (and :mod:`speech.errors`).

- :mod:`~speech.plan.formulas`: start here: every formula of the plan (thresholds, time, the
  scale-in step, the fleet), one small function each with its rule and units (docs/design.md §3)
- :mod:`~speech.plan.realtime`: the instance plan of a real-time endpoint (``build_plan``, ``bench plan``)
- :mod:`~speech.plan.findings`: the plan's ok / warn / stop findings, each with the number it rests on
- :mod:`~speech.plan.survival`: the birth-death chain on the measured throughput
- :mod:`~speech.plan.copies`: the plan for copies of an inference component
- :mod:`~speech.plan.batch`: the plan of an asynchronous (batch) route
- :mod:`~speech.plan.budget`: several models under one daily budget
- :mod:`~speech.plan.capacity`: where more concurrency goes (copies into spare memory, new instances)
- :mod:`~speech.plan.calibration`: CloudWatch history held against the plan (``bench observe``)
- :mod:`~speech.plan.schedule`: scheduled floors for the tide, from the user's own traffic
"""
