"""The schema layer: what every artifact and stack config holds, and the names AWS gives things.

Pure pydantic models and constants; it imports nothing else of ``speech`` but :mod:`speech.errors`.

- :mod:`~speech.schema.artifacts`: measurement artifacts (qmax, ttotal, copy), fingerprints, provenance
- :mod:`~speech.schema.plan_artifacts`: plan and calibration artifacts
- :mod:`~speech.schema.copy_plan`: the copy plan artifact (hosting: components)
- :mod:`~speech.schema.config`: the stack config models (models, plan inputs, measurements)
- :mod:`~speech.schema.receipts`: measurement receipts (the document and its key)
- :mod:`~speech.schema.prices`, :mod:`~speech.schema.instances`, :mod:`~speech.schema.aws`: prices,
  instance sizes and AWS names, each in one place
- :mod:`~speech.schema.units`: the numeric conventions (``EPS``, ``UNBOUNDED``)
"""
