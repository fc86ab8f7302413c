"""The plan layer: pure arithmetic from measurements to thresholds, fleet and cooldowns.

Imports only :mod:`speech.schema` (and :mod:`speech.errors`).

- :mod:`~speech.plan.realtime`: the instance plan of a real-time endpoint (``bench plan``)
- :mod:`~speech.plan.survival`: the birth-death chain on the measured throughput
- :mod:`~speech.plan.copies`: the plan for copies of an inference component
- :mod:`~speech.plan.batch`: the plan of an asynchronous (batch) route
- :mod:`~speech.plan.budget`: several models under one daily budget
- :mod:`~speech.plan.capacity`: where more concurrency goes (copies into spare memory, new instances)
- :mod:`~speech.plan.calibration`: CloudWatch history held against the plan (``bench observe``)
"""
