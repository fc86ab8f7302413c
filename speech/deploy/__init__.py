"""The deploy layer: what the plan becomes on AWS, as pure specs that the program renders and the
pack, drift and validate read back.

Imports :mod:`speech.schema` and :mod:`speech.plan`; no pulumi, no boto3.

- :mod:`~speech.deploy.scaling`: the scaling spec per hosting kind, and the one comparison
- :mod:`~speech.deploy.gate`: whether scaling may be created, with the reason when not
- :mod:`~speech.deploy.provenance`, :mod:`~speech.deploy.receipts`: provenance tags, receipts at preview
- :mod:`~speech.deploy.outputs`: the stack outputs
- :mod:`~speech.deploy.hosting`, :mod:`~speech.deploy.weights`: SageMaker hosting limits, the weight cache
- :mod:`~speech.deploy.iam`, :mod:`~speech.deploy.iam_check`: IAM documents and the wildcard rule
- :mod:`~speech.deploy.alarm_eval`: CloudWatch alarm semantics, to test alarm definitions
- ``weight_cache.sh``, ``weight_fetch.py``: the weight-cache build's steps, shipped to the build
  (never imported)
"""
