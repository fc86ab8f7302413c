"""Issue 28: each hostile input is one line naming what, which value and what to do, exit 2, and
nothing written. One test per listed case, then one bad input with --json per command."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from bench.cli.main import COMMANDS, main
from tests.stack_files import copy_stack

ROOT = Path(__file__).resolve().parents[3]
REF = ROOT / "artifacts" / "reference"
QMAX = REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
PLAN = ["plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL)]


def files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*")} if path.exists() else set()


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture
def work(tmp_path, monkeypatch):
    """An empty working directory: whatever a refused command wrote would show here."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_peak_rps_inf_is_one_line_with_the_range(work, capsys):
    rc = main([*PLAN, "--peak-rps", "inf", "--out", str(work / "out")])
    line = one_line(capsys.readouterr().err)
    assert rc == 2
    assert "--peak-rps inf" in line and "not a finite number" in line and "0 < x <= 100_000 requests/s" in line
    assert files_under(work) == set()


@pytest.mark.parametrize("value,needle", [("nan", "not a finite number"), ("1e400", "not a finite number"),
                                          ("-5", "outside the allowed range"), ("lots", "not a number")])
def test_every_numeric_flag_refuses_non_finite_and_out_of_range(work, capsys, value, needle):
    rc = main([*PLAN, "--peak-rps", "50", "--surge-ratio", value, "--out", str(work / "out")])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and f"--surge-ratio {value}" in line and needle in line and "1 <= x < 1.5" in line
    assert files_under(work) == set()


