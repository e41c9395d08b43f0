#!/usr/bin/env python3
"""Judge this tree's benchmarks against another revision's, by ratio, in one run.

    python3 host/benches/compare.py REV [--pairs N] [--profile WORKLOAD]
    python3 host/benches/compare.py summarize DIR

REV is checked out beside this tree (a detached worktree under target/bench-compare/) and its
bench built there with a target directory of its own, so that each bench finds its own
`toolhost` binary. Both benches load this tree's bench guest, so the component is the same.
The two are then run in pairs, alternating which goes first (the second run of a pair is not
the same as the first), and each figure is reported as the median of its per-pair ratios
(this tree / REV), with how many pairs were above 1 and the range.

Without --profile each run is a full `--bench` run and every figure of report.json is
compared. With --profile WORKLOAD (see host/benches/bench/profile.rs) each run is that one
workload, and its own seconds and the process's CPU seconds (user + system) are compared.

`summarize DIR` prints the table for runs saved in DIR (`this-N.json`, `other-N.json`).
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "bench-compare"
GUEST = Path("guest-tools/target/wasm32-wasip2/release/bench_tools.wasm")


def sh(args, cwd, env=None):
    """Run a command, its output passed through; stop on failure."""
    print("+", " ".join(str(a) for a in args), file=sys.stderr, flush=True)
    subprocess.run(args, cwd=cwd, env=env, check=True)


def bench_binary(tree, target):
    """Build the bench of `tree` into `target` and return the executable's path."""
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    args = ["cargo", "bench", "-p", "toolhost", "--bench", "bench", "--no-run",
            "--message-format=json-render-diagnostics"]
    print("+", " ".join(args), f"(in {tree})", file=sys.stderr, flush=True)
    out = subprocess.run(args, cwd=tree, env=env, check=True, stdout=subprocess.PIPE, text=True)
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
                and msg["target"]["name"] == "bench":
            return Path(msg["executable"])
    sys.exit(f"no bench executable was built in {tree}")


def other_tree(rev):
    """A worktree of `rev` under target/bench-compare, with this tree's bench guest."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT,
                         check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    base = WORK / sha[:12]
    tree = base / "tree"
    if not (tree / ".git").exists():
        base.mkdir(parents=True, exist_ok=True)
        sh(["git", "worktree", "add", "--detach", "--force", str(tree), sha], cwd=ROOT)
    guest = tree / GUEST
    guest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / GUEST, guest)
    return sha, tree, base / "target"


def run_once(tree, binary, profile):
    """One run of a bench binary from its tree's `host/`: the figures it reports."""
    env = dict(os.environ)
    if profile:
        env["TOOLHOST_BENCH_PROFILE"] = profile
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([str(binary), "--bench"], cwd=tree / "host", env=env, check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        m = re.search(r"^\S+: ([0-9.]+) s;", out, re.MULTILINE)
        if not m:
            sys.exit(f"the {profile} workload printed no seconds:\n{out}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"figures": [{"name": f"{profile} (s)", "median": float(m.group(1))},
                            {"name": f"{profile} CPU (s)", "median": cpu}]}
    subprocess.run([str(binary), "--bench"], cwd=tree / "host", env=env, check=True)
    return json.loads((tree / "target" / "bench" / "report.json").read_text())


def medians(report):
    """Figure name → median, for the figures that have a numeric one."""
    return {f["name"]: f["median"] for f in report.get("figures", [])
            if isinstance(f.get("median"), (int, float))}


def summarize(runs):
    """The table: per figure, the median of this/other over pairs, pairs above 1, range."""
    pairs = {}
    for path in sorted(Path(runs).glob("*.json")):
        m = re.fullmatch(r"(this|other)-(\d+)\.json", path.name)
        if m:
            pairs.setdefault(int(m.group(2)), {})[m.group(1)] = medians(json.loads(path.read_text()))
    whole = [p for _, p in sorted(pairs.items()) if len(p) == 2]
    if not whole:
        return "no complete pair\n"
    names = sorted(set.intersection(*(set(p["this"]) & set(p["other"]) for p in whole)))
    lines = [f"{len(whole)} pairs; ratio = this tree / the other revision",
             "", "| figure | ratio | above 1 | range | other (median) |",
             "|---|---:|---:|---|---:|"]
    for name in names:
        ratios = [p["this"][name] / p["other"][name] for p in whole if p["other"][name]]
        if not ratios:
            continue
        other = statistics.median(p["other"][name] for p in whole)
        lines.append(f"| {name} | {statistics.median(ratios):.3f} | "
                     f"{sum(r > 1 for r in ratios)}/{len(ratios)} | "
                     f"{min(ratios):.2f}–{max(ratios):.2f} | {other:.4g} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "summarize":
        sys.stdout.write(summarize(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rev", help="the revision to compare against (a commit, tag or branch)")
    ap.add_argument("--pairs", type=int, default=3, help="pairs of runs (default 3)")
    ap.add_argument("--profile", help="one TOOLHOST_BENCH_PROFILE workload instead of full runs")
    args = ap.parse_args()
    if args.pairs < 1:
        sys.exit("--pairs must be at least 1")
    if not (ROOT / GUEST).is_file():
        sys.exit(f"{GUEST} is missing: run `just build-bench-guest` first")
    sha, tree, target = other_tree(args.rev)
    this_bin = bench_binary(ROOT, Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")))
    other_bin = bench_binary(tree, target)
    runs = WORK / "runs" / f"{sha[:12]}-{args.profile or 'full'}"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    sides = {"this": (ROOT, this_bin), "other": (tree, other_bin)}
    for i in range(1, args.pairs + 1):
        order = ["other", "this"] if i % 2 else ["this", "other"]
        for side in order:
            print(f"pair {i}/{args.pairs}: {side}", file=sys.stderr, flush=True)
            report = run_once(*sides[side], args.profile)
            (runs / f"{side}-{i}.json").write_text(json.dumps(report))
    table = summarize(runs)
    (runs / "summary.md").write_text(table)
    print(f"\nthis tree against {args.rev} ({sha[:12]}); runs in {runs}\n")
    sys.stdout.write(table)


if __name__ == "__main__":
    main()
