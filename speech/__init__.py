"""speech-endpoints domain core.

The pure part (config, artifacts, plan, survival) imports no pulumi, boto3 or I/O; the Pulumi
components live in :mod:`speech.components` and import pulumi themselves.
"""
