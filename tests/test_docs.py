"""Every command the docs quote exists: README.md and docs/*.md against the real CLIs and Makefile.

A quoted ``python -m bench|speech|policy|container SUB --flag ...`` must name a subcommand the CLI
dispatches and only flags its parser accepts; ``make TARGET`` must be a rule of the Makefile; a
quoted script (``python benchmarks/x.py``, ``bash benchmarks/x.sh``) must exist. The CLIs are asked
in process (their ``--help`` through the package's own ``__main__``, or bench's argparse tree), so
no subprocess, server or model is started. README's links into docs/ must reach a file and a
heading (mkdocs checks the links between the docs pages themselves: ``make lint``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import runpy
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`")
# `python -m bench qmax ...`, `.venv/bin/python -m bench.load.synthetic ...`, `$(PY) -m policy check ...`
_INVOCATION = re.compile(r"(?:^|[\s(;&|])(?:\S*/)?(?:python3?|\$\(PY\))\s+-m\s+(bench|speech|policy|container)((?:\.\w+)*)(?![\w.])(.*)")
# `bench plan --max-delay-s 900` in prose: the CLI named by its package alone, at the start of a span
_BARE_BENCH = re.compile(r"^bench\s+([a-z][\w-]*(?:\|[a-z][\w-]*)*)(?![\w.])(.*)")
_MAKE = re.compile(r"(?:^|[\s(;&|])make\s+([A-Za-z][\w-]*)")
_SCRIPT = re.compile(r"(?:^|[\s(;&|])(?:\S*/)?(?:python3?|bash|sh)\s+"
                     r"((?:benchmarks|artifacts|examples|bench|speech|policy|container)/[\w./-]+\.(?:py|sh))")
_FLAG = re.compile(r"^\[?(--[A-Za-z][\w-]*)")
_RULE = re.compile(r"^([A-Za-z][\w.-]*)\s*:(?!=)", re.M)


def code_snippets(text: str) -> list[str]:
    """Lines of fenced code blocks, then inline code spans of the prose around them."""
    lines = [line for block in _FENCE.findall(text) for line in block.splitlines()]
    prose = _FENCE.sub("", text)
    return lines + _INLINE.findall(prose)


def _until_separator(rest: str) -> str:
    """The invocation's own arguments: up to a comment, `;`, `&&` or a pipe (a table's `\\|` is not one)."""
    rest = rest.split(" #", 1)[0]
    return re.split(r";|&&|(?<!\\)\|", rest, maxsplit=1)[0]


def quoted_invocations() -> dict[tuple[str, str], dict[str, set[str]]]:
    """(module, subcommand or '') -> {flag: {where it is quoted}}, over every doc file."""
    found: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in DOCS:
        for snippet in code_snippets(path.read_text()):
            for m in _INVOCATION.finditer(snippet):
                module = m.group(1) + m.group(2)
                tokens = _until_separator(m.group(3)).split()
                sub = ""
                if m.group(2) == "" and tokens and re.fullmatch(r"[a-z][\w-]*", tokens[0]):
                    sub = tokens.pop(0)
                flags = found[(module, sub)]
                flags.setdefault("", set()).add(path.name)
                for tok in tokens:
                    if f := _FLAG.match(tok):
                        flags[f.group(1)].add(path.name)
            if m := _BARE_BENCH.match(snippet.strip()):
                tokens = _until_separator(m.group(2)).split()
                for sub in m.group(1).split("|"):  # `bench qmax|ttotal --receipt-bucket`: both
                    flags = found[("bench", sub)]
                    flags.setdefault("", set()).add(path.name)
                    for tok in tokens:
                        if f := _FLAG.match(tok):
                            flags[f.group(1)].add(path.name)
    return found


def _help_text(module: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """``python -m MODULE ARGV --help`` in process, through the module's own __main__ dispatch."""
    monkeypatch.setattr(sys, "argv", [module, *argv, "--help"])
    if "." in module:  # `bench.load.synthetic`: run fresh, as under -m, not the copy bench.cli.main imported
        monkeypatch.delitem(sys.modules, module, raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), pytest.raises(SystemExit) as exit_:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert exit_.value.code in (0, None), f"python -m {module} {' '.join(argv)} --help exited {exit_.value.code}:\n{out.getvalue()}"
    return out.getvalue()


def _bench_options() -> dict[str, set[str]]:
    """bench's argparse tree: subcommand -> its option strings."""
    from bench.cli.main import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: set(p._option_string_actions) for name, p in sub.choices.items()}


