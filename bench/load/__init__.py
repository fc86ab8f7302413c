"""The load a measurement sends and how it is timed.

- :mod:`~bench.load.loadgen`: the closed-loop engine (N requests in flight, one level at a time).
- :mod:`~bench.load.ladder`: the Q_max search over levels (pure) and the request mixes.
- :mod:`~bench.load.targets`: what the load goes to: a local container (HTTP stream, WebSocket)
  or a SageMaker endpoint, behind one interface.
- :mod:`~bench.load.http1`: the raw HTTP/1.1 client under the ``http://`` targets.
- :mod:`~bench.load.synthetic`: a server of exactly known capacity, for tests and benchmarks.
- :mod:`~bench.load.traces`: ``--trace`` specs read into traces (the shipped CSVs and the user's).
- :mod:`~bench.load.schedule`: an open-loop schedule and its split into per-worker thinnings.
- :mod:`~bench.load.locust_engine`: ``--engine locust``: Locust master and worker processes, their
  rows merged; :mod:`~bench.load.locustfile` is what those processes run (it imports Locust, which
  monkey-patches for gevent: only Locust processes import it), with :mod:`~bench.load.ghttp` and
  :mod:`~bench.load.eventstream` (SigV4-signed SageMaker response streams) as its clients.
"""
