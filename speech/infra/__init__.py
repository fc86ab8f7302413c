"""The Pulumi edge: everything that imports pulumi.

- :mod:`~speech.infra.program`: the program (stack config -> plan -> gate -> components -> outputs)
- :mod:`~speech.infra.components`: the Pulumi components of an endpoint
- :mod:`~speech.infra.stack_config`: the ``pulumi.Config`` reader (the file itself is :mod:`speech.stack`)
- :mod:`~speech.infra.preview`: the program under Pulumi's mocks (``speech-deploy preview``)
- :mod:`~speech.infra.rehearse`, :mod:`~speech.infra.checkpoint`: the weight-cache build rehearsed locally
"""
