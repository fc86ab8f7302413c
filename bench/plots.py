"""PNG plots of measurements (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from pathlib import Path

from speech.schema.artifacts import QmaxArtifact, TtotalArtifact


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_qmax(a: QmaxArtifact, path: Path) -> Path:
    """p95 TTFAB vs concurrency with the SLO line, Q_max and the first violation marked."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    xs = [lv.concurrency for lv in a.ladder]
    ax.plot(xs, [lv.ttfab_p95_ms for lv in a.ladder], "o-", label="p95 TTFAB")
    ax.plot(xs, [lv.ttfab_p50_ms for lv in a.ladder], ".--", alpha=0.6, label="p50 TTFAB")
    ax.axhline(a.slo.ttfab_p95_ms, color="tab:red", lw=1, label=f"SLO {a.slo.ttfab_p95_ms:g} ms")
    if a.q_max:
        ax.axvline(a.q_max, color="tab:green", ls=":", label=f"Q_max {a.q_max}")
    bad = [lv for lv in a.ladder if not lv.meets_slo]
    if bad:
        first = min(bad, key=lambda lv: lv.concurrency)
        ax.plot([first.concurrency], [first.ttfab_p95_ms], "x", color="tab:red", ms=12, mew=2,
                label=f"first violation ({first.concurrency})")
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("TTFAB, ms")
    ax.set_title(f"{a.model} {a.transport} on {a.fingerprint.slug}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_ttotal(a: TtotalArtifact, path: Path) -> Path:
    """Phase waterfall: one bar per phase from the previous phase to this one."""
    from speech.schema.config import ReactionPolicy
    from speech.plan.realtime import planning_t_total

    from bench.report import dominant_phase

    plt = _plt()
    phases = [p for p in a.phases if p.applicable and p.offset_s is not None]
    t = planning_t_total(a.measured_total_s, ReactionPolicy())
    dominant = dominant_phase(a)
    fig, ax = plt.subplots(figsize=(7, 0.5 * (len(phases) + 1) + 1.8), dpi=110)
    prev = 0.0
    for i, p in enumerate(phases):
        width = max(p.offset_s - prev, 0.0)
        edge = "tab:red" if dominant and p.name == dominant.name else None
        ax.barh(i, width, left=prev, color="tab:orange" if p.bounded else "tab:blue", edgecolor=edge, linewidth=2 if edge else 0)
        ax.text(p.offset_s, i, f" {p.offset_s:.1f} s", va="center", fontsize=8)
        prev = max(prev, p.offset_s)
    # The plan adds the reaction bound after the measured scale-out: drawn as the last bar.
    ax.barh(len(phases), t.reaction_bound_s, left=t.measured_s, color="tab:gray", hatch="//")
    ax.text(t.planning_s, len(phases), f" {t.planning_s:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(phases) + 1), [p.name for p in phases] + ["reaction bound (plan)"])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since desired_set (orange: bounded; red edge: dominant phase)")
    title = f"planning T_total {t.planning_s:.1f} s = measured {t.measured_s:.1f} s + reaction {t.reaction_bound_s:g} s ({a.trigger})"
    if dominant is not None:
        title += f"\ndominant: {dominant.name} {dominant.seconds:.1f} s ({100 * dominant.share:.0f}%)"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_simulation(art, runs, model, plan, stem: Path) -> list[Path]:
    """Per policy a timeline (offered load and rejections, instances in service, per-minute p95
    TTFAB against the SLO) and one cost-vs-SLO scatter of all policies."""
    import numpy as np

    from speech.sim.fleet import minute_p95_ms

    plt = _plt()
    paths: list[Path] = []
    for run in runs:
        minutes = np.arange(int(np.ceil(run.arrivals.size / 60)))
        idx = np.arange(run.arrivals.size) // 60

        # This run's idx and minute count bound as defaults, so the helper can never read a later run's.
        def per_min(x, idx=idx, n_minutes=minutes.size):
            return np.bincount(idx, x, minlength=n_minutes) / 60.0

        hours = minutes / 60.0
        fig, axes = plt.subplots(3, 1, figsize=(9, 7), dpi=100, sharex=True)
        axes[0].plot(hours, per_min(run.arrivals), lw=0.8, label="offered rps")
        axes[0].plot(hours, per_min(run.rejected), lw=0.8, color="tab:red", label="rejected rps")
        axes[0].set_ylabel("requests/s")
        axes[0].legend(fontsize=8, loc="upper left")
        axes[1].plot(hours, np.bincount(idx, run.serving, minlength=minutes.size) / 60.0, lw=0.8, label="in service")
        axes[1].plot(hours, np.bincount(idx, run.billed, minlength=minutes.size) / 60.0, lw=0.8, ls="--", label="billed")
        axes[1].set_ylabel("instances")
        axes[1].legend(fontsize=8, loc="upper left")
        axes[2].plot(hours, minute_p95_ms(run, model), lw=0.8, label="p95 TTFAB (answered)")
        axes[2].axhline(plan.inputs.slo_ms, color="tab:red", lw=1, label=f"SLO {plan.inputs.slo_ms:g} ms")
        axes[2].set_ylabel("ms")
        axes[2].set_xlabel("hours")
        axes[2].legend(fontsize=8, loc="upper left")
        fig.suptitle(f"{run.policy} on {art.trace.spec}")
        fig.tight_layout()
        path = Path(f"{stem}-{run.policy}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for r in art.results:
        x = r.cost_vs_oracle if r.cost_vs_oracle is not None else r.instance_hours
        ax.scatter([x], [100 * r.within_slo_share], s=40)
        ax.annotate(r.policy, (x, 100 * r.within_slo_share), fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("cost / oracle" if any(r.cost_vs_oracle is not None for r in art.results) else "instance-hours")
    ax.set_ylabel("% answered within SLO")
    ax.set_title(f"cost vs SLO on {art.trace.spec}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(f"{stem}-cost-vs-slo.png")
    fig.savefig(path)
    plt.close(fig)
    paths.append(path)
    return paths


def plot_hot_load(runs, path: Path, trace_spec: str) -> Path:
    """instance-only vs hot-load over time: rejected requests/s, copies serving, instances alive."""
    import numpy as np

    plt = _plt()
    fig, axes = plt.subplots(3, 1, figsize=(9, 7), dpi=100, sharex=True)
    for r in runs:
        t = np.arange(r.run.arrivals.size) / 60.0
        axes[0].plot(t, r.run.rejected, lw=0.8, label=f"{r.policy}: rejected")
        axes[1].plot(t, r.copies_serving, lw=0.9, label=r.policy)
        axes[2].plot(t, r.instances, lw=0.9, label=r.policy)
    axes[0].plot(np.arange(runs[0].run.arrivals.size) / 60.0, runs[0].run.arrivals, lw=0.5, color="0.6", label="offered")
    axes[0].set_ylabel("requests/s")
    axes[1].set_ylabel("copies serving")
    axes[2].set_ylabel("instances")
    axes[2].set_xlabel("minutes")
    for ax in axes:
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=0.3)
    fig.suptitle(f"hot-load vs instance-only\n{trace_spec}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
