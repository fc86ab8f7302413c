"""The fleet simulator on the reference measurements: the issue's done-when checks, the AWS
mechanics, traces, and the fluid model against a discrete-event simulation of the same fleet."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import gamma

from speech.deploy.scaling import surge_adjustment
from speech.plan.realtime import build_plan
from speech.schema.artifacts import Fingerprint, LadderLevel, Provenance, QmaxArtifact, ServiceTime, Slo
from speech.schema.config import PlanInputs
from speech.sim.fleet import Action, count_flaps, run_policy, simulate, summarize
from speech.sim.instance import build_instance, startup_s
from speech.sim.peers import FixedPolicy
from speech.sim.policies import POLICY_NAMES, AwsPolicy
from speech.sim.scaler import scaling_numbers
from speech.sim.traces import TraceError, from_csv_text, generate, parse_spec, peak_rps
from tests.stack_files import embedded_config

ROOT_TRACES = __import__("pathlib").Path(__file__).resolve().parents[3] / "data" / "traces"


@pytest.fixture(scope="module")
def ref(request):
    from speech.files import load_artifact
    from speech.schema.artifacts import TtotalArtifact
    from tests.conftest import QMAX_REF, TTOTAL_REF

    return load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)


@pytest.fixture(scope="module")
def diurnal_day(ref):
    q, t = ref
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=10))
    trace = generate("diurnal:peak=5000,seed=1")
    _, runs, sums = simulate(plan, q, t, trace.arrivals, peak_rps=trace.peak_rps)
    return plan, trace, runs, {s.policy: s for s in sums}


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_diurnal_day_all_policies(diurnal_day):
    plan, trace, runs, by = diurnal_day
    assert list(by) == list(POLICY_NAMES)
    assert trace.peak_rps == pytest.approx(5000, rel=0.01)
    # reference: the published fleet of 9 (Little's law) serves ~161 rps, so most of the day is refused
    ref = by["reference"]
    assert ref.peak_instances == plan.capacity.littles_law_instances == 9
    assert ref.rejected_share > 0.8 and ref.violation_minutes > 1000
    # fixed-peak: sized for the busiest minute all day, the most expensive, never in violation
    fixed = by["fixed-peak"]
    assert fixed.violation_minutes == 0
    assert all(fixed.instance_hours > s.instance_hours for p, s in by.items() if p != "fixed-peak")
    # floor: the cost floor of serving the traffic. Only policies that serve less of it within the SLO are cheaper.
    floor = by["floor"]
    assert all(floor.instance_hours < s.instance_hours for p, s in by.items()
               if p != "floor" and s.within_slo_share >= floor.within_slo_share)
    assert by["reference"].within_slo_share < floor.within_slo_share
    # the plan answers nearly everything within the SLO, for more than the floor pays
    assert by["plan"].within_slo_share > 0.99 and by["plan"].instance_hours > floor.instance_hours


def test_steady_below_floor_is_quiet(ref):
    q, t = ref
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=100))
    floor_rps = plan.fleet.min_instances * plan.capacity.throughput_at_target_rps
    trace = generate(f"steady:rps={0.5 * floor_rps:.3f},duration=3600")
    _, runs, [s] = simulate(plan, q, t, trace.arrivals, policies=["plan"])
    assert s.within_slo_share > 0.9999 and s.rejected_share < 1e-6
    assert s.scale_out_actions == s.scale_in_actions == 0 and runs[0].actions == []
    assert s.violation_minutes == 0 and s.instance_hours == pytest.approx(plan.fleet.min_instances, rel=1e-9)


def test_step_to_three_times_trough_rejects_only_within_planning_t_total(ref):
    q, t = ref
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=100))
    base = 0.5 * plan.fleet.min_instances * plan.capacity.throughput_at_target_rps
    at = 600
    trace = generate(f"step:base={base:.3f},factor=3,at={at},duration=2400")
    _, [run], [s] = simulate(plan, q, t, trace.arrivals, policies=["plan"])
    refused = np.nonzero(run.rejected > 1e-3)[0]
    assert refused.size > 0 and s.rejected_share > 0
    assert refused.min() >= at
    # SageMaker applies one capacity change at a time: the surge step comes first and target
    # tracking's larger ask is refused while its instances start; the surge alone covers the step,
    # so rejections end within the planning T_total of the step.
    assert run.refused and run.refused[0].t_s < run.actions[0].t_s + startup_s(t)
    assert refused.max() <= at + plan.t_total.planning_s
    # the first scale-out came from the alarms, 3 periods of 10 s after the step
    first = run.actions[0]
    assert first.after > first.before and at + 30 <= first.t_s <= at + 40
    # AWS applies a step policy again for every breach after its cooldown; while the added
    # instances start, the saturated fleet keeps breaching, so the surge fires once per start-up
    surges = [a.t_s for a in run.actions if a.reason == "surge"]
    assert surges and all(b - a >= t.measured_total_s for a, b in zip(surges, surges[1:], strict=False))


def _plan_numbers(ref):
    q, t = ref
    return build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=100))


def test_scaling_numbers_are_the_deployed_ones(ref):
    plan = _plan_numbers(ref)
    s = scaling_numbers(plan)
    step = surge_adjustment(plan)
    assert (s.target_value, s.scale_in_threshold, s.saturation_threshold) == (
        plan.thresholds.scaling_target_value, plan.thresholds.scale_in_threshold, plan.alarms.saturation_concurrency)
    assert (s.surge_percent, s.surge_min_added) == (step.percent, step.min_instances_added)
    assert (s.scale_out_cooldown_s, s.scale_in_cooldown_s, s.scale_in_periods) == (30, plan.cooldowns.scale_in_s, 30)


def test_scale_in_waits_for_the_window_and_the_cooldown(ref):
    q, t = ref
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=100))
    model = build_instance(q, t)
    pol = AwsPolicy(scaling_numbers(plan), model.cloudwatch_ratio, model.q_max)
    pol.initial = lambda: 10  # start above the floor with almost no traffic
    run = run_policy(model, np.full(4000, 1.0), pol)
    ins = [a for a in run.actions if a.after < a.before]
    assert ins[0].t_s == plan.alarms.scale_in_evaluation_periods * plan.alarms.metric_period_s  # 30 x 10 s
    assert all(b.t_s - a.t_s == plan.cooldowns.scale_in_s for a, b in zip(ins, ins[1:], strict=False))
    assert all(a.before - a.after == 1 for a in ins)


def test_new_instances_serve_after_the_measured_start_up(ref):
    q, t = ref
    plan = _plan_numbers(ref)
    model = build_instance(q, t)
    assert model.startup_s == pytest.approx(212.808)  # in_service phase, not traffic_recovered
    arrivals = np.full(900, 400.0)  # far above 6 instances
    run = run_policy(model, arrivals, AwsPolicy(scaling_numbers(plan), model.cloudwatch_ratio, model.q_max))
    first = run.actions[0]
    assert run.serving[first.t_s + 212] == first.before
    assert run.serving[first.t_s + 213] > first.before
    assert run.billed[first.t_s] >= first.after  # billed from the request on


def test_flaps_count_scale_in_then_out_within_window():
    acts = [Action(100, 5, 4, "in"), Action(300, 4, 6, "out"), Action(2000, 6, 5, "in"), Action(3000, 5, 7, "out")]
    assert count_flaps(acts, 320.0) == 1


def test_fixed_fleet_conserves_requests(ref):
    q, t = ref
    model = build_instance(q, None)
    arrivals = generate("step:base=30,factor=4,at=100,duration=400").arrivals
    run = run_policy(model, arrivals, FixedPolicy("fixed", 3))
    assert run.admitted.sum() + run.rejected.sum() == pytest.approx(arrivals.sum())
    # overload: the fleet completes about its saturated throughput, the rest is refused
    late = slice(200, 400)
    assert run.admitted[late].mean() == pytest.approx(3 * model.saturation_rps, rel=0.03)



def test_the_blocks_add_up_to_the_run(ref):
    """A summary's 24 blocks hold every request and every in-SLO request of the run, in order: the
    overloaded second half of a step has the worse blocks."""
    from speech.sim.fleet import SHARE_BLOCKS, summarize

    q, t = ref
    model = build_instance(q, t, slo_ms=3000)
    arrivals = generate("step:base=30,factor=4,at=1500,duration=3000").arrivals
    s = summarize(run_policy(model, arrivals, FixedPolicy("fixed", 3)), model, 3000, 300)
    assert len(s.block_requests) == len(s.block_within) == SHARE_BLOCKS
    assert sum(s.block_requests) == pytest.approx(s.requests)
    assert sum(s.block_within) == pytest.approx(s.within_slo_share * s.requests, rel=1e-9)
    share = [w / r for w, r in zip(s.block_within, s.block_requests, strict=True)]
    assert min(share[:11]) > 0.99 > max(share[13:])


# --- traces ------------------------------------------------------------------------------------


def test_generators_are_seeded_and_shaped():
    a, b = generate("diurnal:peak=800,hours=2,seed=3"), generate("diurnal:peak=800,hours=2,seed=3")
    assert np.array_equal(a.arrivals, b.arrivals)
    assert not np.array_equal(a.arrivals, generate("diurnal:peak=800,hours=2,seed=4").arrivals)
    assert a.duration_s == 7200 and a.peak_rps == pytest.approx(800, rel=0.03)
    assert a.arrivals[:60].mean() == pytest.approx(40, rel=0.2)  # trough defaults to peak / 20
    s = generate("step:base=10,factor=3,at=50,duration=100,seed=2")
    assert s.arrivals[:50].mean() < 15 and s.arrivals[50:].mean() > 22


@pytest.mark.parametrize("spec, needle", [
    ("diurnal", "needs peak"), ("steady:rps=abc", "not a number"), ("nope:x=1", "unknown kind"),
    ("step:base=5,at=99,duration=10", "before the end"), ("steady:rps=5,color=red", "unknown key"),
    ("csv:peak=3", "needs a path"), ("diurnal:peak=-1", "must be >"),
])
def test_bad_specs_name_the_problem(spec, needle):
    with pytest.raises(TraceError, match=needle):
        generate(spec) if not spec.startswith("csv") else parse_spec(spec)


def test_csv_time_and_rate_scaling():
    text = "t,size\n" + "\n".join(f"{i * 0.5},{i}" for i in range(240))  # 2 rps for 120 s
    tr = from_csv_text(text, name="x", spec="csv:x.csv", opts={"speedup": "2", "peak": "40", "size": "size", "scale": "multiply"})
    assert tr.duration_s == 60 and tr.peak_rps == pytest.approx(40)
    assert tr.total_requests == pytest.approx(240 * 40 / 4)
    times, sizes = tr.request_times(seed=1)
    assert times.size == pytest.approx(2400, rel=0.05) and np.all(np.diff(times) >= 0) and sizes is not None


def test_shipped_azure_trace_drives_the_simulator(ref):
    """Superposed (the default), the Azure code trace at 300 rps is traffic a fleet sized for its
    busiest minute serves within the SLO; multiplied, every burst arrives 100x as one clump and
    the same fleet misses it (the artefact issue 23 measured)."""
    q, t = ref
    text = (ROOT_TRACES / "azure-llm-2023-code.csv").read_text()
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=300, trough_rps=20))
    by = {}
    for method in ("superpose", "multiply"):
        tr = from_csv_text(text, name="azure-code", spec="azure-code:peak=300",
                           opts={"peak": "300", "size": "GeneratedTokens", "scale": method})
        assert 3300 < tr.duration_s <= 3600  # about an hour of real timestamps
        assert peak_rps(tr.arrivals) == pytest.approx(300)
        _, _, sums = simulate(plan, q, t, tr.arrivals, policies=["plan", "fixed-peak", "floor"])
        assert sum(s.requests for s in sums) == pytest.approx(3 * tr.total_requests)
        by[method] = {s.policy: s for s in sums}
    sup, mult = by["superpose"], by["multiply"]
    # the floor keeps the whole trace's share within 2e-4 (tests/speech/test_simulate_floor.py)
    assert sup["floor"].within_slo_share >= 0.995 - 2e-4 and mult["floor"].within_slo_share >= 0.995 - 2e-4
    assert sup["fixed-peak"].within_slo_share >= 0.995 > mult["fixed-peak"].within_slo_share
    assert sup["floor"].instance_hours < sup["fixed-peak"].instance_hours


# --- ground truth: a discrete-event simulation of the same fleet --------------------------------


def _erlang_ladder(service_ms: float, q_max: int, top: int) -> QmaxArtifact:
    """The ladder a one-at-a-time server with exponential service S would show: X(n) = 1/S and
    TTFAB at concurrency n is Erlang(n, S) (n - 1 ahead plus itself)."""
    s = service_ms
    levels = [
        LadderLevel(concurrency=n, completed=1000, ok=1000, ttfab_p50_ms=float(gamma.ppf(0.5, n, scale=s)),
                    ttfab_p95_ms=float(gamma.ppf(0.95, n, scale=s)), ttfab_p99_ms=float(gamma.ppf(0.99, n, scale=s)),
                    throughput_rps=1000.0 / s, client_concurrency_mean=float(n), meets_slo=n <= q_max)
        for n in range(1, top + 1)
    ]
    return QmaxArtifact(
        model="des", transport="stream", fingerprint=Fingerprint.of("local", "sha256:" + "0" * 64),
        slo=Slo(ttfab_p95_ms=levels[q_max - 1].ttfab_p95_ms + 1), ladder=levels, q_max=q_max, bracketed=True,
        first_failing_concurrency=q_max + 1, service_time=ServiceTime(mean_ms=s, p95_ms=levels[0].ttfab_p95_ms),
        instances=1, cloudwatch_ratio=1.0, cloudwatch_ratio_source="not_applicable",
        provenance=Provenance(origin="assumption", source="test"),
    )


def _des(rates_rps: np.ndarray, instances: int, service_s: float, q_max: int, seed: int):
    """simpy: Poisson arrivals at a per-second rate, least-outstanding routing, one-at-a-time FIFO
    servers with exponential service, the gate at q_max. Returns (ttfab_s of answered, rejected)."""
    import simpy

    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    servers = [simpy.Resource(env, capacity=1) for _ in range(instances)]
    held = [0] * instances
    ttfab: list[float] = []
    rejected = [0]

    def request(i: int):
        t0 = env.now
        with servers[i].request() as r:
            yield r
            yield env.timeout(rng.exponential(service_s))
        ttfab.append(env.now - t0)
        held[i] -= 1

    def source():
        for sec, lam in enumerate(rates_rps):
            for at in np.sort(rng.uniform(sec, sec + 1, rng.poisson(lam))):
                yield env.timeout(at - env.now)
                i = min(range(instances), key=held.__getitem__)
                if held[i] >= q_max:
                    rejected[0] += 1
                    continue
                held[i] += 1
                env.process(request(i))

    env.process(source())
    env.run()
    return np.array(ttfab), rejected[0]


def test_fluid_model_matches_discrete_events():
    """Four instances, a slow rise to 1.4x capacity and back: the rejected share and the answered
    p95 of the fluid model agree with the discrete-event fleet (the chain's exact assumptions,
    so what differs is the fluid/pointwise-stationary approximation and the even split)."""
    service_ms, q_max, n = 50.0, 10, 4
    q = _erlang_ladder(service_ms, q_max, top=q_max + 2)
    model = build_instance(q, None)
    t = np.arange(900)
    cap = n * 1000.0 / service_ms
    rate = cap * (0.5 + 0.9 * np.clip(np.minimum(t - 150, 750 - t) / 200.0, 0.0, 1.0))
    ttfab, rejected = _des(rate, n, service_ms / 1000.0, q_max, seed=5)
    total = ttfab.size + rejected
    run = run_policy(model, rate, FixedPolicy("fixed", n))
    s = summarize(run, model, slo_ms=q.slo.ttfab_p95_ms, planning_total_s=300)
    des_rej = rejected / total
    des_p95 = float(np.percentile(ttfab * 1000, 95))
    print(f"DES: rejected {des_rej:.4f}, p95 {des_p95:.1f} ms; fluid: rejected {s.rejected_share:.4f}, p95 {s.ttfab_p95_ms:.1f} ms")
    assert s.rejected_share == pytest.approx(des_rej, abs=0.02)
    assert s.ttfab_p95_ms == pytest.approx(des_p95, rel=0.15)
    assert abs(s.requests - total) / total < 0.02


# --- several routes under one budget -----------------------------------------------------------


def test_budget_peak_critical_keeps_its_slo_capped_standard_degrades():

    from speech.deploy.gate import apply_budget, plan_model
    from speech.sim.routes import BudgetRoute, budget_table, simulate_budget
    from speech.sim.traces import diurnal_rate, poisson_arrivals
    from speech.stack.read import parse_stack_config

    root = ROOT_TRACES.parents[1]
    raw = embedded_config(root / "examples/Pulumi.multi.yaml")
    cfg = parse_stack_config({k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("speech-endpoints:")})
    endpoints = {n: f"multi-{n}" for n in cfg.models}
    deps, alloc = apply_budget({n: plan_model(n, m, endpoint=endpoints[n]) for n, m in cfg.models.items()}, cfg,
                               endpoints=endpoints)
    routes = []
    for seed, (name, dep) in enumerate(deps.items(), start=1):
        if dep.plan is None:
            continue  # the batch route queues instead: test_budget_peak_batch_backlog_grows_and_drains
        rate = diurnal_rate(peak=dep.config.plan.peak_rps, trough=dep.config.plan.trough_rps, duration_s=3 * 3600,
                            spikes=0, spike_factor=1.0, spike_s=60, seed=seed)
        m = dep.config.measurements
        routes.append(BudgetRoute(name=name, plan=dep.plan, qmax=m.qmax, ttotal=m.ttotal,
                                  arrivals=poisson_arrivals(rate, seed)))
    results = {r.name: r for r in simulate_budget(routes)}
    print(budget_table(list(results.values())))
    crit, std = results["assistant"], results["narration"]
    assert (crit.max_instances, crit.peak_instances) == (12, 12) and (std.max_instances, std.peak_instances) == (10, 24)
    # The critical route has its whole need: its SLO holds through the peak.
    assert crit.capped.within_slo_share >= 0.95 and crit.capped.rejected_share < 0.01
    assert crit.capped.violation_minutes <= 5
    # The capped standard route refuses what 10 instances cannot admit around its peak (a tide
    # peaking at 400 rps over 10 x 17.9 rps), while with its whole need it would not.
    assert std.capped.peak_instances <= 10 and std.uncapped.peak_instances > 10
    assert std.capped.rejected_share > 0.2 and std.capped.violation_minutes > 30
    assert std.uncapped.within_slo_share >= 0.95 and std.uncapped.rejected_share < 0.01
    # What it admits still meets the SLO: the gate sheds the excess instead of queueing it.
    assert std.capped.ttfab_p95_ms <= 3000
    assert std.capped.instance_hours < std.uncapped.instance_hours


def test_budget_peak_batch_backlog_grows_and_drains():

    from speech.deploy.gate import apply_budget, plan_model
    from speech.sim.routes import simulate_backlog
    from speech.sim.traces import diurnal_rate, poisson_arrivals
    from speech.stack.read import parse_stack_config

    root = ROOT_TRACES.parents[1]
    raw = embedded_config(root / "examples/Pulumi.multi.yaml")
    cfg = parse_stack_config({k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("speech-endpoints:")})
    endpoints = {n: f"multi-{n}" for n in cfg.models}
    plain = {n: plan_model(n, m, endpoint=endpoints[n]) for n, m in cfg.models.items()}
    deps, _ = apply_budget(plain, cfg, endpoints=endpoints)
    capped, whole = deps["audiobooks"].batch, plain["audiobooks"].batch
    assert (capped.max_instances, whole.max_instances) == (1, 3)
    # A 2 h tide from 1 to 50 rps, then 2 h at the trough: above what one instance drains (17.9 rps)
    # for most of the tide.
    rate = np.concatenate([diurnal_rate(peak=50, trough=1, duration_s=7200, spikes=0, spike_factor=1.0, spike_s=60,
                                        seed=3), np.full(7200, 1.0)])
    arrivals = poisson_arrivals(rate, 3)
    ttotal = deps["audiobooks"].config.measurements.ttotal
    at_cap = simulate_backlog(capped, ttotal, arrivals)
    full = simulate_backlog(whole, ttotal, arrivals)
    peak_at = int(np.argmax(at_cap.backlog))
    drained_at = peak_at + int(np.argmax(at_cap.backlog[peak_at:] < capped.backlog_target_per_instance / 10))
    # At the cap one instance serves; the backlog grows through the peak far past the target the
    # delay allows (about 92 000 requests at 1 h 36 min), then drains during the quiet hours.
    assert at_cap.serving.max() == 1 and at_cap.backlog.max() > 5 * capped.backlog_target_per_instance
    assert 3600 < peak_at < 7200 < drained_at < len(arrivals) - 600
    assert at_cap.delay_max_s > 3 * capped.inputs.max_delay_s and at_cap.within_delay_share < 0.5
    # With the whole need (3 instances) the same traffic finishes within the delay.
    assert full.serving.max() == 3 and full.within_delay_share > 0.99 and full.unfinished == 0
    assert full.delay_p95_s <= whole.inputs.max_delay_s


# --- rate scaling: superposition vs multiplication ---------------------------------------------


def test_superposition_thins_bursts_and_keeps_the_peak():
    """One burst of 60 requests in one second in a quiet hour: multiplied by k it stays one clump of
    60k; superposed, the k copies' bursts land at different seconds, so no second holds more than a
    few copies' worth, while the busiest minute is still the asked peak and the total is kept."""
    times = np.concatenate([np.arange(0, 3600, 2.0), 1800 + np.linspace(0, 0.9, 60)])
    text = "t\n" + "\n".join(f"{t:.3f}" for t in np.sort(times))
    mult = from_csv_text(text, name="b", spec="csv:b.csv", opts={"peak": "100", "scale": "multiply"})
    sup = from_csv_text(text, name="b", spec="csv:b.csv", opts={"peak": "100"})
    assert sup.scaling == "superpose" and mult.scaling == "multiply" and "copies" in sup.scaling_detail
    assert mult.peak_rps == pytest.approx(100) and sup.peak_rps == pytest.approx(100, rel=0.01)
    assert mult.arrivals.max() > 10 * sup.arrivals.max()
    # superposition: its peak comes from many copies of the quiet traffic, so it holds more requests
    assert sup.total_requests > 2 * mult.total_requests
    # seeded: the same spec gives the same trace, another seed another
    again = from_csv_text(text, name="b", spec="csv:b.csv", opts={"peak": "100"})
    other = from_csv_text(text, name="b", spec="csv:b.csv", opts={"peak": "100", "seed": "2"})
    assert np.array_equal(again.arrivals, sup.arrivals) and not np.array_equal(other.arrivals, sup.arrivals)


def test_superposition_keeps_the_shape_on_scales_above_the_shift():
    """A trace whose rate doubles in the second half keeps that after superposing with 60 s shifts."""
    rng = np.random.default_rng(1)
    times = np.sort(np.concatenate([rng.uniform(0, 1800, 1800), rng.uniform(1800, 3600, 3600)]))
    text = "t\n" + "\n".join(f"{t:.3f}" for t in times)
    sup = from_csv_text(text, name="s", spec="csv:s.csv", opts={"peak": "50", "shift": "60"})
    first, second = sup.arrivals[120:1680].mean(), sup.arrivals[1920:3480].mean()
    assert second / first == pytest.approx(2.0, rel=0.1)


def test_unknown_scaling_names_the_choices():
    with pytest.raises(TraceError, match="scale=superpose"):
        from_csv_text("t\n1\n2\n", name="x", spec="csv:x.csv", opts={"peak": "3", "scale": "stretch"})
