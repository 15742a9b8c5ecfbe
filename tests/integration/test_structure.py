"""The structural rules of ARCHITECTURE.md, checked on the source tree (no
binary runs; --bin and --out are accepted for the suite's runner):

- layers: a file includes only from its own folder or a folder BELOW names
  (http/ knows no actor and the actor runtime no HTTP; the bus and the
  application actors sit on both; the host's kinds above them; config/ and
  host/ on top);
- no circle: no two files (a .c and its .h are one file here) include each
  other, directly or through others;
- no product file over 600 lines;
- no function of cyclomatic complexity 25 or more, or longer than 100 lines
  (pmccabe, a Debian package `./dev setup` installs), outside EXEMPT;
- the URL schemes nng dials (inproc, ipc, tcp, tls+tcp) are spelled in
  transport/ alone, so a new transport is one folder's change;
- errors (ARCHITECTURE.md, "Configuration and errors"): a `return -1;` is
  found only in a public m0_ function (include/m0/m0.h's convention); an
  internal one (m0__ or static) returns a code of base/errors.h instead. Each
  `return -1;` is put in its function by pmccabe's line ranges.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Failures  # noqa: E402

F = Failures()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Lowest first. A folder not in the tree is skipped.
LAYERS = ["base", "transport", "http", "runtime", "bus", "service", "actors", "config", "host"]
# What each folder may include besides itself.
BELOW = {"base": set(), "transport": {"base"}, "http": {"base", "transport"}, "runtime": {"base", "transport"}}
BELOW["bus"] = BELOW["http"] | BELOW["runtime"] | {"http", "runtime"}
BELOW["service"] = BELOW["bus"] | {"bus"}
BELOW["actors"] = BELOW["service"] | {"service"}
BELOW["config"] = BELOW["actors"] | {"actors"}
BELOW["host"] = BELOW["config"] | {"config"}
MAX_LINES = 600
MAX_CYCLOMATIC = 25
MAX_FUNCTION_LINES = 100
# Functions whose branches are a table by nature: file:function -> why.
EXEMPT = {}
PUBLIC = re.compile(r"m0_[a-z0-9]")
SCHEME = re.compile(r'"[^"\n]*\b(inproc|ipc|tcp|tls\+tcp)://')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([a-z0-9_]+)\.h"', re.M)


def sources():
    for folder in LAYERS:
        d = os.path.join(ROOT, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                yield folder, os.path.join(folder, name)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)


def strip_comments(text):
    """The text with its comments blanked (lines kept), strings untouched:
    a // inside a string ("tcp://") is not a comment."""
    def blank(m):
        t = m.group(0)
        return t if t[0] in "\"'" else "\n" * t.count("\n")
    return TOKENS.sub(blank, text)


def node(rel):
    return os.path.splitext(rel)[0]


def check_layers_and_lines(files):
    graph = {}
    for folder, rel in files:
        text = read(rel)
        n = text.count("\n")
        F.check(n <= MAX_LINES, f"{rel}: {n} lines, over {MAX_LINES}: split it by what it holds")
        edges = graph.setdefault(node(rel), set())
        for inc_folder, inc_name in INCLUDE.findall(text):
            target = f"{inc_folder}/{inc_name}"
            if inc_folder not in BELOW:
                continue
            F.check(inc_folder == folder or inc_folder in BELOW[folder],
                    f"{rel} includes {target}.h: {folder}/ may include only from {', '.join(sorted(BELOW[folder]))}")
            if target != node(rel):
                edges.add(target)
    return graph


def circles(graph):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def check_functions(files):
    if not shutil.which("pmccabe"):
        F.check(False, "pmccabe is not installed (Debian package pmccabe; ./dev setup installs it)")
        return
    paths = [os.path.join(ROOT, rel) for _, rel in files if rel.endswith(".c")]
    out = subprocess.run(["pmccabe", *paths], capture_output=True, text=True, timeout=120).stdout
    seen = 0
    spans = {}  # rel -> [(first line, last line, name)]
    for line in out.splitlines():
        cols = line.split("\t")
        if len(cols) < 6:
            continue
        seen += 1
        cyclomatic, length = int(cols[0]), int(cols[4])
        where = cols[5]  # path(line): name
        rel = os.path.relpath(where.split("(")[0], ROOT)
        name = where.split(": ", 1)[-1]
        spans.setdefault(rel, []).append((int(cols[3]), int(cols[3]) + length - 1, name))
        if f"{rel}:{name}" in EXEMPT:
            continue
        F.check(cyclomatic < MAX_CYCLOMATIC and length <= MAX_FUNCTION_LINES,
                f"{os.path.relpath(where, ROOT)}: cyclomatic {cyclomatic}, {length} lines "
                f"(at most {MAX_CYCLOMATIC - 1} and {MAX_FUNCTION_LINES}): make its branches a table or split it")
    F.check(seen > 100, f"pmccabe measured {seen} functions: the product has hundreds")
    return spans


def check_minus_one(files, spans):
    """A bare -1 is the public API's failure alone: each `return -1;`
    outside a comment must sit in a function named m0_x (not m0__x) that is
    not static, the innermost of pmccabe's spans that holds its line."""
    found = 0
    for _, rel in files:
        if not rel.endswith(".c"):
            continue
        lines = strip_comments(read(rel)).splitlines()
        for i, line in enumerate(lines, 1):
            if "return -1;" not in line:
                continue
            found += 1
            around = [sp for sp in spans.get(rel, []) if sp[0] <= i <= sp[1]]
            first, _, name = max(around) if around else (0, 0, None)
            public = name and PUBLIC.match(name) and not name.startswith("m0__") and \
                not re.match(r"\s*static\b", lines[first - 1])
            F.check(public, f"{rel}:{i}: `return -1;` in {name or 'no function'}: an internal function returns "
                            f"0 or a code of base/errors.h (M0__EINVALID, M0__ENOMEM...); -1 is the public "
                            f"m0_ functions' alone (ARCHITECTURE.md, Configuration and errors)")
    F.check(found > 10, f"found {found} `return -1;` in the public functions: the search reads no file")


def check_schemes(files):
    for folder, rel in files:
        if folder == "transport":
            continue
        for i, line in enumerate(strip_comments(read(rel)).splitlines(), 1):
            m = SCHEME.search(line)
            F.check(not m, f"{rel}:{i}: the scheme {m.group(1) if m else ''}:// is spelled outside transport/: "
                           f"ask transport/ (transport/topology.h) instead")


files = list(sources())
F.check(len(files) > 50, f"found {len(files)} product files under {ROOT}")
graph = check_layers_and_lines(files)
for comp in circles(graph):
    F.check(False, f"include circle: {' <-> '.join(comp)}: move what they share into a file both include")
spans = check_functions(files)
if spans is not None:
    check_minus_one(files, spans)
check_schemes(files)
F.done()
