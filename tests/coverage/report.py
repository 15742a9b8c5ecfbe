#!/usr/bin/env python3
"""The coverage tables of `./dev coverage`, from an lcov tracefile.

    report.py TRACEFILE --root DIR --out DIR

Reads TRACEFILE (lcov's .info: the --initial baseline added to the suite's
capture, so a file no test entered still counts with all its lines), keeps the
sources under ROOT/base, ROOT/transport, ROOT/http, ROOT/actors and ROOT/host,
and prints the per-folder table: lines and branches covered / total and %,
and the total over the folders. It writes
  OUT/coverage-files.txt           the same per file, worst branch coverage
                                   first, then each file's lines never run and
                                   lines with a branch never taken;
  OUT/coverage-alloc-branches.txt  the allocation-failure branches set apart.

A branch is covered when it was taken at least once (lcov's rule).

Allocation-failure branches are left out of the branch percentage and counted
apart. The rule is textual, applied to the source line that carries the
branches (every branch of such a line is set apart; its lines still count in
the line percentage), and each line is listed with the rule that took it:
  alloc-call   an `if` whose condition calls an allocator and tests its result
               (`if (nng_msg_alloc(&m, n) != 0)`, `if (!(p = malloc(n)))`);
  alloc-result an `if` that tests a variable for NULL or failure (`!v`,
               `v == NULL`, `v != 0`, `v < 0`, `(v)`) within 8 lines after
               `v = ...ALLOCATOR(...)`, the variable not reassigned between;
  enomem       a line that names M0__ENOMEM or UV_ENOMEM (an out-of-memory
               result chosen or returned on that line).
ALLOCATOR is malloc, calloc, realloc, strdup, strndup, aligned_alloc,
nng_alloc, nng_msg_alloc, nng_msg_realloc, or one of this tree's wrappers
whose only failure is an allocation's: m0__outq_append, m0__outq_ref,
m0__outq_move_tail (http/outq.c), m0__buf_append, m0__buf_reserve
(base/buf.h), m0__msg_new, m0__msg_append, m0__msg_extend (runtime/actor.h)
and m0__batch_add (actors/pool.c).
"""
import argparse
import os
import re
import sys
from collections import defaultdict

FOLDERS = ("base", "transport", "http", "actors", "host")
ALLOCATORS = ("malloc", "calloc", "realloc", "strdup", "strndup", "aligned_alloc", "nng_alloc", "nng_msg_alloc",
              "nng_msg_realloc", "m0__outq_append", "m0__outq_ref", "m0__outq_move_tail", "m0__buf_append",
              "m0__buf_reserve", "m0__msg_new", "m0__msg_append", "m0__msg_extend", "m0__batch_add")
ALLOC_CALL = re.compile(r"\b(?:%s)\s*\(" % "|".join(ALLOCATORS))
IF = re.compile(r"^\s*(?:}\s*)?(?:else\s+)?if\s*\(")
ASSIGN = re.compile(r"([A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*)*)\s*(?<![=!<>+\-*/%&|^])=(?!=)\s*(.*)")
ENOMEM = re.compile(r"\b(?:M0__ENOMEM|UV_ENOMEM)\b")
WINDOW = 8
# How an operand tests an allocation's result v: !v, v == NULL, v != 0, v < 0, v.
TESTS = (r"!\s*%s", r"%s\s*==\s*NULL", r"%s\s*!=\s*0", r"%s\s*<\s*0", r"\(?\s*%s\s*\)?")


def parse_info(path):
    """{source: {"lines": {n: hits}, "branches": {n: [taken, ...]}}}, records of
    one source merged (hits added)."""
    files = {}
    cur = None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if line.startswith("SF:"):
                cur = files.setdefault(os.path.realpath(line[3:]), {"lines": defaultdict(int),
                                                                      "branches": defaultdict(dict)})
            elif cur is None:
                continue
            elif line.startswith("DA:"):
                n, hits = line[3:].split(",")[:2]
                cur["lines"][int(n)] += int(hits)
            elif line.startswith("BRDA:"):
                n, block, branch, taken = line[5:].split(",")
                key = (block, branch)
                t = 0 if taken == "-" else int(taken)
                cur["branches"][int(n)][key] = cur["branches"][int(n)].get(key, 0) + t
            elif line == "end_of_record":
                cur = None
    return files


def if_condition(code):
    """The condition of an `if` that starts on this line (to the line's end
    if it goes on), or None."""
    m = IF.match(code)
    if not m:
        return None
    depth, out = 1, []
    for ch in code[m.end():]:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        out.append(ch)
    return "".join(out)


def operands(cond):
    """The top-level operands of || and && in a condition."""
    out, depth, cur, i = [], 0, [], 0
    while i < len(cond):
        ch = cond[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if depth == 0 and cond[i:i + 2] in ("||", "&&"):
            out.append("".join(cur).strip())
            cur = []
            i += 2
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur).strip())
    return [o for o in out if o]


