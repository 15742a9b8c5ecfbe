"""The docs can be trusted where a program can check them (issue 38).

Proves: docs/reference.md's flag and exit-code tables are exactly what
bin/m0_optdoc prints from config/options.h's M0__OPTIONS and M0__EXIT_CODES,
the lists `--help` prints, so a flag added there and not to the page fails
here; every flag and variable `host_check --help` prints is on that page;
every repository path a doc names (`runtime/trace.c`, `tests/...py`) exists;
every link between the docs reaches a file and, with `#anchor`, a heading of
it; README.md stays within 150 lines and ARCHITECTURE.md within 300.

    python3 tests/integration/test_docs.py --bin build/bin --write
rewrites the generated tables in docs/reference.md (after an option or an
exit code changed in config/options.h).
"""
import glob
import os
import re
import subprocess
import sys

from harness import BIN, Failures

F = Failures()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REFERENCE = os.path.join(ROOT, "docs", "reference.md")
DOCS = ["README.md", "ARCHITECTURE.md", "bench/README.md", "bench/RESULTS.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
# Top folders a repository path starts with (and those the planned move makes).
TOPS = ("base|transport|http|actors|host|apps|python|tests|bench|include|docs|deploy|cmake"
        "|runtime|bus|service|config")
PATH_RE = re.compile(r"(?<![\w/.<-])((?:%s)/[\w./-]*\w\.(?:c|h|py|md|cmake|service|socket|html|lua|sh|json))\b"
                     % TOPS)
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
BLOCK_RE = r"(<!-- m0_optdoc %s\b[^\n]*-->\n)(.*?)(<!-- end m0_optdoc %s -->)"


def optdoc(what):
    r = subprocess.run([os.path.join(BIN, "m0_optdoc"), what], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout


def generated_blocks(write):
    text = open(REFERENCE).read()
    for what in ("flags", "exits"):
        rc, out = optdoc(what)
        F.check(rc == 0 and out.count("\n") > 3, f"m0_optdoc {what} prints a table (exit {rc})")
        pat = re.compile(BLOCK_RE % (what, what), re.S)
        m = pat.search(text)
        F.check(m is not None, f"docs/reference.md has the generated '{what}' block")
        if m is None:
            continue
        if write:
            text = text[:m.start(2)] + out + text[m.end(2):]
            continue
        same = m.group(2) == out
        if not same:
            have, want = m.group(2).splitlines(), out.splitlines()
            diff = [l for l in want if l not in have][:3] + ["(page only) " + l for l in have if l not in want][:3]
            print("\n".join(diff))
        F.check(same, f"docs/reference.md's '{what}' table is m0_optdoc's output "
                      "(run test_docs.py --write after changing config/options.h)")
    if write:
        open(REFERENCE, "w").write(text)
        print("rewrote", REFERENCE)


def help_is_documented():
    r = subprocess.run([os.path.join(BIN, "host_check"), "--help"], capture_output=True, text=True, timeout=30)
    F.check(r.returncode == 0, f"host_check --help exits 0 ({r.returncode})")
    page = open(REFERENCE).read()
    flags = set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", r.stdout, re.M))
    variables = set(re.findall(r"\b(M0_[A-Z0-9_]+)\b", r.stdout))
    F.check(len(flags) > 20 and "--trusted-proxies" in flags and "--stream-history-bytes" in flags,
            f"--help lists the flags ({len(flags)})")
    missing = sorted(f for f in flags if f"`{f}" not in page) + sorted(v for v in variables if f"`{v}`" not in page)
    F.check(not missing, f"every flag and variable of --help is in docs/reference.md (missing: {missing})")
    codes = set(re.findall(r"^  (\d+) ", r.stdout.split("exit codes:")[-1], re.M))
    F.check({"0", "1", "2", "73", "78"} <= codes, f"--help lists the exit codes ({sorted(codes)})")


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return s.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    in_code = False
    for line in open(path):
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        s = slug(line.lstrip("#"))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def paths_and_links():
    for doc in DOCS:
        full = os.path.join(ROOT, doc)
        if not os.path.exists(full):
            F.check(False, f"{doc} exists")
            continue
        text = open(full).read()
        # bench/out/ holds a machine's own runs (not in git).
        missing = sorted({p for p in PATH_RE.findall(text) if not p.startswith("bench/out/")
                          and not os.path.exists(os.path.join(ROOT, p))
                          and not os.path.exists(os.path.join(os.path.dirname(full), p))})
        F.check(not missing, f"{doc}: every repository path it names exists (missing: {missing})")
        broken = []
        for target in LINK_RE.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            where, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(full), where)) if where else full
            if not os.path.exists(dest):
                broken.append(target)
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append(target)
        F.check(not broken, f"{doc}: every link reaches its file and heading (broken: {broken})")


def sizes():
    for doc, most in (("README.md", 150), ("ARCHITECTURE.md", 300)):
        n = sum(1 for _ in open(os.path.join(ROOT, doc)))
        F.check(n <= most, f"{doc} is {n} lines (at most {most})")


if __name__ == "__main__":
    if "--write" in sys.argv:
        generated_blocks(True)
        sys.exit(0)
    generated_blocks(False)
    help_is_documented()
    paths_and_links()
    sizes()
    F.done()
