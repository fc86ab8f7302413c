"""PNG plots of measurements (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from pathlib import Path

from speech.schema.artifacts import QmaxArtifact, TtotalArtifact


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def why_level_failed(lv, slo_ms: float) -> str:
    """Why a ladder level does not meet the SLO, in the words of the rule it broke
    (bench.load.loadgen.LevelResult.meets: p95 within the SLO, nothing rejected, at most 1 % errors)."""
    reasons = []
    if lv.ttfab_p95_ms > slo_ms:
        reasons.append(f"p95 {lv.ttfab_p95_ms:.0f} ms > SLO")
    if lv.rejected:
        reasons.append(f"{lv.rejected} rejected (503)")
    if lv.errors and lv.errors > 0.01 * max(lv.completed, 1):
        reasons.append(f"{lv.errors} errors")
    if lv.ok == 0:
        reasons.append("nothing answered")
    return ", ".join(reasons) or "failed"


def _integer_axis(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def plot_qmax(a: QmaxArtifact, path: Path) -> Path:
    """p95 TTFAB vs concurrency from 0 ms, the SLO line, Q_max, and every failed level marked with
    why it failed (latency over the SLO, or rejections/errors under it)."""
    plt = _plt()
    fig = qmax_figure(a)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def qmax_figure(a: QmaxArtifact):
    """The figure :func:`plot_qmax` saves (tests read its axes)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    xs = [lv.concurrency for lv in a.ladder]
    slo = a.slo.ttfab_p95_ms
    ax.plot(xs, [lv.ttfab_p95_ms for lv in a.ladder], "o-", label="p95 TTFAB")
    ax.plot(xs, [lv.ttfab_p50_ms for lv in a.ladder], ".--", alpha=0.6, label="p50 TTFAB")
    ax.axhline(slo, color="tab:red", lw=1, label=f"SLO {slo:g} ms")
    if a.q_max:
        ax.axvline(a.q_max, color="tab:green", ls=":", label=f"Q_max {a.q_max}")
    bad = [lv for lv in a.ladder if not lv.meets_slo]
    for i, lv in enumerate(bad):
        latency = lv.ttfab_p95_ms > slo
        ax.plot([lv.concurrency], [lv.ttfab_p95_ms], "x" if latency else "s", color="tab:red", ms=11 if latency else 8,
                mew=2, mfc="none", label=("failed: p95 over the SLO" if latency else "failed: rejections/errors under the SLO")
                if i == next(j for j, b in enumerate(bad) if (b.ttfab_p95_ms > slo) == latency) else None)
        ax.annotate(why_level_failed(lv, slo), (lv.concurrency, lv.ttfab_p95_ms), fontsize=7, color="tab:red",
                    xytext=(-6, 8), textcoords="offset points", ha="right")
    ax.set_ylim(bottom=0, top=max([slo, *(lv.ttfab_p95_ms for lv in a.ladder)]) * 1.15)
    ax.set_xlim(left=0)
    _integer_axis(ax.xaxis)
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("TTFAB, ms")
    ax.set_title(f"{a.model} {a.transport} on {a.fingerprint.slug}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_ttotal(a: TtotalArtifact, path: Path) -> Path:
    """Phase waterfall: one bar per phase from the previous phase to this one."""
    plt = _plt()
    fig = ttotal_figure(a)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def ttotal_figure(a: TtotalArtifact):
    """The figure :func:`plot_ttotal` saves; its legend names only the kinds of bar it drew."""
    from matplotlib.patches import Patch

    from bench.report.text import dominant_phase
    from speech.plan.formulas import planning_t_total
    from speech.schema.config import ReactionPolicy

    plt = _plt()
    phases = [p for p in a.phases if p.applicable and p.offset_s is not None]
    t = planning_t_total(a.measured_total_s, ReactionPolicy())
    dominant = dominant_phase(a)
    fig, ax = plt.subplots(figsize=(7, 0.5 * (len(phases) + 1) + 2.0), dpi=110)
    prev = 0.0
    drawn: dict[str, Patch] = {}
    for i, p in enumerate(phases):
        assert p.offset_s is not None  # phases keeps only those with an offset (above)
        width = max(p.offset_s - prev, 0.0)
        is_dominant = bool(dominant and p.name == dominant.name)
        color = "tab:orange" if p.bounded else "tab:blue"
        ax.barh(i, width, left=prev, color=color, edgecolor="tab:red" if is_dominant else None,
                linewidth=2 if is_dominant else 0)
        if width <= 0:
            pass  # nothing drawn: its kind is not named in the legend for it
        elif p.bounded:
            drawn.setdefault("bounded", Patch(color="tab:orange", label="phase bounded (a timestamp range, not a reading)"))
        else:
            drawn.setdefault("measured", Patch(color="tab:blue", label="phase measured"))
        if is_dominant and width > 0:
            drawn["dominant"] = Patch(facecolor="none", edgecolor="tab:red", linewidth=2, label="dominant phase")
        ax.text(p.offset_s, i, f" {p.offset_s:.1f} s", va="center", fontsize=8)
        prev = max(prev, p.offset_s)
    # The plan adds the reaction bound after the measured scale-out: drawn as the last bar.
    ax.barh(len(phases), t.reaction_bound_s, left=t.measured_s, color="tab:gray", hatch="//")
    drawn["reaction"] = Patch(facecolor="tab:gray", hatch="//", label="reaction bound (the plan adds it)")
    ax.text(t.planning_s, len(phases), f" {t.planning_s:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(phases) + 1), [p.name for p in phases] + ["reaction bound (plan)"])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since desired_set")
    order = [k for k in ("measured", "bounded", "dominant", "reaction") if k in drawn]
    fig.legend(handles=[drawn[k] for k in order], fontsize=7, loc="lower center", ncol=2, frameon=False)
    title = f"planning T_total {t.planning_s:.1f} s = measured {t.measured_s:.1f} s + reaction {t.reaction_bound_s:g} s ({a.trigger})"
    if dominant is not None:
        title += f"\ndominant: {dominant.name} {dominant.seconds:.1f} s ({100 * dominant.share:.0f}%)"
    ax.set_title(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


POLICY_STYLE = {"plan": dict(lw=2.2, color="tab:blue", ls="-", zorder=5),
                "seed plan": dict(lw=2.2, color="tab:blue", ls="-", zorder=5),
                "tuned plan": dict(lw=2.2, color="black", ls="-", zorder=6)}
"""The plans drawn on top, solid and thick (beside a tuned plan, the seed in blue and the tuned one
in black)."""
PLAN_DOT = {"plan": "tab:blue", "seed plan": "tab:blue", "tuned plan": "black"}
OTHER_STYLES = (
    dict(color="tab:orange", ls=(0, (6, 2)), marker="o"),
    dict(color="tab:green", ls=(0, (1, 1.5)), marker="s"),
    dict(color="tab:red", ls=(0, (4, 1.5, 1, 1.5)), marker="^"),
    dict(color="tab:purple", ls=(0, (10, 3)), marker="D"),
    dict(color="tab:brown", ls=(0, (3, 1, 1, 1, 1, 1)), marker="v"),
    dict(color="magenta", ls=(0, (2, 2)), marker="P"),
    dict(color="tab:olive", ls=(0, (8, 2, 2, 2)), marker="X"),
    dict(color="tab:cyan", ls=(0, (5, 1)), marker="*"),
    dict(color="tab:pink", ls=(0, (1, 3)), marker="h"),
    dict(color="goldenrod", ls=(0, (6, 1, 1, 1)), marker="<"),
    dict(color="darkred", ls=(0, (12, 2, 2, 2, 2, 2)), marker=">"),
)
"""The other policies: each its own colour, dash pattern and marker (a marker every few points), so
every policy stays apart in print and for a reader who does not tell colours apart; none blue or
grey (blue is the plan, grey the offered load)."""


def policy_style(policy: str, k: int) -> dict:
    """The line style of one policy: the plans' from :data:`POLICY_STYLE`, the k-th other policy's
    from :data:`OTHER_STYLES` (k counts the other policies only)."""
    if policy in POLICY_STYLE:
        return dict(POLICY_STYLE[policy])
    return dict(lw=1.1, alpha=0.9, ms=4, **OTHER_STYLES[k % len(OTHER_STYLES)])


def plot_simulation(art, runs, model, plan, stem: Path) -> list[Path]:
    """One overlay of every policy over time (offered load and rejections, instances in service on
    an integer axis, per-minute p95 TTFAB from 0 ms against the SLO) and one cost-vs-SLO scatter
    with the plan's own SLO share as the target."""
    plt = _plt()
    fig = timeline_figure(art, runs, model, plan)
    path = Path(f"{stem}-timeline.png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    paths = [path]
    fig = cost_vs_slo_figure(art, plan)
    path = Path(f"{stem}-cost-vs-slo.png")
    fig.savefig(path)
    plt.close(fig)
    paths.append(path)
    return paths


def timeline_figure(art, runs, model, plan):
    """The figure of :func:`plot_simulation`'s timeline (tests read its lines)."""
    import numpy as np

    from speech.sim.fleet import minute_p95_ms

    plt = _plt()
    fig, axes = plt.subplots(3, 1, figsize=(11, 8), dpi=100, sharex=True)
    top_ms = plan.inputs.slo_ms
    others = 0
    for k, run in enumerate(runs):
        minutes = np.arange(int(np.ceil(run.arrivals.size / 60)))
        idx = np.arange(run.arrivals.size) // 60
        hours = minutes / 60.0
        style = policy_style(run.policy, others)
        others += run.policy not in POLICY_STYLE
        style.setdefault("markevery", max(1, minutes.size // 12))
        if k == 0:
            axes[0].plot(hours, np.bincount(idx, run.arrivals, minlength=minutes.size) / 60.0, lw=1.4, color="0.6",
                         label="offered rps (every policy)")
        axes[0].plot(hours, np.bincount(idx, run.rejected, minlength=minutes.size) / 60.0, label=run.policy, **style)
        axes[1].plot(hours, np.bincount(idx, run.serving, minlength=minutes.size) / 60.0, label=run.policy, **style)
        p95 = np.asarray(minute_p95_ms(run, model), dtype=float)
        if np.isfinite(p95).any():
            top_ms = max(top_ms, float(np.nanmax(p95)))
        axes[2].plot(hours, p95, label=run.policy, **style)
    axes[0].set_ylabel("requests/s")
    axes[0].set_title("offered load (grey) and rejected requests/s per policy", fontsize=9)
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylabel("instances in service")
    axes[1].set_ylim(bottom=0)
    _integer_axis(axes[1].yaxis)
    slo_line = axes[2].axhline(plan.inputs.slo_ms, color="tab:red", lw=1, ls=":", label=f"SLO {plan.inputs.slo_ms:g} ms")
    axes[2].set_ylim(0, top_ms * 1.1)
    axes[2].set_ylabel("p95 TTFAB per minute, ms")
    axes[2].set_xlabel("hours")
    # One legend for all three panels, outside them, so no curve hides behind it.
    handles, labels = axes[1].get_legend_handles_labels()
    offered = axes[0].get_lines()[0]
    fig.legend([offered, *handles, slo_line], [offered.get_label(), *labels, slo_line.get_label()], loc="center right",
               fontsize=8, title="policy", title_fontsize=8, handlelength=3.5)
    fig.subplots_adjust(right=0.84)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(f"every scaling policy on {art.trace.spec}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    return fig


LABEL_OFFSETS = ((5, 4), (5, -12), (-5, 4), (-5, -12), (5, 16), (5, -24), (-5, 16), (-5, -24), (5, 28), (-5, 28),
                 (5, -36), (-5, -36), (5, 40), (-5, 40))
"""Where a point's label may go, in points from the point (right/left, above/below, then further out)."""


def place_labels(ax, points: list[tuple[float, float, str]], fontsize: float = 8, obstacles: tuple = ()) -> list:
    """Annotate each (x, y, text) at the first offset of :data:`LABEL_OFFSETS` whose text box
    overlaps no label placed before and no other point's marker; a label that finds no free place
    goes to the last offset with a leader line. Returns the annotations (tests check their boxes)."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    marker_px = 5.0
    centres = [ax.transData.transform((x, y)) for x, y, _ in points]
    inside = ax.get_window_extent(renderer)  # a label outside the axes would run into the title
    placed: list = []
    boxes = list(obstacles)  # e.g. the legend's box
    # Top to bottom, then left to right: the reading order of a scatter.
    for i in sorted(range(len(points)), key=lambda j: (-points[j][1], points[j][0])):
        x, y, text = points[i]
        chosen = None
        for dx, dy in LABEL_OFFSETS:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize,
                              ha="left" if dx >= 0 else "right", va="bottom" if dy >= 0 else "top")
            box = ann.get_window_extent(renderer).expanded(1.05, 1.15)
            hits_label = any(box.overlaps(b) for b in boxes)
            hits_point = any(j != i and box.x0 - marker_px <= cx <= box.x1 + marker_px
                             and box.y0 - marker_px <= cy <= box.y1 + marker_px for j, (cx, cy) in enumerate(centres))
            within = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if within and not hits_label and not hits_point:
                chosen = (ann, box)
                break
            ann.remove()
        if chosen is None:
            dx, dy = LABEL_OFFSETS[-1]
            ann = ax.annotate(text, (x, y), xytext=(dx, dy + 12 * len(placed)), textcoords="offset points",
                              fontsize=fontsize, ha="right", va="bottom", arrowprops=dict(arrowstyle="-", lw=0.5, color="0.4"))
            chosen = (ann, ann.get_window_extent(renderer))
        placed.append(chosen[0])
        boxes.append(chosen[1])
    return placed


def cost_vs_slo_figure(art, plan):
    """Cost (instance-hours over the floor's) against the share within the SLO, one point per
    policy, the target at the plan's own SLO share (``inputs.slo_share``: what it is sized for),
    labels placed so none overlaps another label or point."""
    plt = _plt()
    target_pct = 100 * plan.inputs.slo_share
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    by_cost = any(r.cost_vs_floor is not None for r in art.results)
    points = []
    others = 0
    for r in art.results:
        x = r.cost_vs_floor if r.cost_vs_floor is not None else r.instance_hours
        y = 100 * r.within_slo_share
        if r.policy in PLAN_DOT:
            ax.scatter([x], [y], s=70, color=PLAN_DOT[r.policy], zorder=4)
        else:
            st = OTHER_STYLES[others % len(OTHER_STYLES)]
            others += 1
            ax.scatter([x], [y], s=45, color=st["color"], marker=st["marker"], zorder=3)
        points.append((x, y, r.policy))
    ax.axhline(target_pct, color="tab:red", lw=1, ls=":",
               label=f"target: {target_pct:g}% within the SLO (the plan's slo_share)")
    lowest = min(100 * r.within_slo_share for r in art.results)
    bottom = min(lowest, target_pct) - 2
    ax.set_ylim(bottom, 100 + 0.08 * (100 - bottom))  # room above 100 % for the labels of the best points
    xs = [p[0] for p in points]
    span = (max(xs) - min(xs)) or max(abs(max(xs)), 1.0)
    ax.set_xlim(min(xs) - 0.08 * span, max(xs) + 0.25 * span)  # room on the right for labels
    ax.set_xlabel("cost / floor (instance-hours over the floor's)" if by_cost else "instance-hours")
    ax.set_ylabel("% answered within SLO")
    ax.set_title(f"cost vs SLO on {art.trace.spec}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    legend = ax.get_legend()
    place_labels(ax, points, obstacles=(legend.get_window_extent(fig.canvas.get_renderer()),) if legend else ())
    return fig


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
