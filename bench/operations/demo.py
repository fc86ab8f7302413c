"""``bench demo``'s chain, the one function the command calls (:func:`demo`): the whole chain on this
machine, on real parts, in a few minutes.

Starts the inference container with the real Kokoro-82M (onnx, CPU), measures Q_max with a
short ladder, measures T_total by starting a second container process, plans with stated
inputs, writes a stack config, tunes the plan on the demo's one-hour trace (bench tune),
simulates the seed and the tuned plan against the other scaling policies on that trace, previews
the Pulumi program under mocks with the policy pack, and writes one HTML report.

Every measuring and planning step is the same command a user runs by hand: the chain is a
generator that yields :class:`Run` (a ``speech-bench`` command line; the caller runs it through the
entry point and sends back its exit code) and :class:`Say` (a progress line), so it never calls
back up into the commands; the container is stopped on every exit path (a ``close()`` included).
It returns a :class:`~bench.report.demo.DemoSummary` the command renders.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from bench.errors import BenchError, TargetError, UsageError
from bench.load.synthetic import free_port
from bench.report.demo import DemoSummary
from bench.report.html import PolicyViolation, write_report
from bench.report.plots import plot_qmax, plot_ttotal
from policy.check import preview_resources, run_check
from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.artifact import SimulationArtifact, TuneArtifact
from speech.stack.read import stack_file as stack_path

STEPS = ("container", "qmax", "ttotal", "plan", "tune", "simulate", "preview+policy", "report")

TUNE_TRAIN_DAYS = 1
"""The tuner chooses on the demo's own hour (seed 1, the trace the simulation runs), so the tuned
plan's promise is what the simulation must reproduce."""
TUNE_HOLDOUT_DAYS = 2
"""... and checks the winner on two other hours (seeds 2 and 3) and the perturbed first hour."""


@dataclass(frozen=True)
class Say:
    """A progress line of ``step`` (the command prints ``[step] text``)."""

    step: str
    text: str


@dataclass(frozen=True)
class Run:
    """A step that is a ``speech-bench`` command: the caller runs ``argv`` as a user would type it and
    sends back its exit code."""

    argv: list[str]


T = TypeVar("T")
Chain = Generator["Say | Run", "int | None", T]
"""A piece of the chain: yields what to say and what to run, receives a :class:`Run`'s exit code,
returns its result."""


