"""The terminal report of ``bench tune``: every knob seed vs tuned with its reason, the promise over
the draws with its bound, the checks (held-out draws, spikes, a shift), and the scheduled floors'
effect; for ``--platform kubernetes`` the HPA's knobs and checks."""

from __future__ import annotations

from speech.sim.artifact import TuneArtifact
from speech.sim.hpa_artifact import HpaTuneArtifact


def render_tune(a: TuneArtifact) -> str:
    p, s = a.promise, a.seed
    lines = [f"bench tune: {a.model} on {p.trace}, SLO share target {p.slo_share_target:.2%} "
             f"({a.evaluations} simulated days)", "",
             f"{'knob':<20} {'seed':<28} {'tuned':<28} reason"]
    for v in a.values:
        lines.append(f"{v.knob:<20} {v.seed:<28} {v.tuned:<28} {v.reason}")
    lines += ["", f"{'draws (' + str(p.draws or '?') + ')':<22} in SLO: mean  low      high     bound    rejected  inst-h: mean  "
                  "low       high      x floor"]
    for name, x in (("seed", s), ("tuned", p)):
        low = x.slo_share_low if x.slo_share_low is not None else x.within_slo_share_worst_day
        high = x.slo_share_high if x.slo_share_high is not None else x.slo_share
        h_lo = x.instance_hours_low if x.instance_hours_low is not None else x.instance_hours
        h_hi = x.instance_hours_high if x.instance_hours_high is not None else x.instance_hours
        bound = "-" if x.slo_share_bound is None else f"{x.slo_share_bound:.3%}"
        lines.append(f"{name:<22} {x.slo_share:12.3%}  {low:7.3%}  {high:7.3%}  {bound:>7}  {x.rejected_share:8.3%}  "
                     f"{x.instance_hours:12.1f}  {h_lo:8.1f}  {h_hi:8.1f}  {x.cost_vs_floor:7.2f}")
    if p.slo_share_bound is not None:
        sd_points = 100 * (p.slo_share_bound_sd or 0.0)
        t = "" if p.slo_share_bound_t is None else f" - t {p.slo_share_bound_t:.2f} x sd {sd_points:.3f} points x sqrt(1 + 1/n)"
        lines.append(f"  bound: the share a draw the tuner did not see is predicted to keep, min(low, mean{t}); the tuned "
                     f"plan is the cheapest whose bound keeps {p.slo_share_target:.2%}")
    if a.crowd_check is not None:
        cc = a.crowd_check
        lines.append(f"  crowds: {cc.crowds} in the training draws; the tuned row is judged on them and {cc.moved_draws} copies with "
                     f"their crowds at other hours (the seed's on the training draws only): the search's winner bounds "
                     f"{cc.winner_bound:.3%} there" + ("" if not cc.tried else "; raised: " + "; ".join(cc.tried))
                     + f"; kept: {cc.chosen}" + ("" if cc.kept else " (its bound there is BELOW the target)"))
    lines += ["", "checks                 seed in SLO  seed inst-h  tuned in SLO  tuned inst-h  keeps"]
    for c in a.checks:
        lines.append(f"{c.day:<22} {c.seed_within_slo_share:10.3%}  {c.seed_instance_hours:11.1f}  {c.tuned_within_slo_share:11.3%}  "
                     f"{c.tuned_instance_hours:12.1f}  {'yes' if c.tuned_keeps_share else 'NO'}")
    floors = [c for c in a.checks if c.without_floors_instance_hours is not None]
    if floors:
        lines += ["", "scheduled floors (learned on the training draws only): the same tuned knobs without them, on the days "
                      "above"]
        for c in floors:
            assert c.without_floors_instance_hours is not None and c.without_floors_within_slo_share is not None
            saved = c.without_floors_instance_hours - c.tuned_instance_hours
            keeps = "keeps" if c.without_floors_within_slo_share >= p.slo_share_target else "MISSES"
            lines.append(f"  {c.day}: without them {c.without_floors_within_slo_share:.3%} in SLO ({keeps} the target), "
                         f"{c.without_floors_instance_hours:.1f} inst-h: the floors " +
                         (f"saved {saved:.1f} inst-h" if saved >= 0 else f"cost {-saved:.1f} inst-h more") +
                         f" and moved the share {100 * (c.tuned_within_slo_share - c.without_floors_within_slo_share):+.2f} "
                         "points")
    lines += ["", "promise held on every check" if a.held else "promise NOT held on every check (exit 1)"]
    return "\n".join(lines)


def render_hpa_tune(a: HpaTuneArtifact) -> str:
    lines = [f"bench tune --platform kubernetes: {a.model} as {'an HPA' if a.autoscaler == 'hpa' else 'a KEDA ScaledObject'} "
             f"on {a.trace}, SLO share target {a.slo_share_target:.2%} ({a.evaluations} simulated days)", "",
             f"{'knob':<20} {'seed (the plan rendered)':<36} tuned"]
    lines += [f"{k.knob:<20} {k.seed:<36} {k.tuned}" for k in a.knobs]
    lines += ["", f"{'draws (' + str(a.promise.draws) + ')':<12} in SLO: mean  low      bound    inst-h  x floor"]
    for name, p in (("seed", a.seed_promise), ("tuned", a.promise)):
        lines.append(f"{name:<12} {p.within_slo_share:12.3%}  {p.slo_share_low:7.3%}  {p.slo_share_bound:7.3%}  "
                     f"{p.instance_hours:6.1f}  {p.cost_vs_floor:7.2f}")
    if a.checks:
        lines += ["", "checks                  seed in SLO  tuned in SLO  tuned inst-h  keeps"]
        lines += [f"{c.day:<23} {c.seed_within_slo_share:11.3%}  {c.tuned_within_slo_share:12.3%}  {c.tuned_instance_hours:12.1f}  "
                  f"{'yes' if c.tuned_keeps_share else 'NO'}" for c in a.checks]
    lines += ["", "promise held on every check" if a.held else "promise NOT held on every check (exit 1)"]
    return "\n".join(lines)
