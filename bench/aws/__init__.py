"""What bench reads from and writes to AWS, every call through an injected boto3 session.

- :mod:`~bench.aws.client`: sessions (standard retries), the endpoint's scaling, alarms, instance
  counts and CloudWatch readings; AWS errors as one-line messages.
- :mod:`~bench.aws.freeze`: scaling frozen for a measurement and always restored (``bench thaw``).
- :mod:`~bench.aws.fleet_read`: a deployed components endpoint read into a fleet file.
- :mod:`~bench.aws.scaling_check`: deployed scaling compared with a plan (drift, validate).
- :mod:`~bench.aws.receipts`: a measurement's receipt in the stack's provenance bucket.
"""
