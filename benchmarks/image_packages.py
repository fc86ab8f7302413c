"""Installed size of each image's Python packages, from the wheels' RECORD files.

    python benchmarks/image_packages.py                      # both images, from the environments below
    python benchmarks/image_packages.py --cpu-python /tmp/cpuimg/bin/python --gpu-python .venv/bin/python

Image pull is the largest phase of the reference scale-out (181 s of T_total's 320 s, README), and
its size is what the pull moves: this prints, per image, the dependency closure of its requirements
file (container/requirements-cpu.txt, container/requirements-gpu.txt + torch), each distribution's
installed bytes summed from its ``*.dist-info/RECORD`` (the wheel's own file list with sizes) in an
environment where that file was installed, and the ratio between the two images in the same run.

The CPU environment should be a fresh venv made from container/requirements-cpu.txt alone (what
the CPU image installs). The GPU environment here is the project's .venv, whose torch is the CPU
build: the CUDA build in the GPU base image (pytorch/pytorch:...-cuda12.6-cudnn9-runtime) adds the
nvidia-* CUDA libraries on top, which no machine without that image can size; the table says so.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import json, re, sys
from importlib import metadata
from packaging.requirements import Requirement

def norm(n): return re.sub(r"[-_.]+", "-", n).lower()
def start(n):  # "uvicorn[standard]" keeps its extras: they are followed as pip follows them
    r = Requirement(n)
    return (norm(r.name), tuple(sorted(r.extras)))
dists = {norm(d.metadata["Name"]): d for d in metadata.distributions()}
todo, seen, extras_done = [start(n) for n in sys.argv[1:]], {}, set()
while todo:
    n, extras = todo.pop()
    if (n, extras) in extras_done:
        continue
    extras_done.add((n, extras))
    if n not in dists:
        seen.setdefault(n, None); continue
    d = dists[n]
    seen[n] = (d.version, sum((f.size or 0) for f in (d.files or [])))
    for line in d.requires or []:
        req = Requirement(line)
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        if req.marker is not None and not any(req.marker.evaluate(e) for e in envs):
            continue
        todo.append((norm(req.name), tuple(sorted(req.extras))))
print(json.dumps(seen))
'''


def requirement_names(path: Path) -> list[str]:
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(re.split(r"[\s<>=!~;]", line)[0])
    return names


def closure(python: str, names: list[str]) -> dict[str, tuple[str, int] | None]:
    out = subprocess.run([python, "-c", PROBE, *names], capture_output=True, text=True, check=True)
    return {k: (tuple(v) if v else None) for k, v in json.loads(out.stdout).items()}


def mb(n: int) -> str:
    return f"{n / 1e6:,.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu-python", default="/tmp/cpuimg/bin/python",
                   help="interpreter of a venv made from container/requirements-cpu.txt (default /tmp/cpuimg)")
    p.add_argument("--gpu-python", default=str(ROOT / ".venv/bin/python"),
                   help="interpreter with container/requirements-gpu.txt and torch installed (default .venv)")
    p.add_argument("--top", type=int, default=6, help="largest distributions to list per image")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    images = {
        "cpu (Dockerfile.cpu)": (args.cpu_python, requirement_names(ROOT / "container/requirements-cpu.txt")),
        "gpu (Dockerfile)": (args.gpu_python, ["torch", *requirement_names(ROOT / "container/requirements-gpu.txt")]),
    }
    result = {}
    for image, (python, names) in images.items():
        if not Path(python).exists():
            print(f"image_packages: {python} does not exist; make it with python -m venv and pip install -r "
                  "container/requirements-cpu.txt", file=sys.stderr)
            return 2
        c = closure(python, names)
        found = {k: v for k, v in c.items() if v is not None}
        result[image] = {"python": python, "distributions": len(found), "missing": sorted(k for k, v in c.items() if v is None),
                         "bytes": sum(v[1] for v in found.values()),
                         "largest": sorted(((k, v[0], v[1]) for k, v in found.items()), key=lambda t: -t[2])[:args.top]}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    base = result["cpu (Dockerfile.cpu)"]["bytes"]
    print("| image | distributions | installed MB | vs cpu | largest (MB) |")
    print("|---|---:|---:|---:|---|")
    for image, r in result.items():
        largest = ", ".join(f"{n} {v} {mb(s)}" for n, v, s in r["largest"])
        print(f"| {image} | {r['distributions']} | {mb(r['bytes'])} | {r['bytes'] / base:.1f}x | {largest} |")
    for image, r in result.items():
        if r["missing"]:
            print(f"{image}: not installed in {r['python']} (not counted): {', '.join(r['missing'])}")
    print("gpu: torch is the CPU build of this environment; the CUDA base image adds the nvidia-* CUDA libraries.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
