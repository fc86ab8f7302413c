"""The scaling spec: the complete desired scaling state of one endpoint variant, from a plan
(docs/design.md §5).

Pure (no pulumi, no boto3, no I/O). Four readers use it and nothing else:

- the program (:mod:`speech.infra.components.autoscaling`) renders it into resources;
- the policy pack (:mod:`policy.rules`) normalizes Pulumi resource properties into the same shape;
- ``bench drift`` / ``bench validate`` (:mod:`bench.aws.scaling_check`) normalize AWS ``Describe*``
  output into the same shape;
- the simulator (:func:`speech.sim.scaling_numbers`) reads its numbers from it.

The pack and bench compare with :func:`diff` (one tolerance, :data:`REL_TOL`) and render its
:class:`Difference` values into their own messages. Adding a policy or changing a threshold is an
edit here only. The AWS names and constants (metric, namespaces, dimensions, variant, resource id,
policy-name suffixes) are defined once, in :mod:`speech.schema.aws`.

Modules: :mod:`.spec` (shared parts, :func:`diff`), :mod:`.crons` (the scheduled floors' crons),
:mod:`.realtime` (instances), :mod:`.batch` (batch routes), :mod:`.copies` (inference-component
copies); this package re-exports all of them.
"""

from speech.deploy.scaling.batch import *  # noqa: F401,F403
from speech.deploy.scaling.copies import *  # noqa: F401,F403
from speech.deploy.scaling.crons import *  # noqa: F401,F403
from speech.deploy.scaling.realtime import *  # noqa: F401,F403
from speech.deploy.scaling.spec import *  # noqa: F401,F403
from speech.schema.aws import *  # noqa: F401,F403
