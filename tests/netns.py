"""Boxes in network namespaces, each with its own OpenSSH sshd, for link-cut fault tests.

`ip netns add`, a veth pair (the host end stays here, the other end moves into the namespace),
10.231.N.1 here and 10.231.N.2 there; `cut()` takes the host end down (a dead link: packets
vanish, nothing is refused), `restore()` brings it back. Needs root and iproute2; the test
command installs them and CI runs as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.sshd import Sshd, require


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class NetBox:
    """One namespace with a veth link and an sshd listening inside it."""

    def __init__(self, root: Path, index: int, env: dict[str, str] | None = None) -> None:
        self.index = index
        tag = f"{os.getpid() % 10000}{index}"
        self.ns = f"ck{tag}"
        self.host_if = f"ckh{tag}"
        self.ns_if = f"ckn{tag}"
        self.host_addr = f"10.231.{index}.1"
        self.addr = f"10.231.{index}.2"
        self.sshd = Sshd(root / f"sshd-{index}", listen=self.addr, netns=self.ns, env=env or {})

    def start(self) -> None:
        """Create the namespace and its link, then start sshd inside."""
        require(shutil.which("ip") or "/usr/sbin/ip", "iproute2 (ip netns)")
        if os.geteuid() != 0:
            require("/nonexistent/root", "root (ip netns)")
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _ip("link", "set", self.ns_if, "netns", self.ns)
        _ip("addr", "add", f"{self.host_addr}/24", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        _ip("-n", self.ns, "addr", "add", f"{self.addr}/24", "dev", self.ns_if)
        _ip("-n", self.ns, "link", "set", self.ns_if, "up")
        _ip("-n", self.ns, "link", "set", "lo", "up")
        self.sshd.start()

    def cut(self) -> None:
        """The link goes dead (no RST, no ICMP: like a cable pulled)."""
        _ip("link", "set", self.host_if, "down")

    def restore(self) -> None:
        """The link comes back."""
        _ip("link", "set", self.host_if, "up")

    def stop(self) -> None:
        """sshd, whatever still runs in the namespace, the namespace (and its link)."""
        self.sshd.stop()
        pids = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True,
                              check=False).stdout.split()
        for pid in pids:
            subprocess.run(["kill", "-9", pid], check=False)
        subprocess.run(["ip", "netns", "del", self.ns], check=False, capture_output=True)
        subprocess.run(["ip", "link", "del", self.host_if], check=False, capture_output=True)

    def config_block(self, alias: str) -> str:
        """An ssh_config Host block for this box."""
        return (f"Host {alias}\n  HostName {self.addr}\n  Port {self.sshd.port}\n  User root\n"
                f"  IdentityFile {self.sshd.client_key}\n")
