"""What a command does once its flags parse, one function per command kind (as pip's
``operations/``): the protocol of a measurement or a search, the files it writes, atomically, and
the result the command renders. Nothing here prints a report or imports :mod:`bench.commands`
(an import-linter contract; tests/bench/commands/test_no_climb_back.py follows the calls).

- :mod:`bench.operations.qmax`: ``bench qmax``'s ladder (:func:`~bench.operations.qmax.measure_qmax`).
- :mod:`bench.operations.ttotal`: ``bench ttotal``'s scale-out (:func:`~bench.operations.ttotal.measure_ttotal`).
- :mod:`bench.operations.tcopy`: ``bench tcopy``'s copy starts (:func:`~bench.operations.tcopy.measure_tcopy`).
- :mod:`bench.operations.replay`: ``bench replay``'s open loop (:func:`~bench.operations.replay.replay_trace`).
- :mod:`bench.operations.validate`: ``bench validate``'s checks (:func:`~bench.operations.validate.validate_deployment`).
- :mod:`bench.operations.observe`: ``bench observe``'s calibration (:func:`~bench.operations.observe.observe_endpoint`).
- :mod:`bench.operations.drift`: ``bench drift --stack``'s reconciliation (:func:`~bench.operations.drift.stack_drift`).
- :mod:`bench.operations.copies`, :mod:`~bench.operations.capacity`, :mod:`~bench.operations.forecast`: ``bench copies``,
  ``capacity`` and ``forecast`` (:func:`~bench.operations.copies.plan_copies`, :func:`~bench.operations.capacity.evaluate`,
  :func:`~bench.operations.forecast.forecast_floors`).
- :mod:`bench.operations.thaw`: ``bench thaw``'s restore (:func:`~bench.operations.thaw.thaw`).
- :mod:`bench.operations.tune`: ``bench tune``'s search and checks (:func:`~bench.operations.tune.tune`);
  :mod:`bench.operations.tune_k8s` for ``--platform kubernetes``.
- :mod:`bench.operations.simulate`: ``bench simulate``'s run (:func:`~bench.operations.simulate.simulate_trace`).
- :mod:`bench.operations.plan_model`: ``bench plan`` for one model (:func:`~bench.operations.plan_model.plan_model`);
  :mod:`bench.operations.plan`: ``--stack NAME`` over every model and ``--migrate-config``;
  :mod:`bench.operations.plan_hpa`: a tuned HPA into the stack entry.
"""
