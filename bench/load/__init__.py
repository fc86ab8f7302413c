"""The load a measurement sends and how it is timed.

- :mod:`~bench.load.loadgen`: the closed-loop engine (N requests in flight, one level at a time).
- :mod:`~bench.load.ladder`: the Q_max search over levels (pure) and the request mixes.
- :mod:`~bench.load.targets`: what the load goes to: a local container (HTTP stream, WebSocket)
  or a SageMaker endpoint, behind one interface.
- :mod:`~bench.load.http1`: the raw HTTP/1.1 client under the ``http://`` targets.
- :mod:`~bench.load.synthetic`: a server of exactly known capacity, for tests and benchmarks.
- :mod:`~bench.load.traces`: ``--trace`` specs read into traces (the shipped CSVs and the user's).
"""