def test_trace_csv_holding_nan_names_the_line(work, capsys):
    (work / "t.csv").write_text("0\n1\nnan\n3\n")
    rc = main(["simulate", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--trace", "csv:t.csv", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and line.startswith("TraceError: t: line 3, column 1: 'nan' is not a finite number")
    assert files_under(work) == {work / "t.csv"}


def test_trace_timestamp_1e12_is_refused_before_anything_is_allocated(work, capsys):
    (work / "t.csv").write_text("0\n1\n1e12\n")
    rc = main(["simulate", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--trace", "csv:t.csv", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "spans 1,000,000,000,000 s" in line and "604,800 s" in line and "speedup=X" in line
    assert "allocate" not in line
    assert files_under(work) == {work / "t.csv"}


def test_csv_bad_value_reports_its_own_line_and_column(work, capsys):
    (work / "t.csv").write_text("TIMESTAMP,tokens\n2023-11-16 18:15:46,10\n2023-11-16 18:15:47,x\n2023-11-16 18:15:48,12\n")
    rc = main(["simulate", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--trace", "csv:t.csv,size=tokens", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "line 3, column 2 ('tokens'): 'x' is not a number" in line
    (work / "t.csv").write_text("TIMESTAMP\n2023-11-16 18:15:46\n2023-11-16 18:15:47\n2023-13-45 99:00\n")
    rc = main(["simulate", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--trace", "csv:t.csv", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "line 4, column 1 ('TIMESTAMP'): '2023-13-45 99:00' is not an ISO date-time" in line


def test_stack_name_that_is_a_path_is_refused(work, capsys):
    (work / "stacks").mkdir()
    rc = main([*PLAN, "--peak-rps", "50", "--stack", "../../etc/x", "--stack-dir", "stacks", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "'../../etc/x' is not a" in line and "stack name" in line
    assert files_under(work) == {work / "stacks"}
    assert not (work.parent.parent / "etc").exists() or not any((work.parent.parent / "etc").glob("Pulumi.*"))


def test_qualified_stack_name_means_the_bare_stack(work, capsys):
    rc = main([*PLAN, "--peak-rps", "50", "--stack", "acme/speech-endpoints/prod", "--instance-type", "ml.g5.xlarge",
               "--out", "out"])
    assert rc in (0, 1), capsys.readouterr().err
    assert (work / "Pulumi.prod.yaml").is_file() and not (work / "Pulumi.acme").exists()
    rc = main([*PLAN, "--peak-rps", "50", "--stack", "acme/other/prod", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "project 'other' is not this one (speech-endpoints)" in line


def test_unwritable_out_dir_is_one_line_and_nothing_written(work, capsys):
    rc = main([*PLAN, "--peak-rps", "50", "--out", "/proc/nope"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and line.startswith("UsageError: --out /proc/nope: cannot create /proc/nope")
    (work / "file").write_text("x")
    rc = main([*PLAN, "--peak-rps", "50", "--out", "file/sub"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "file is not a directory" in line
    assert files_under(work) == {work / "file"}


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_SECURITY_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize("argv", [
    ["thaw", "--endpoint", "x"], ["validate", "--plan", "p.json", "--endpoint", "x"],
    ["validate", "--plan", "p.json", "--endpoint", "x", "--live"],
    ["tcopy", "--inference-component", "x", "--footprint-from",
     str(ROOT / "artifacts" / "local" / "copy-kokoro-82m-local-4ed3d00a.json")],
])
def test_missing_region_is_one_line_exit_2(no_aws, work, capsys, argv, ref_plan):
    from speech.files import write_artifact

    write_artifact(work / "p.json", ref_plan)
    rc = main(argv)
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and line == "AwsSetupError: no AWS region: pass --region REGION (e.g. us-east-1) or set AWS_REGION"


def test_missing_credentials_is_one_line_exit_2(no_aws, work, capsys):
    rc = main(["thaw", "--endpoint", "x", "--region", "us-east-1"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and line.startswith("AwsSetupError: no AWS credentials found")


def test_aws_clients_use_standard_retries_with_a_budget(monkeypatch):
    from bench.aws import client as aws

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = aws.session("us-east-1").client("application-autoscaling")
    retries = client.meta.config.retries
    assert retries["mode"] == "standard" and retries["total_max_attempts"] == aws.MAX_ATTEMPTS


@pytest.mark.parametrize("text,needles", [
    ("config:\n  speech-endpoints:models:\n\tkokoro: {}\n",
     ["Pulumi.s.yaml:3:1: not valid YAML", "'\\t'", "line 3 is '\\tkokoro: {}'", "spaces, not tabs"]),
    ("config:\n  speech-endpoints:budget: 1\n  speech-endpoints:budget: 2\n",
     ["Pulumi.s.yaml:3:3: not valid YAML", 'duplicate key "speech-endpoints:budget"', "from line 2"]),
    ("config:\n  speech-endpoints:budget: .nan\n", ["config.speech-endpoints:budget: not a finite number"]),
])
def test_stack_yaml_errors_name_line_column_and_key(work, capsys, text, needles):
    (work / "Pulumi.s.yaml").write_text(text)
    rc = main(["plan", "--stack", "s", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and line.startswith("ConfigError: ")
    for n in needles:
        assert n in line
    assert files_under(work) == {work / "Pulumi.s.yaml"}


def _stack_with_other_image(tmp_path: Path) -> Path:
    """The dev stack without its pinned image: the program builds one whose digest is not the measured one."""
    stack = copy_stack(ROOT / "Pulumi.dev.yaml", tmp_path, "other")  # with the artifacts it references
    stack.write_text(re.sub(r"\n      image: [^\n]*\n", "\n", stack.read_text(), count=1))
    return tmp_path


@pytest.mark.parametrize("entry", ["preview", "rehearse", "policy"])
@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_config_error_inside_the_program_is_one_line_exit_2(tmp_path, capsys, entry):
    stack_dir = _stack_with_other_image(tmp_path)
    argv = ["--stack", "other", "--stack-dir", str(stack_dir)]
    if entry == "preview":
        from speech.commands.preview import main as run
    elif entry == "rehearse":
        from speech.commands.rehearse import main as run
    else:
        from policy.check import main as run
    rc = run(argv)
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert rc == 2 and line.startswith("ConfigError: speech-endpoints:models.kokoro-82m: the image built from")
    assert "RunError" not in captured.err and "pulumi" not in line.split(":")[0]
    rc = run([*argv, "--json"])
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert rc == 2 and error["type"] == "ConfigError" and error["exit_code"] == 2 and captured.err == ""


# --- --json: one bad input per command, the error as JSON on stdout --------------------------------

BAD_INPUT = {
    "drift": ["--stack", "a/b/c/d"],
    "qmax": ["--url", "http://127.0.0.1:9", "--factor", "1.0001"],
    "ttotal": ["--qmax", "q.json", "--url", "http://127.0.0.1:9", "--timeout-s", "0"],
    "tcopy": ["--url", "http://127.0.0.1:9", "--starts", "1000"],
    "copies": ["--qmax", "q.json", "--copy", "c.json", "--peak-rps", "-1"],
    "capacity": ["--fleet", "f.json", "--model", "m", "--delta-concurrency", "inf"],
    "plan": ["--qmax", "q.json", "--ttotal", "t.json", "--peak-rps", "nan"],
    "validate": ["--plan", "p.json", "--endpoint", "x", "--settle-s", "-1"],
    "observe": ["--plan", "p.json", "--endpoint", "x", "--stack", "../x"],
    "thaw": ["--endpoint", "x", "--min", "0"],
    "simulate": ["--qmax", "q.json", "--ttotal", "t.json", "--peak-rps", "1e9"],
    "replay": ["--url", "http://127.0.0.1:9", "--trace", "steady:rps=1", "--seed", "-1"],
    "demo": ["--peak-rps", "inf"],
    "tune": ["--qmax", "q.json", "--ttotal", "t.json", "--trace", "diurnal:peak=5000", "--slo-share", "1.5"],
    "forecast": ["--plan", "p.json", "--history", "diurnal:peak=100", "--quantile", "1.2"],
}


def test_every_command_has_a_json_bad_input_case():
    assert set(BAD_INPUT) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(BAD_INPUT))
def test_json_errors_are_json_on_stdout(work, capsys, command):
    rc = main([command, *BAD_INPUT[command], "--json"])
    captured = capsys.readouterr()
    assert rc == 2 and captured.err == "", captured.err
    payload = json.loads(captured.out)
    assert set(payload) == {"error"} and set(payload["error"]) == {"type", "message", "exit_code"}
    assert payload["error"]["exit_code"] == 2 and payload["error"]["type"] == "UsageError"
    assert files_under(work) == set()


def test_json_error_for_a_missing_artifact(work, capsys):
    rc = main([*PLAN[:1], "--qmax", "nope.json", "--ttotal", str(TTOTAL), "--peak-rps", "5", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert rc == 2 and payload["error"]["type"] == "ArtifactError" and "nope.json: no such file" in payload["error"]["message"]


def test_non_finite_json_in_an_artifact_is_refused(work, capsys):
    text = QMAX.read_text()
    (work / "q.json").write_text(re.sub(r'"q_max": \d+', '"q_max": NaN', text, count=1))
    rc = main(["plan", "--qmax", "q.json", "--ttotal", str(TTOTAL), "--peak-rps", "5", "--out", "out"])
    line = one_line(capsys.readouterr().err)
    assert rc == 2 and "q.json: holds NaN" in line and "finite" in line
    assert files_under(work) == {work / "q.json"}


def test_quiet_and_verbose_are_accepted_everywhere(work, capsys):
    assert main(["-q", *PLAN, "--peak-rps", "5", "--out", "out"]) == 0
    assert main([*PLAN, "--peak-rps", "5", "--out", "out", "-v"]) == 0
    assert main(["-q", "-v", "plan"]) == 2
    assert os.path.isdir("out")
