"""The simulator's names and defaults that command-line help states (policy names, the default SLO
share, the shipped traces), in a module that imports nothing: ``bench simulate --help`` and
``bench tune --help`` read them without loading numpy or the simulator. The modules that own them
(:mod:`speech.sim.policies`, :mod:`speech.sim.peers`, :mod:`speech.sim.traces`) re-export them."""

POLICY_NAMES: tuple[str, ...] = ("plan", "reference", "pressure", "qps-ewma", "kpa", "fixed-peak", "perfect-forecast", "floor",
                                   "target-floor", "hpa-v2", "keda", "predictive")
"""Every policy ``bench simulate`` knows, in table order (speech.sim.policies.POLICIES has one factory each)."""

DEFAULT_SLO_SHARE = 0.995
"""Share of requests answered within the SLO the floor (and ``bench tune``) keeps over a trace, by default."""

PROMISE_MISS_CHANCE = 0.1
"""``bench tune`` keeps a plan only when the chance that any of :data:`PROMISE_UNSEEN_DRAWS` further
draws of the traffic falls below its share bound is at most this (speech.sim.tune.unseen_share_bound,
under the bound's normal model): 10 %, so nine tunings in ten keep their promise on a working week
of unseen draws. Smaller promises more and costs more instances."""
PROMISE_UNSEEN_DRAWS = 5
"""How many further draws :data:`PROMISE_MISS_CHANCE` covers: the five unseen draws
benchmarks/plan_cost.py judges every tuned plan on."""

BUILTIN_TRACES = {"azure-conv": "azure-llm-2023-conv.csv", "azure-code": "azure-llm-2023-code.csv"}
ATTRIBUTION = "Azure LLM inference trace 2023, Microsoft Azure (CC BY 4.0)"
