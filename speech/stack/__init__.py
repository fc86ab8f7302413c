"""The stack file, ``Pulumi.<stack>.yaml``: one home for reading, writing, migrating and re-planning it.

- :mod:`speech.stack.read`: the file (or the program's raw config) -> a validated
  :class:`~speech.schema.config.StackConfig`; stack names, regions, artifact references checked
  by sha256. One parser for the program, the pack and bench, so they share its error texts.
- :mod:`speech.stack.write`: a model's entry written with its artifacts by reference
  (round-trip YAML, the file's other keys and comments kept), under a lock, atomically;
  ``--migrate-config`` (embedded artifacts -> references).
- :mod:`speech.stack.replan`: every model of the file planned and gated as the program does,
  under the daily budget (``bench plan --stack NAME``).

Above the pure core and :mod:`speech.files` (it reads and writes files), below
:mod:`speech.infra`: it imports no Pulumi and no AWS client; the program's ``pulumi.Config``
reader is :mod:`speech.infra.stack_config`.
"""
