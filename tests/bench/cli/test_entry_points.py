"""Issue 27: the four console scripts, --version and --help on each, and help that loads nothing
heavy before it answers. The installed scripts are run in subprocesses (after
``pip install -e .`` they sit beside the interpreter)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
SCRIPTS = {"speech-bench": "bench", "speech-deploy": "speech", "speech-policy": "policy", "speech-container": "container"}
HEAVY = ("numpy", "scipy", "pydantic", "boto3", "botocore", "pulumi", "pulumi_policy", "rich", "httpx", "ruamel")


def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def script(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed: pip install --no-deps --no-build-isolation -e .")
    return str(path)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_installed_script_answers_version_and_help(name):
    v = run([script(name), "--version"])
    assert v.returncode == 0 and v.stdout.strip().startswith(f"{name} ") and v.stderr == ""
    h = run([script(name), "--help"])
    assert h.returncode == 0 and h.stdout.startswith(f"usage: {name}")
    assert ":func:" not in h.stdout and "``" not in h.stdout


@pytest.mark.parametrize("name,module", sorted(SCRIPTS.items()))
def test_python_m_is_an_alias(name, module):
    r = run([sys.executable, "-m", module, "--version"])
    assert r.returncode == 0 and r.stdout.strip().startswith(f"{name} ")


def test_python_m_policy_help_answers_instead_of_serving():
    r = run([sys.executable, "-m", "policy", "--help"], timeout=30)
    assert r.returncode == 0 and "usage: speech-policy" in r.stdout and not r.stdout.strip().isdigit()


def test_policy_pack_started_by_the_engine_still_serves():
    """The engine starts policy/__main__.py without arguments: it prints its gRPC port and serves."""
    proc = subprocess.Popen([sys.executable, "-u", str(ROOT / "policy" / "__main__.py")], cwd=ROOT / "policy",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = proc.stdout.readline().strip()
        assert port.isdigit() and int(port) > 0
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["plan", "--help"]])
def test_bench_help_loads_nothing_heavy_before_parsing(argv):
    """Top-level --help and --version import no numeric, AWS or Pulumi library; a command's own --help
    imports that command only (never pulumi or boto3 for plan)."""
    code = (f"import sys\nfrom bench.cli.main import main\ntry:\n    rc = main({argv!r})\nexcept SystemExit as e:\n    rc = e.code\n"
            f"import json\nprint(json.dumps({{'rc': rc, 'mods': sorted(m.split('.')[0] for m in sys.modules)}}))")
    r = run([sys.executable, "-c", code])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rc"] == 0
    loaded = set(out["mods"])
    if argv[0] == "plan":
        assert not loaded & {"pulumi", "pulumi_policy", "boto3", "botocore"}
    else:
        assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize("command", ["qmax", "ttotal", "tcopy", "copies", "capacity", "plan", "validate", "observe", "drift", "thaw",
                                     "simulate", "tune", "replay", "demo"])
def test_every_command_help_and_argument_error_load_no_numpy_scipy_or_pydantic(command):
    """Issue 36: a command's --help and an argument error answer before numpy, scipy, pydantic, the
    simulator or an AWS client is imported (their imports live in the functions that use them);
    benchmarks/cli_startup.py times it."""
    for argv in ([command, "--help"], [command, "--slo-ms", "nan"] if command not in ("tcopy", "copies", "capacity", "thaw")
                 else [command, "--bogus"]):
        code = (f"import sys\nfrom bench.cli.main import main\ntry:\n    rc = main({argv!r})\nexcept SystemExit as e:\n"
                "    rc = e.code\nimport json\nprint(json.dumps({'rc': rc, 'mods': sorted(m.split('.')[0] for m in sys.modules)}))")
        r = run([sys.executable, "-c", code])
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["rc"] == (0 if argv[-1] == "--help" else 2), (argv, r.stderr)
        assert not set(out["mods"]) & set(HEAVY), (argv, sorted(set(out["mods"]) & set(HEAVY)))


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_deploy_and_policy_help_load_nothing_heavy(argv):
    for module, entry in (("speech.__main__", "main"), ("policy.__main__", "main")):
        code = (f"import sys\nfrom {module} import {entry}\ntry:\n    rc = {entry}({argv!r})\nexcept SystemExit as e:\n"
                "    rc = e.code\nimport json\nprint(json.dumps({'rc': rc, 'mods': sorted(m.split('.')[0] for m in sys.modules)}))")
        r = run([sys.executable, "-c", code])
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["rc"] == 0 and not set(out["mods"]) & set(HEAVY), (module, sorted(set(out["mods"]) & set(HEAVY)))


@pytest.mark.parametrize("argv", [[c, *rest] for c in ("preview", "rehearse", "render")
                                  for rest in (["--help"], ["--stack", "../x", "--out", "o"])])
def test_deploy_subcommand_help_and_argument_error_load_no_command(argv):
    """speech-deploy's parsers are apart from its commands (speech/commands/parsers): a subcommand's
    --help and a refused argument answer before its command module, the stack reader, pydantic or
    Pulumi are imported (before, ``preview --help`` imported the stack reader and pydantic)."""
    code = (f"import sys\nfrom speech.__main__ import main\ntry:\n    rc = main({argv!r})\nexcept SystemExit as e:\n"
            "    rc = e.code\nimport json\nprint(json.dumps({'rc': rc, 'mods': sorted(sys.modules)}))")
    r = run([sys.executable, "-c", code])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rc"] == (0 if argv[-1] == "--help" else 2), (argv, r.stderr)
    loaded = set(out["mods"])
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY), (argv, sorted({m.split(".")[0] for m in loaded} & set(HEAVY)))
    assert not loaded & {f"speech.commands.{argv[0]}", "speech.stack.read", "speech.infra", "speech.schema"}, argv


@pytest.mark.parametrize("name,argv", [("speech-bench", ["nope"]), ("speech-deploy", ["preview"]),
                                       ("speech-policy", ["check", "--stack", "../x"]), ("speech-bench", ["plan", "--json", "--bogus"])])
def test_usage_errors_are_one_line_exit_2(name, argv):
    r = run([script(name), *argv])
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout
    if "--json" in argv:
        assert json.loads(r.stdout)["error"]["exit_code"] == 2 and r.stderr == ""
    else:
        assert "error:" in r.stderr.strip().splitlines()[-1]


def test_help_texts_explain_every_command():
    """Every subcommand's --help has a description and a line of help per option (no bare flags)."""
    from bench.cli.main import COMMANDS, build_parser

    parser = build_parser("*")
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in COMMANDS:
        p = sub.choices[name]
        assert p.description and len(p.description) > 40, name
        for action in p._actions:
            if action.option_strings and action.help is not None:
                assert action.help.strip(), (name, action.option_strings)
            assert action.help is None or ":func:" not in action.help


MARKUP = re.compile(r"``|:(func|class|mod|data|meth|attr):`")


@pytest.mark.parametrize("name,sub", [("speech-deploy", "preview"), ("speech-deploy", "rehearse"), ("speech-policy", "check"),
                                      *(("speech-bench", c) for c in ("drift", "qmax", "ttotal", "tcopy", "copies", "capacity",
                                                                      "plan", "validate", "observe", "thaw", "simulate",
                                                                      "replay", "demo"))])
def test_every_subcommand_help_is_plain_text(name, sub):
    r = run([script(name), sub, "--help"])
    assert r.returncode == 0 and r.stdout.startswith(f"usage: {name} {sub}")
    assert not MARKUP.search(r.stdout), MARKUP.search(r.stdout)
    assert "-q, --quiet" in r.stdout and "--json" in r.stdout


def test_copies_help_states_the_footprint_margin_the_plan_uses():
    from bench.cli.parsers.copies import MARGIN_DEFAULT_TEXT
    from speech.plan.copies import FOOTPRINT_MARGIN

    assert float(MARGIN_DEFAULT_TEXT) == FOOTPRINT_MARGIN