class Container:
    """The local inference container as a child process, stopped on every exit path."""

    def __init__(self, serve_cmd: str, log_path: Path, slo_ms: float):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        argv = [*shlex.split(serve_cmd), "--host", "127.0.0.1", "--port", str(self.port)]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "wb")
        # Its own process group: a Ctrl-C in the terminal reaches us, and we stop it in order.
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "SLO_MS": f"{slo_ms:g}", "HF_HUB_OFFLINE": "1"},
        )

    def wait_ready(self, timeout_s: float = 240.0) -> dict:
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise TargetError(f"the container exited with code {self.proc.returncode}; see {self.log_path}")
            try:
                r = httpx.get(self.url + "/ping", timeout=2)
                if r.status_code == 200:
                    return r.json()
                last = r.text[:200]
            except httpx.HTTPError as err:
                last = type(err).__name__
            time.sleep(0.25)
        raise TargetError(f"the container did not become ready within {timeout_s:.0f} s ({last}); see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # drains in-flight requests, then exits 0
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def newest_artifact(out: Path, pattern: str, *, exclude: str | None = None) -> Path:
    found = sorted((p for p in out.glob(pattern) if exclude is None or not p.match(exclude)), key=lambda p: p.stat().st_mtime)
    if not found:
        raise BenchError(f"no {pattern} in {out} after the step; see its output above")
    return found[-1]


def seed_plan_path(out: Path) -> Path:
    """bench plan's plan-<model>.json (not bench tune's plan-<model>-tuned.json beside it)."""
    return newest_artifact(out, "plan-*.json", exclude="plan-*-tuned.json")


@dataclass(frozen=True)
class Tuned:
    """bench tune's output in --out: the tuned plan and the tune artifact (knobs, checks)."""

    plan_path: Path
    plan: PlanArtifact
    tune_path: Path | None
    tune: TuneArtifact | None


def _step(name: str, rc: int | None, ok: tuple[int, ...] = (0,)) -> None:
    if rc == 130:  # the step saw Ctrl-C first; unwind the demo the same way
        raise KeyboardInterrupt
    if rc not in ok:
        raise BenchError(f"step {name} failed with exit code {rc}; see its output above")


def demo(args: argparse.Namespace) -> Chain[DemoSummary]:
    """The whole chain for the parsed flags of ``bench demo`` (``--report-only``: simulate, preview and
    report on the artifacts a previous demo left in --out); :class:`~bench.errors.UsageError` for bad
    input before anything starts."""
    if args.slo_ms <= 0 or args.peak_rps <= 0 or args.max_concurrency < 2:
        raise UsageError("--slo-ms and --peak-rps must be > 0 and --max-concurrency >= 2")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    # SIGTERM (e.g. from a CI runner) takes the same path as Ctrl-C: stop the container, write nothing half.
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if getattr(args, "report_only", False):
        signal.signal(signal.SIGTERM, previous)
        qmax_path, ttotal_path = newest_artifact(out, "qmax-*.json"), newest_artifact(out, "ttotal-*.json")
        qmax, ttotal = load_artifact(qmax_path, QmaxArtifact), load_artifact(ttotal_path, TtotalArtifact)
        plan = load_artifact(seed_plan_path(out), PlanArtifact)
        yield Say("report", f"re-using {qmax_path.name}, {ttotal_path.name} and the plan in {out}")
        tuned = yield from _reuse_tuned(out, plan, qmax, ttotal)

        plot_qmax(qmax, qmax_path.with_suffix(".png"))
        plot_ttotal(ttotal, ttotal_path.with_suffix(".png"))
    else:
        qmax_path, ttotal_path, qmax, ttotal, plan = yield from _measure_and_plan(args, out, previous)
        tuned = yield from tune_step(args, out, qmax_path, ttotal_path, plan)
    return (yield from _after_plan(args, out, t_start, qmax_path, ttotal_path, qmax, ttotal, plan, tuned))


def _measure_and_plan(args: argparse.Namespace, out: Path,
                      previous) -> Chain[tuple[Path, Path, QmaxArtifact, TtotalArtifact, PlanArtifact]]:
    """container -> qmax -> ttotal -> plan; the container stopped on every path."""

    container: Container | None = None
    closing = False
    try:
        # The default command serves the real Kokoro-82M (onnx on CPU); --serve-cmd may start anything, so the
        # line names the command and the next one the backend the server itself reports.
        yield Say("container", f"starting the inference container: {args.serve_cmd}")
        container = Container(args.serve_cmd, out / "container.log", args.slo_ms)
        ident = container.wait_ready()
        yield Say("container", f"ready at {container.url} ({ident.get('backend')}, weights "
                               f"{str(ident.get('weights_sha256', '?'))[:19]})")

        levels = ["--levels", "1,2", "--no-refine"] if args.quick else ["--max-concurrency", str(args.max_concurrency)]
        settle, measure = ("1", "4") if args.quick else (f"{args.settle_s:g}", f"{args.measure_s:g}")
        yield Say("qmax", f"closed-loop ladder against {container.url}, SLO {args.slo_ms:g} ms")
        _step("qmax", (yield Run(["qmax", "--url", container.url, "--slo-ms", f"{args.slo_ms:g}", *levels,
                                  "--settle-s", settle, "--measure-s", measure, "--mix", "short", "--out", str(out),
                                  "--plot"])),
              ok=(0, 1))  # 1: Q_max 0; the demo goes on so the plan's stop and the report show why
        qmax_path = newest_artifact(out, "qmax-*.json")

        yield Say("ttotal", "timing a second container process from start to first served request")
        _step("ttotal", (yield Run(["ttotal", "--qmax", str(qmax_path), "--url", container.url, "--serve-cmd", args.serve_cmd,
                                    "--recover-window-s", "3" if args.quick else "5", "--out", str(out), "--plot"])))
        ttotal_path = newest_artifact(out, "ttotal-*.json")

        yield Say("plan", f"peak {args.peak_rps:g} rps, trough {args.trough_rps:g} rps, surge x{args.surge_ratio:g}")
        rc = yield Run(["plan", "--qmax", str(qmax_path), "--ttotal", str(ttotal_path), "--slo-ms", f"{args.slo_ms:g}",
                        "--peak-rps", f"{args.peak_rps:g}", "--trough-rps", f"{args.trough_rps:g}",
                        "--surge-ratio", f"{args.surge_ratio:g}", "--out", str(out), "--stack", args.stack,
                        "--stack-dir", str(args.stack_dir), "--instance-type", args.instance_type, "--allow-config-mismatch"])
        _step("plan", rc, ok=(0, 1))
        qmax = load_artifact(qmax_path, QmaxArtifact)
        ttotal = load_artifact(ttotal_path, TtotalArtifact)
        plan = load_artifact(seed_plan_path(out), PlanArtifact)
    except GeneratorExit:
        closing = True  # the caller closed the chain (interrupted outside a step): stop, and yield nothing more
        raise
    finally:
        try:
            if container is not None:
                container.stop()
        finally:  # even when stopping failed: the caller's SIGTERM handler comes back
            signal.signal(signal.SIGTERM, previous)
        if container is not None and not closing:
            yield Say("container", "stopped")
    return qmax_path, ttotal_path, qmax, ttotal, plan


def tune_step(args: argparse.Namespace, out: Path, qmax_path: Path, ttotal_path: Path, plan: PlanArtifact) -> Chain[Tuned | None]:
    """``bench tune`` on the demo's trace with the plan's own inputs (so its seed is the plan just
    made): trained on that hour, checked on other hours; the tuned plan and the tune artifact land
    in --out. Exit 1 (a check missed the share) is a result the report shows, not a failure."""

    if plan.q_max < 1:
        yield Say("tune", "skipped: Q_max is 0 (no ladder level met the SLO), there is nothing to tune")
        return None
    spec = simulation_trace(args)
    yield Say("tune", f"bench tune on {spec}: {TUNE_TRAIN_DAYS} training hour (the one simulated next), "
                      f"{TUNE_HOLDOUT_DAYS} held-out hours, spikes x{args.surge_ratio:g} and a shifted hour")
    started = time.monotonic()
    rc = yield Run(["tune", "--qmax", str(qmax_path), "--ttotal", str(ttotal_path), "--trace", spec,
                    "--slo-ms", f"{args.slo_ms:g}", "--peak-rps", f"{args.peak_rps:g}",
                    "--trough-rps", f"{min(args.trough_rps, args.peak_rps):g}", "--surge-ratio", f"{args.surge_ratio:g}",
                    "--train-days", str(TUNE_TRAIN_DAYS), "--holdout-days", str(TUNE_HOLDOUT_DAYS), "--out", str(out)])
    _step("tune", rc, ok=(0, 1))
    tuned_path = out / f"plan-{plan.model}-tuned.json"
    tune_path = newest_artifact(out, f"tune-{plan.model}-*.json")
    tuned = Tuned(tuned_path, load_artifact(tuned_path, PlanArtifact), tune_path, load_artifact(tune_path, TuneArtifact))
    yield Say("tune", f"done in {time.monotonic() - started:.1f} s: " + ("the promise held on every check" if rc == 0 else
                      "a check missed the SLO share (the report shows which)"))
    return tuned


def _reuse_tuned(out: Path, plan: PlanArtifact, qmax: QmaxArtifact, ttotal: TtotalArtifact) -> Chain[Tuned | None]:
    """--report-only: the tuned plan a previous demo left in --out, when it was tuned from the
    artifacts re-used (else the report goes without it, and says why here)."""

    path = out / f"plan-{plan.model}-tuned.json"
    if not path.exists():
        yield Say("tune", f"no {path.name} in {out} (a demo from before bench tune ran in it): the report shows the seed "
                          "plan only")
        return None
    tuned = load_artifact(path, PlanArtifact)
    if (tuned.inputs.qmax_sha256, tuned.inputs.ttotal_sha256) != (canonical_sha256(qmax), canonical_sha256(ttotal)):
        yield Say("tune", f"{path.name} was tuned from other qmax/ttotal artifacts than the newest ones: left out; "
                          "run the whole demo to tune again")
        return None
    tune_path, tune = None, None
    for p in sorted(out.glob(f"tune-{plan.model}-*.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        candidate = load_artifact(p, TuneArtifact)
        if candidate.tuned_plan_sha256 == canonical_sha256(tuned):  # the tuning that wrote this tuned plan
            tune_path, tune = p, candidate
            break
    yield Say("tune", f"re-using {path.name}" + (f" and {tune_path.name}" if tune_path is not None else ""))  # set with tune
    return Tuned(path, tuned, tune_path if tune is not None else None, tune)


NEXT_STEPS = (
    # The bucket is the stack output endpoints.<model>.provenance_bucket: measured figures scale only with receipts.
    "python -m bench qmax --endpoint <stack>-{model} --slo-ms <SLO> --plot --receipt-bucket <bucket>",
    "python -m bench ttotal --endpoint <stack>-{model} --qmax artifacts/qmax-....json --plot --receipt-bucket <bucket>",
    "python -m bench plan --qmax ... --ttotal ... --peak-rps <N> --stack <stack>",
    "pulumi preview --policy-pack policy && pulumi up",
    "python -m bench validate --plan artifacts/plan-{model}.json --endpoint <stack>-{model} --live",
)
"""What a user does next with an AWS account (``{model}``: the plan's model)."""


def _after_plan(args: argparse.Namespace, out: Path, t_start: float, qmax_path: Path, ttotal_path: Path,
                qmax: QmaxArtifact, ttotal: TtotalArtifact, plan: PlanArtifact, tuned: Tuned | None = None) -> Chain[DemoSummary]:
    plan_path = seed_plan_path(out)
    simulation, simulation_pngs = yield from simulate_step(args, out, qmax_path, ttotal_path, plan_path, plan, tuned)

    stack_file = stack_path(args.stack_dir, args.stack)
    yield Say("preview+policy", f"the Pulumi program under mocks on {stack_file}, every resource sent to the policy pack")
    violations, gates = _preview_and_policy(stack_file, args.stack)
    for g in gates:
        yield Say("preview+policy", f"gate: {g}")
    mandatory = [v for v in violations if v.level == "mandatory"]
    yield Say("preview+policy", f"{len(mandatory)} mandatory, {len(violations) - len(mandatory)} advisory violation(s)")
    for v in violations:
        yield Say("preview+policy", f"  {v.level}: [{v.policy}] {v.resource}: {v.message}")

    next_steps = [s.format(model=plan.model) for s in NEXT_STEPS]
    report = write_report(
        out / "report.html", plan=plan, qmax=qmax, ttotal=ttotal,
        ladder_png=_png_for(qmax_path), waterfall_png=_png_for(ttotal_path),
        violations=violations, policy_ran=True, next_steps=next_steps,
        simulation=simulation, simulation_pngs=simulation_pngs,
        policy_note=(f"These measurements describe this machine ({plan.fingerprint.slug}), not {args.instance_type}: "
                     "the demo plans scaling from them anyway so the numbers reach real resources, and the pack "
                     "shows it would block deploying them there. On AWS, measure the endpoint itself."),
        title="speech-endpoints demo: measured on this machine",
        instance_type=args.instance_type,
        tuned_plan=tuned.plan if tuned is not None else None, tune=tuned.tune if tuned is not None else None,
    )
    return DemoSummary(
        elapsed_s=time.monotonic() - t_start, slo_ms=args.slo_ms, instance_type=args.instance_type, plan=plan,
        qmax_path=qmax_path, ttotal_path=ttotal_path, plan_path=plan_path,
        tuned_plan=tuned.plan if tuned is not None else None, tuned_plan_path=tuned.plan_path if tuned is not None else None,
        tune_path=tuned.tune_path if tuned is not None else None, simulation=simulation,
        simulation_path=newest_artifact(out, "simulation-*.json") if simulation is not None else None,
        simulation_pngs=simulation_pngs, stack_file=stack_file, report=report, mandatory=mandatory, next_steps=next_steps,
    )


def simulation_trace(args: argparse.Namespace) -> str:
    """One hour of the diurnal tide between the planned trough and peak (1 s steps, seeded): long
    enough for every policy to scale out and back in, short enough to add seconds, not minutes."""
    return f"diurnal:peak={args.peak_rps:g},trough={min(args.trough_rps, args.peak_rps):g},hours=1,seed=1"


def simulate_step(args: argparse.Namespace, out: Path, qmax_path: Path, ttotal_path: Path, plan_path: Path,
                  plan: PlanArtifact, tuned: Tuned | None = None) -> Chain[tuple[SimulationArtifact | None, list[Path]]]:
    """``bench simulate`` on the plan just made (and the tuned plan beside it): the comparison table
    in the output, the artifact and the PNGs next to the others."""

    if plan.q_max < 1:
        yield Say("simulate", "skipped: Q_max is 0 (no ladder level met the SLO), there is no instance to simulate")
        return None, []
    spec = simulation_trace(args)
    pair = ["--tuned-plan", str(tuned.plan_path)] if tuned is not None else []
    yield Say("simulate", ("the seed plan and the tuned plan" if tuned is not None else "the plan")
              + f" against every scaling policy on {spec}")
    _step("simulate", (yield Run(["simulate", "--qmax", str(qmax_path), "--ttotal", str(ttotal_path), "--plan", str(plan_path),
                                  *pair, "--trace", spec, "--out", str(out), "--plot"])))
    path = newest_artifact(out, "simulation-*.json")
    art = load_artifact(path, SimulationArtifact)
    stem = path.with_suffix("")
    pngs = [Path(f"{stem}-cost-vs-slo.png"), Path(f"{stem}-timeline.png")]
    return art, [p for p in pngs if p.exists()]


def _png_for(artifact: Path) -> Path | None:
    png = artifact.with_suffix(".png")
    return png if png.exists() else None


def _preview_and_policy(stack_file: Path, stack: str) -> tuple[list[PolicyViolation], list[str]]:
    resources, preview = preview_resources(stack_file, stack)
    report = run_check(resources, None, stack)
    violations = [PolicyViolation(d.level, d.policy, d.resource or "(stack)", d.message) for d in report.diagnostics]
    gates = [f"{g.model}: {'scaling' if g.enabled else 'no scaling'}: {g.reason}" for g in preview.gates]
    return violations, gates
