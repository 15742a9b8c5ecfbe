"""Two network namespaces joined by a veth pair, for the tests that put a
host and its peers on different "machines" (test_netns, test_netns_actors).

    net = Netns("m0a", "10.77.0")   # namespaces m0a<pid>a / m0a<pid>b, 10.77.0.1 and .2
    net.prerequisites()             # SKIP (exit 0) without `ip`
    try:
        net.setup()                 # SKIP when namespaces cannot be made here
        ...
    finally:
        net.teardown(F)             # deletes whatever was made; checks it is gone

Names carry this process's pid, so concurrent runs never collide.
"""
import os
import shutil
import subprocess
import sys

from harness import socket_inodes


def sh(*cmd, timeout=10, env=None):
    p = subprocess.run(list(cmd), capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(0)


def hexaddr(a):
    """An address of /proc/net/tcp ("0100007F:1F90") as ("127.0.0.1", 8080)."""
    ip, port = a.split(":")
    b = bytes.fromhex(ip)[::-1]
    return ".".join(str(x) for x in b), int(port, 16)


class Netns:
    def __init__(self, prefix, subnet):
        tag = f"{os.getpid() % 100000}"
        self.a, self.b = f"{prefix}{tag}a", f"{prefix}{tag}b"
        self.veth_a, self.veth_b = f"{prefix}v{tag}a", f"{prefix}v{tag}b"
        self.addr_a, self.addr_b = f"{subnet}.1", f"{subnet}.2"

    def prerequisites(self):
        if shutil.which("ip"):
            return
        if os.geteuid() == 0 and shutil.which("apt-get"):
            print("ip is missing: installing iproute2 with apt-get", flush=True)
            try:
                sh("apt-get", "update", timeout=300)
                sh("apt-get", "install", "-y", "--no-install-recommends", "iproute2", timeout=300)
            except subprocess.TimeoutExpired:
                pass
        if not shutil.which("ip"):
            skip("the `ip` command (iproute2) is missing" +
                 (" and could not be installed" if os.geteuid() == 0 else " (and installing it needs root)"))

    def setup(self):
        """Makes the namespaces and the veth pair (both ends and both `lo`
        up); SKIPs when that is impossible here (teardown deletes whatever
        was made)."""
        rc, _, err = sh("ip", "netns", "add", self.a)
        if rc != 0:
            skip(f"`ip netns add` failed here: {err.strip()}")
        a, b, va, vb = self.a, self.b, self.veth_a, self.veth_b
        steps = [
            ("ip", "netns", "add", b),
            ("ip", "link", "add", va, "type", "veth", "peer", "name", vb),
            ("ip", "link", "set", va, "netns", a),
            ("ip", "link", "set", vb, "netns", b),
            ("ip", "-n", a, "addr", "add", f"{self.addr_a}/24", "dev", va),
            ("ip", "-n", b, "addr", "add", f"{self.addr_b}/24", "dev", vb),
            ("ip", "-n", a, "link", "set", va, "up"),
            ("ip", "-n", b, "link", "set", vb, "up"),
            ("ip", "-n", a, "link", "set", "lo", "up"),
            ("ip", "-n", b, "link", "set", "lo", "up"),
        ]
        for cmd in steps:
            rc, _, err = sh(*cmd)
            if rc != 0:
                skip(f"cannot build the two-namespace network (`{' '.join(cmd)}`: {err.strip()})")

    def teardown(self, F):
        for ns in (self.a, self.b):
            sh("ip", "netns", "del", ns)
        sh("ip", "link", "del", self.veth_a)  # only if it never left the root namespace
        left = sh("ip", "netns", "list")[1]
        F.check(self.a not in left and self.b not in left, f"teardown: both namespaces deleted ({left!r})")

    def tcp(self, ns, pid):
        """pid's TCP sockets as namespace ns sees them: [(local, remote, state)]."""
        rc, out, _ = sh("ip", "netns", "exec", ns, "cat", "/proc/net/tcp")
        mine = socket_inodes(pid)
        res = []
        for line in out.splitlines()[1:]:
            p = line.split()
            if len(p) > 9 and p[9] in mine:
                res.append((hexaddr(p[1]), hexaddr(p[2]), p[3]))
        return res
