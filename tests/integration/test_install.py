"""cmake --install puts the header, the library, m0Config.cmake and m0.pc
under a prefix; an application outside the tree then builds against that
copy twice — with find_package(m0) and with pkg-config m0 — and serves. And
an external actor: apps/echo_actor built out of the tree with pkg-config
alone (the install exports what it needs: m0_actor_run and the wire), which
serves host_check's /actor/echo when a topology file places echo external.
What is installed is what the README says (Embedding and installing): the
header, libm0.a, libm0-llhttp.a when llhttp was compiled from sources, the
CMake package and m0.pc, the demo and tool binaries. And m0's build flags do
not leak into its consumers: LLHTTP_STRICT_MODE (how the bundled llhttp is
compiled) is in neither the exported targets, nor `pkg-config --cflags m0`,
nor the find_package consumer's compile commands."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import harness
from harness import BIN, Failures, Server

f = Failures()
build_dir = os.path.dirname(BIN)
example = os.path.join(os.path.dirname(__file__), "..", "install", "example")
tmp = tempfile.mkdtemp()
prefix = os.path.join(tmp, "prefix")


def sh(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)
    return p.returncode, p.stdout + p.stderr


rc, out = sh(["cmake", "--install", build_dir, "--prefix", prefix])
f.check(rc == 0, f"cmake --install ({out[-400:]})")
for path in ("include/m0/m0.h", "lib/libm0.a", "lib/cmake/m0/m0Config.cmake", "lib/cmake/m0/m0ConfigVersion.cmake",
             "lib/cmake/m0/m0Targets.cmake", "lib/pkgconfig/m0.pc", "bin/m0pub", "bin/m0trace", "bin/host_check",
             "bin/ramp", "bin/notes", "bin/todo", "bin/parallel", "bin/dashboard", "bin/m0", "bin/echo_actor"):
    f.check(os.path.exists(os.path.join(prefix, path)), f"installed {path}")
bundled = os.path.exists(os.path.join(build_dir, "libm0-llhttp.a")) or any(
    n == "libm0-llhttp.a" for _, _, names in os.walk(build_dir) for n in names)
f.check(os.path.exists(os.path.join(prefix, "lib", "libm0-llhttp.a")) == bundled,
        f"libm0-llhttp.a installed exactly when llhttp was compiled here ({bundled})")

# No build flag of m0's reaches a consumer (LLHTTP_STRICT_MODE was PUBLIC on
# the bundled llhttp, so m0Targets.cmake gave it to every find_package user).
for dirpath, _, names in os.walk(os.path.join(prefix, "lib", "cmake", "m0")):
    for n in names:
        text = open(os.path.join(dirpath, n)).read()
        f.check("LLHTTP_STRICT_MODE" not in text, f"{n} names no LLHTTP_STRICT_MODE")

# find_package(m0)
bdir = os.path.join(tmp, "build-cmake")
rc, out = sh(["cmake", "-S", example, "-B", bdir, f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
rc2, out2 = sh(["cmake", "--build", bdir]) if rc == 0 else (rc, "")
f.check(rc == 0 and rc2 == 0, f"find_package(m0) build ({(out + out2)[-600:]})")
cc = os.path.join(bdir, "compile_commands.json")
commands = open(cc).read() if os.path.exists(cc) else ""
f.check(commands and "LLHTTP_STRICT_MODE" not in commands,
        f"the find_package consumer is compiled without LLHTTP_STRICT_MODE ({commands[:400]})")

# pkg-config m0
env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
rc, flags = sh(["pkg-config", "--cflags", "--libs", "m0"], env=env)
f.check(rc == 0 and "-lm0" in flags, f"pkg-config m0 ({flags.strip()})")
f.check("LLHTTP_STRICT_MODE" not in flags, f"pkg-config m0's flags name no LLHTTP_STRICT_MODE ({flags.strip()})")
pc_bin = os.path.join(tmp, "outside-pc")
rc, out = sh(["sh", "-c", f"cc -o {pc_bin} {os.path.join(example, 'main.c')} $(pkg-config --cflags --libs m0)"],
             env=env)
f.check(rc == 0, f"pkg-config build ({out[-600:]})")

for label, exe in (("find_package", os.path.join(bdir, "outside")), ("pkg-config", pc_bin)):
    if not os.path.exists(exe):
        f.check(False, f"{label}: no binary")
        continue
    shutil.copy(exe, os.path.join(tmp, "outside"))
    # The harness starts binaries from BIN: point it at the copy's folder.
    saved, harness.BIN = harness.BIN, tmp
    try:
        with Server("outside", "--port", "0") as srv:
            body = urllib.request.urlopen(srv.url("/hello"), timeout=5).read()
            f.check(body == b"hello from outside\n", f"{label}: the outside app serves")
            f.check(srv.stop() == 0, f"{label}: drains to exit 0")
    finally:
        harness.BIN = saved

# An external actor, out of the tree: echo_actor's sources and pkg-config only.
echo_src = os.path.join(os.path.dirname(__file__), "..", "..", "apps", "echo_actor")
echo_bin = os.path.join(tmp, "echo_actor")
rc, out = sh(["sh", "-c", f"cc -I{echo_src} -o {echo_bin} {os.path.join(echo_src, 'main.c')} "
              f"$(pkg-config --cflags --libs m0)"], env=env)
f.check(rc == 0, f"echo_actor builds out of the tree with pkg-config m0 ({out[-600:]})")
if rc == 0:
    sock = os.path.join(tmp, "echo.sock")
    topo = os.path.join(tmp, "external.json")
    with open(topo, "w") as fh:
        json.dump({"app_actors": [{"name": "echo", "placement": "external", "url": f"ipc://{sock}"}]}, fh)
    with Server("host_check", "--port", "0", "--topology", topo) as srv:
        actor = subprocess.Popen([echo_bin, f"ipc://{sock}", "7"], stderr=subprocess.DEVNULL)
        try:
            got, deadline = None, time.monotonic() + 10
            while time.monotonic() < deadline:  # until the actor has dialed in (503 before)
                try:
                    got = json.loads(urllib.request.urlopen(srv.url("/actor/echo"), timeout=5).read())
                    break
                except urllib.error.HTTPError as e:
                    if e.code != 503:
                        raise
                    time.sleep(0.05)
            f.check(got is not None and got.get("pid") == actor.pid and got.get("instance") == 7,
                    f"the out-of-tree echo_actor answers /actor/echo ({got})")
        finally:
            actor.terminate()
            f.check(actor.wait(timeout=10) == 0, "the out-of-tree echo_actor exits 0 on SIGTERM")
        f.check(srv.stop() == 0, "host_check with an external echo drains to exit 0")

f.done()