INVOCATIONS = quoted_invocations()


def test_the_docs_quote_commands_at_all():
    # the extractor itself: if it found nothing, every test below would pass vacuously
    modules = {module for module, _ in INVOCATIONS}
    assert {"bench", "speech", "policy", "container"} <= modules, modules
    assert len([k for k in INVOCATIONS if k[0] == "bench"]) >= 10


def test_bench_subcommands_and_flags_exist():
    options = _bench_options()
    wrong = []
    for (module, sub), flags in sorted(INVOCATIONS.items()):
        if module != "bench":
            continue
        where = ", ".join(sorted(flags[""]))
        if not sub:  # the module named on its own (a table of entry points): nothing to check
            continue
        if sub not in options:
            wrong.append(f"`python -m bench {sub}` ({where}): no such subcommand; known: {', '.join(sorted(options))}")
            continue
        wrong += [f"`python -m bench {sub} {flag}` ({', '.join(sorted(files))}): no such option"
                  for flag, files in sorted(flags.items()) if flag and flag not in options[sub]]
    assert not wrong, "\n".join(wrong)


def test_chain_reference_names_every_bench_subcommand():
    from bench.cli.main import COMMANDS

    documented = {sub for (module, sub), flags in INVOCATIONS.items() if module == "bench" and "chain.md" in flags[""]}
    assert not set(COMMANDS) - documented, f"docs/chain.md quotes no `python -m bench X` for {sorted(set(COMMANDS) - documented)}"


OTHERS = sorted(k for k in INVOCATIONS if k[0] != "bench")


@pytest.mark.parametrize(("module", "sub"), OTHERS, ids=[f"{m} {s}".strip() for m, s in OTHERS])
def test_other_cli_subcommands_and_flags_exist(module, sub, monkeypatch):
    flags = INVOCATIONS[(module, sub)]
    where = ", ".join(sorted(flags[""]))
    if not sub and set(flags) <= {"", "--help", "--version"}:
        return  # the module named on its own, or asked for its help or version: every entry point answers those
    if module == "policy":
        # policy/__main__.py serves the pack for anything but `check`: never start it from a test
        assert sub == "check", f"`python -m policy {sub}` ({where}): the only subcommand is `check`"
    help_text = _help_text(module, [sub] if sub else [], monkeypatch)
    assert "usage" in help_text.lower(), help_text
    missing = [f"{flag} ({', '.join(sorted(files))})" for flag, files in sorted(flags.items())
               if flag and not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text)]
    assert not missing, f"`python -m {module} {sub}` has no such option: {', '.join(missing)}\n{help_text}"


def test_quoted_make_targets_exist():
    rules = set(_RULE.findall((ROOT / "Makefile").read_text()))
    quoted = {(m.group(1), path.name) for path in DOCS for snippet in code_snippets(path.read_text())
              for m in _MAKE.finditer(snippet)}
    assert {"demo", "test"} <= {target for target, _ in quoted}
    wrong = sorted(f"`make {t}` ({where})" for t, where in quoted if t not in rules)
    assert not wrong, f"no such Makefile rule: {', '.join(wrong)}; rules: {', '.join(sorted(rules))}"


def test_quoted_scripts_exist():
    quoted = {(m.group(1), path.name) for path in DOCS for snippet in code_snippets(path.read_text())
              for m in _SCRIPT.finditer(snippet)}
    assert quoted
    wrong = sorted(f"{script} ({where})" for script, where in quoted if not (ROOT / script).is_file())
    assert not wrong, f"quoted scripts that do not exist: {', '.join(wrong)}"


def _anchors(path: Path) -> set[str]:
    from markdown.extensions.toc import slugify  # what mkdocs' toc uses; GitHub's agrees on these headings

    text = _FENCE.sub("", path.read_text())
    return {slugify(h.replace("`", ""), "-") for h in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M)}


def test_readme_links_reach_a_file_and_a_heading():
    links = re.findall(r"\]\(([^)\s]+)\)", _FENCE.sub("", (ROOT / "README.md").read_text()))
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local)
    wrong = []
    for link in local:
        target, _, anchor = link.partition("#")
        path = ROOT / target if target else ROOT / "README.md"
        if target == "docs/report.png" and not path.exists():  # the report screenshot, made on another branch
            continue
        if not path.exists():
            wrong.append(f"{link}: no such file")
        elif anchor and anchor not in _anchors(path):
            wrong.append(f"{link}: {target} has no heading with that anchor")
    assert not wrong, "\n".join(wrong)