def alloc_lines(source_lines):
    """{line number: rule} of the allocation-failure lines of one source."""
    out = {}
    recent = {}  # variable -> line number of its last assignment from an allocator
    for i, text in enumerate(source_lines, 1):
        code = text.split("//")[0]
        cond = if_condition(code)
        if ENOMEM.search(code):
            out[i] = "enomem"
        elif cond is not None:
            live = [re.escape(v) for v, at in recent.items() if i - at <= WINDOW]
            kinds = []
            for op in operands(cond):
                if ALLOC_CALL.search(op):
                    kinds.append("alloc-call")
                elif any(re.fullmatch(t % v, op) for v in live for t in TESTS):
                    kinds.append("alloc-result")
                else:
                    kinds.append(None)
            if kinds and None not in kinds:
                out[i] = "alloc-call" if "alloc-call" in kinds else "alloc-result"
        for m in ASSIGN.finditer(code):
            var, rhs = m.group(1), m.group(2)
            if ALLOC_CALL.search(rhs):
                recent[var] = i
            else:
                recent.pop(var, None)
    return out


def pct(hit, total):
    return f"{100.0 * hit / total:5.1f} %" if total else "    - "


def row(name, s, width):
    return (f"{name:<{width}} {s['lh']:>6}/{s['lt']:<6} {pct(s['lh'], s['lt'])}   "
            f"{s['bh']:>6}/{s['bt']:<6} {pct(s['bh'], s['bt'])}   {s['ah']:>4}/{s['at']:<4}")


def header(width):
    return (f"{'':<{width}} {'lines':^21}   {'branches (alloc. excluded)':^21}   {'alloc.':^9}\n"
            f"{'':<{width}} {'hit/total':^13} {'%':>7}   {'hit/total':^13} {'%':>7}   {'hit/total':^9}")


def ranges(ns):
    out, start, prev = [], None, None
    for n in sorted(ns):
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("info")
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    root = os.path.realpath(a.root)
    files = parse_info(a.info)
    stats = {}
    gaps = {}
    alloc_list = []
    stale = []
    for path, d in sorted(files.items()):
        rel = os.path.relpath(path, root)
        if rel.split(os.sep)[0] not in FOLDERS or not rel.endswith(".c"):
            continue
        if not os.path.exists(path):  # an object of a source moved or removed since build-cov was made
            stale.append(rel)
            continue
        with open(path, errors="replace") as f:
            src = f.read().splitlines()
        excl = alloc_lines(src)
        s = dict(lh=0, lt=0, bh=0, bt=0, ah=0, at=0)
        s["lt"] = len(d["lines"])
        s["lh"] = sum(1 for h in d["lines"].values() if h > 0)
        partial = []
        for n, brs in sorted(d["branches"].items()):
            taken = sum(1 for t in brs.values() if t > 0)
            if n in excl:
                s["at"] += len(brs)
                s["ah"] += taken
                alloc_list.append((rel, n, excl[n], taken, len(brs), src[n - 1].strip() if n <= len(src) else ""))
            else:
                s["bt"] += len(brs)
                s["bh"] += taken
                if taken < len(brs):
                    partial.append(n)
        stats[rel] = s
        gaps[rel] = ([n for n, h in d["lines"].items() if h == 0], partial)

    def total(keys):
        t = dict(lh=0, lt=0, bh=0, bt=0, ah=0, at=0)
        for k in keys:
            for f in t:
                t[f] += stats[k][f]
        return t

    width = 12
    print(header(width))
    if stale:
        print(f"report.py: left out {len(stale)} file(s) no longer in the tree, whose objects are still in the "
              f"build directory ({', '.join(stale[:4])}{', ...' if len(stale) > 4 else ''}); rm -rf build-cov "
              "drops them", file=sys.stderr)
    for folder in FOLDERS:
        print(row(folder + "/", total([k for k in stats if k.startswith(folder + "/")]), width))
    t = total(stats)
    print(row("total", t, width))
    raw_h, raw_t = t["bh"] + t["ah"], t["bt"] + t["at"]
    print(f"{t['at']} allocation-failure branches on {len(alloc_list)} lines set apart ({t['ah']} of them taken); "
          f"branches with them counted: {raw_h}/{raw_t} {pct(raw_h, raw_t).strip()}")

    os.makedirs(a.out, exist_ok=True)
    fw = max([len(k) for k in stats] + [width])
    with open(os.path.join(a.out, "coverage-files.txt"), "w") as f:
        f.write("Coverage of actors/ transport/ http/ under the plain suite (./dev coverage), per file,\n"
                "least branch coverage first. Allocation-failure branches set apart: see\n"
                "coverage-alloc-branches.txt and the rule in tests/coverage/report.py.\n\n")
        f.write(header(fw) + "\n")
        order = sorted(stats, key=lambda k: (stats[k]["bh"] / stats[k]["bt"] if stats[k]["bt"] else 1.0, k))
        for k in order:
            f.write(row(k, stats[k], fw) + "\n")
        f.write(row("total", t, fw) + "\n\nWhere the gaps are (line numbers):\n")
        for k in order:
            never, partial = gaps[k]
            if never or partial:
                f.write(f"\n{k}\n  never run:        {ranges(never) or '-'}\n"
                        f"  a branch not taken: {ranges(partial) or '-'}\n")
    with open(os.path.join(a.out, "coverage-alloc-branches.txt"), "w") as f:
        by_rule = defaultdict(int)
        for e in alloc_list:
            by_rule[e[2]] += e[4]
        f.write(f"{t['at']} allocation-failure branches on {len(alloc_list)} lines, set apart from the branch "
                f"percentage ({', '.join(f'{r}: {n}' for r, n in sorted(by_rule.items()))}).\n"
                "The rule: tests/coverage/report.py. file:line rule taken/branches source\n\n")
        for rel, n, rule, taken, nb, text in alloc_list:
            f.write(f"{rel}:{n} {rule} {taken}/{nb} {text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
