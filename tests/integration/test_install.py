"""cmake --install puts the header, the library, m0Config.cmake and m0.pc
under a prefix; an application outside the tree then builds against that
copy twice — with find_package(m0) and with pkg-config m0 — and serves."""
import os
import shutil
import subprocess
import tempfile
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
for path in ("include/m0/m0.h", "lib/libm0.a", "lib/cmake/m0/m0Config.cmake", "lib/pkgconfig/m0.pc", "bin/m0pub"):
    f.check(os.path.exists(os.path.join(prefix, path)), f"installed {path}")

# find_package(m0)
bdir = os.path.join(tmp, "build-cmake")
rc, out = sh(["cmake", "-S", example, "-B", bdir, f"-DCMAKE_PREFIX_PATH={prefix}"])
rc2, out2 = sh(["cmake", "--build", bdir]) if rc == 0 else (rc, "")
f.check(rc == 0 and rc2 == 0, f"find_package(m0) build ({(out + out2)[-600:]})")

# pkg-config m0
env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
rc, flags = sh(["pkg-config", "--cflags", "--libs", "m0"], env=env)
f.check(rc == 0 and "-lm0" in flags, f"pkg-config m0 ({flags.strip()})")
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

f.done()
