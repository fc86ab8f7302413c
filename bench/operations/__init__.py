"""What a command does once its flags parse, one function per command kind (as pip's
``operations/``): the protocol of a measurement or a search, the files it writes, atomically, and
the result the command renders. Nothing here prints a report or imports :mod:`bench.commands`.

- :mod:`bench.operations.tune`: ``bench tune``'s search and checks (:func:`~bench.operations.tune.tune`);
  :mod:`bench.operations.tune_k8s` for ``--platform kubernetes``.
"""
