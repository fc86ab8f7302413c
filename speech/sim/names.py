"""The simulator's names and defaults that command-line help states (policy names, the default SLO
share, the shipped traces), in a module that imports nothing: ``bench simulate --help`` and
``bench tune --help`` read them without loading numpy or the simulator. The modules that own them
(:mod:`speech.sim.policies`, :mod:`speech.sim.peers`, :mod:`speech.sim.traces`) re-export them."""

POLICY_NAMES: tuple[str, ...] = ("plan", "reference", "pressure", "qps-ewma", "kpa", "fixed-peak", "perfect-forecast", "floor",
                                   "target-floor")
"""Every policy ``bench simulate`` knows, in table order (speech.sim.policies.POLICIES has one factory each)."""

DEFAULT_SLO_SHARE = 0.995
"""Share of requests answered within the SLO the floor (and ``bench tune``) keeps over a trace, by default."""

BUILTIN_TRACES = {"azure-conv": "azure-llm-2023-conv.csv", "azure-code": "azure-llm-2023-code.csv"}
ATTRIBUTION = "Azure LLM inference trace 2023, Microsoft Azure (CC BY 4.0)"
