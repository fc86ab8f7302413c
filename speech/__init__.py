"""speech-endpoints: measured autoscaling for latency-sensitive inference endpoints.

The folders are the layers, and imports run one way (import-linter contracts in pyproject.toml):

    speech.schema  <  speech.plan  <  speech.deploy  <  speech.sim      the pure core: no pulumi, boto3 or I/O
    speech.files                                                         artifact files (the core's only file I/O)
    speech.stack                                                         the stack file: read, write, migrate, re-plan
    speech.infra                                                         the Pulumi program, components, preview, rehearse

:mod:`speech.errors` holds the error tree every layer raises; :mod:`speech.cli` what every console
script shares; ``speech/__main__.py`` is ``speech-deploy`` (preview, rehearse). docs/design.md §2
maps every room of the project.
"""
