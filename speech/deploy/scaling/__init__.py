"""The scaling spec: what each hosting kind deploys, the one definition the program renders and the
pack, drift, validate and the simulator read back (docs/design.md §5)."""

from speech.schema.aws import *  # noqa: F401,F403
from speech.deploy.scaling.spec import *  # noqa: F401,F403
from speech.deploy.scaling.realtime import *  # noqa: F401,F403
from speech.deploy.scaling.batch import *  # noqa: F401,F403
from speech.deploy.scaling.copies import *  # noqa: F401,F403
