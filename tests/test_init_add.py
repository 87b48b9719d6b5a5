"""`cockpit init` and `cockpit add`: a sweep from the one ssh line a platform hands out.

Run as the real CLI in a subprocess; `add` against a real sshd (host key fetched, shown,
approved or refused; a queue started on the box discovered and filled in)."""

from __future__ import annotations

import os
import pty
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cockpit.services.config.paths import approved_known_hosts
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.config.sweepwrite import SshLine, SshLineError, parse_ssh_line
from tests.sshd import Sshd, keygen, require

DATA = Path(__file__).resolve().parents[1] / "cockpit" / "data"


def cockpit(*args: str, stdin: int | None = subprocess.DEVNULL,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True,
                          text=True, timeout=90, stdin=stdin)


def fingerprint(server: Sshd) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", f"{server.host_key}.pub"], capture_output=True,
                         text=True, check=True).stdout
    return out.split()[1]


def ssh_line(server: Sshd) -> str:
    return f"ssh -p {server.port} -i {server.client_key} root@127.0.0.1"


# -- init ---------------------------------------------------------------------------------------


def test_init_writes_a_commented_starter_and_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "my sweep.yaml"
    first = cockpit("init", str(path))
    assert first.returncode == 0, first.stderr
    text = path.read_text()
    assert text.count("\n#") >= 10  # commented: what each key is for, and the add example
    assert "cockpit add" in text and "sweep: my-sweep" in text
    assert yaml.safe_load(text)["instances"] == []

    again = cockpit("init", str(path))
    assert again.returncode == 2
    assert "already exists" in again.stderr and "Traceback" not in again.stderr
    assert path.read_text() == text

    other = tmp_path / "b.yaml"
    doc = cockpit("init", str(other), "--name", "exp-7", "--json")
    assert doc.returncode == 0
    import json

    assert json.loads(doc.stdout) == {"sweep": str(other), "name": "exp-7", "created": True}
    bad = cockpit("init", str(tmp_path / "c.yaml"), "--name", "no/slash")
    assert bad.returncode == 2 and not (tmp_path / "c.yaml").exists()


# -- parsing the ssh line -------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "want"), [
    ("ssh -p 12345 root@region-1.autodl.com", SshLine("region-1.autodl.com", 12345, "root")),
    ("ssh root@ssh5.vast.ai -p 31234 -L 8080:localhost:8080".replace(" -L 8080:localhost:8080", ""),
     SshLine("ssh5.vast.ai", 31234, "root")),
    ("ssh -i ~/.ssh/id_ed25519 root@213.173.108.8 -p 17445",
     SshLine("213.173.108.8", 17445, "root", "~/.ssh/id_ed25519")),
    ("ssh -p12345 -l ubuntu 10.0.0.2", SshLine("10.0.0.2", 12345, "ubuntu")),
    ("ssh -o Port=2222 -o User=u -o IdentityFile=/k/id box.example.org",
     SshLine("box.example.org", 2222, "u", "/k/id")),
    ("ssh://root@box.example.org:2200", SshLine("box.example.org", 2200, "root")),
    ("ssh -4 -A -t root@[::1]", SshLine("::1", None, "root")),
    ("root@host-1", SshLine("host-1", None, "root")),
])
def test_the_lines_platforms_hand_out_parse(line: str, want: SshLine) -> None:
    assert parse_ssh_line(line) == want


@pytest.mark.parametrize(("line", "says"), [
    ("ssh -J jump root@h", "-J"),
    ("ssh -o ProxyCommand=nc root@h", "ProxyCommand"),
    ("ssh -o StrictHostKeyChecking=no root@h", "StrictHostKeyChecking"),
    ("ssh root@h 'rm -rf /'", "remote command"),
    ("ssh 'root@h;reboot'", "not a host"),
    ("ssh root@$(reboot)", "not a host"),
    ("ssh '$(id)@h'", "not a user"),
    ("ssh -p 70000 root@h", "1 to 65535"),
    ("ssh -p 22 -o Port=23 root@h", "two ports"),
    ("ssh -l a b@h", "two users"),
    ("ssh root@h\nreboot", "control characters"),
    ("ssh -p", "needs a value"),
    ("ssh", "no destination"),
    ("ssh " + "a" * 2000, "over"),
])
def test_anything_else_is_refused_by_name(line: str, says: str) -> None:
    with pytest.raises(SshLineError, match=None) as caught:
        parse_ssh_line(line)
    assert says in str(caught.value)


# -- add without a network: what is written -------------------------------------------------------

USER_FILE = """\
# my notes: the A100 boxes, bought 2026-11-20
sweep: exp    # the name on the dashboard
ssh:
  config: []   # nothing yet
instances:
  # the first box, from last week
  - name: old
    profile: generic-ssh
    host: "old.example.org"  # quoted on purpose
"""


def test_add_keeps_the_users_comments_and_the_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(USER_FILE)
    done = cockpit("add", str(path), "ssh -p 40022 -i ~/.ssh/k root@n1.example.org",
                   "--profile", "autodl", "--name", "a1", "--offline")
    assert done.returncode == 0, done.stderr
    text = path.read_text()
    for comment in ("# my notes: the A100 boxes", "# the name on the dashboard", "# nothing yet",
                    "# the first box, from last week", "# quoted on purpose",
                    '"old.example.org"'):
        assert comment in text
    loaded = load_sweep(path)
    inst = loaded.sweep.instance("a1")
    assert (inst.host, inst.port, inst.user, inst.profile) == ("n1.example.org", 40022, "root",
                                                               "autodl")
    assert loaded.sweep.ssh.identity_files == ("~/.ssh/k",)
    assert "cockpit trust" in done.stdout  # offline: the key is approved later, by name

    before = path.read_text()
    dup = cockpit("add", str(path), "ssh root@n2.example.org", "--profile", "autodl",
                  "--name", "a1", "--offline")
    assert dup.returncode == 2 and "already has an instance named 'a1'" in dup.stderr
    for bad_name in ("a b", "-x", "x" * 65, "a\u202eb"):
        bad = cockpit("add", str(path), "ssh root@n2.example.org", "--profile", "autodl",
                      "--name", bad_name, "--offline")
        assert bad.returncode == 2, bad_name
        assert "\u202e" not in bad.stderr  # a bidi override is shown, never obeyed
    nope = cockpit("add", str(path), "ssh root@n2.example.org", "--profile", "no-such",
                   "--name", "a2", "--offline")
    assert nope.returncode == 2 and "no profile 'no-such'" in nope.stderr
    hostile = cockpit("add", str(path), "ssh -p 2 'root@x.org;touch /tmp/pwn'", "--profile",
                      "autodl", "--name", "a3", "--offline")
    assert hostile.returncode == 2 and "not a host" in hostile.stderr
    assert path.read_text() == before


def test_add_creates_the_sweep_from_the_starter(tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    done = cockpit("add", str(path), "ssh -p 12345 root@region-1.autodl.com", "--profile",
                   "autodl", "--name", "a1", "--offline", "--json")
    assert done.returncode == 0, done.stderr
    import json

    doc = json.loads(done.stdout)
    assert doc["created"] is True and doc["added"] is True
    assert doc["instance"] == {"name": "a1", "profile": "autodl", "host": "region-1.autodl.com",
                               "port": 12345, "user": "root"}
    assert "# One entry per box" in path.read_text()  # the starter's comments stayed
    assert load_sweep(path).sweep.sweep == "new"
    # init then add: the same starter, then the instance
    other = tmp_path / "two.yaml"
    assert cockpit("init", str(other)).returncode == 0
    assert cockpit("add", str(other), "root@h.example.org", "--profile", "generic-ssh",
                   "--offline").returncode == 0
    assert load_sweep(other).sweep.instances[0].name == "h"


# -- add against a real sshd -----------------------------------------------------------------------


@pytest.mark.sshd
def test_add_shows_the_fingerprint_and_never_trusts_silently(sshd: Sshd, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    want = fingerprint(sshd)
    piped = cockpit("add", str(path), ssh_line(sshd), "--profile", "generic-ssh", "--name", "b1")
    assert piped.returncode == 1
    assert want in piped.stderr and "--trust" in piped.stderr
    assert not path.exists()
    assert not approved_known_hosts().exists() or want not in approved_known_hosts().read_text()

    wrong = cockpit("add", str(path), ssh_line(sshd), "--profile", "generic-ssh", "--name", "b1",
                    "--trust", "SHA256:" + "A" * 43)
    assert wrong.returncode == 1 and want in wrong.stderr and not path.exists()

    good = cockpit("add", str(path), ssh_line(sshd), "--profile", "generic-ssh", "--name", "b1",
                   "--trust", want, "--json")
    assert good.returncode == 0, good.stderr
    import json

    doc = json.loads(good.stdout)
    assert doc["host_key"]["fingerprint"] == want and doc["host_key"]["trust"] == "approved"
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519 " in approved_known_hosts().read_text()
    loaded = load_sweep(path)
    assert loaded.sweep.instance("b1").port == sshd.port
    assert loaded.sweep.ssh.identity_files == (str(sshd.client_key),)

    # The same box again under another name: the key is already trusted, nothing to ask.
    again = cockpit("add", str(path), ssh_line(sshd), "--profile", "generic-ssh", "--name", "b2",
                    "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["host_key"]["trust"] == "already-trusted"
    # status reaches it with what add wrote (the key approved, the identity file listed)
    status = cockpit("status", str(path), "--json")
    assert [i["reachable"] for i in json.loads(status.stdout)["instances"]] == [True, True]


@pytest.mark.sshd
def test_a_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    first = cockpit("add", str(path), ssh_line(sshd), "--profile", "generic-ssh", "--name", "b1",
                    "--trust", fingerprint(sshd))
    assert first.returncode == 0, first.stderr
    sshd.stop()
    for suffix in ("", ".pub"):
        Path(f"{sshd.host_key}{suffix}").unlink()
    keygen(sshd.host_key)
    sshd.start()
    before = path.read_text()
    changed = cockpit("add", str(path), ssh_line(sshd), "--profile", "generic-ssh", "--name",
                      "b2", "--trust", fingerprint(sshd))
    assert changed.returncode == 1
    assert "CHANGED" in changed.stderr and fingerprint(sshd) in changed.stderr
    assert path.read_text() == before


@pytest.mark.sshd
@pytest.mark.parametrize(("answer", "code"), [("y\n", 0), ("n\n", 1), ("\n", 1)])
def test_on_a_terminal_add_asks(sshd: Sshd, tmp_path: Path, answer: str, code: int) -> None:
    path = tmp_path / "s.yaml"
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode())  # held by the terminal until add reads it
        done = cockpit("add", str(path), ssh_line(sshd), "--profile", "generic-ssh", "--name",
                       "b1", stdin=slave)
    finally:
        os.close(slave)
        os.close(master)
    assert done.returncode == code, done.stderr
    assert fingerprint(sshd) in done.stderr and "Trust this key? [y/N]" in done.stderr
    assert path.exists() == (code == 0)


@pytest.mark.sshd
def test_ctrl_c_at_the_prompt_adds_nothing(sshd: Sshd, tmp_path: Path) -> None:
    import select
    import signal

    path = tmp_path / "s.yaml"
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "add", str(path), ssh_line(sshd),
                             "--profile", "generic-ssh", "--name", "b1"],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"[y/N]" not in seen:
            assert proc.poll() is None and time.monotonic() < deadline, seen
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                seen += os.read(proc.stderr.fileno(), 4096)
        proc.send_signal(signal.SIGINT)  # once, at the prompt
        _, rest = proc.communicate(timeout=60)
    finally:
        os.close(slave)
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert b"Traceback" not in seen + rest and not path.exists()
    assert not approved_known_hosts().exists()


def _pid_namespace_sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sshd:
    """An sshd whose sessions see only their own processes (a PID namespace), so discovery
    finds exactly the queue this test starts and not another test's or the demo fleet's."""
    require("/usr/bin/unshare", "util-linux unshare")
    if os.geteuid() != 0:
        pytest.skip("a PID namespace needs root here")
    wrapper = tmp_path / "sshd-pidns"
    wrapper.write_text(f"#!/bin/sh\nexec unshare --pid --fork --mount-proc --kill-child "
                       f"{shutil.which('sshd') or '/usr/sbin/sshd'} \"$@\"\n")
    wrapper.chmod(0o755)
    import tests.sshd

    monkeypatch.setattr(tests.sshd, "SSHD", str(wrapper))
    server = Sshd(tmp_path / "sshd-ns")
    server.start()
    return server


@pytest.mark.sshd
def test_add_fills_the_queue_paths_of_a_running_queue(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    require(shutil.which("sshd") or "/usr/sbin/sshd", "OpenSSH sshd")
    server = _pid_namespace_sshd(tmp_path, monkeypatch)
    try:
        box = tmp_path / "box: #1 'q' \"x\" - [a] {b}"  # YAML's syntax in every path
        box.mkdir()
        shutil.copy(DATA / "run_queue.sh", box / "run_queue.sh")
        (box / "stub_one.sh").write_text(
            "#!/usr/bin/env bash\nNAME=$(basename \"$1\" .yaml)\nmkdir -p logs\n"
            "{ echo 'Epoch 1/2 | loss=0.5'; sleep 120; } | tee \"logs/$NAME.log\"\n")
        (box / "queue.txt").write_text("cfg/a.yaml t 2\ncfg/b.yaml t 2\n")
        # The background job is the runner alone, its three streams off the channel, so the
        # ssh session ends at once (as a user's `nohup ... &` does).
        start = (f"cd {shlex.quote(str(box))} || exit 1; RUN_ONE=./stub_one.sh nohup bash run_queue.sh "
                 "queue.txt >> master.log 2>&1 < /dev/null &")
        subprocess.run(["ssh", "-p", str(server.port), "-i", str(server.client_key),
                        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                        "-o", "BatchMode=yes", "root@127.0.0.1", start],
                       check=True, timeout=30, capture_output=True)
        deadline = time.monotonic() + 30
        while not (box / "logs" / "a.log").exists():
            assert time.monotonic() < deadline, "the queue did not start"
            time.sleep(0.2)
        path = tmp_path / "s.yaml"
        done = cockpit("add", str(path), ssh_line(server), "--profile", "generic-ssh",
                       "--name", "q1", "--trust", fingerprint(server), "--json")
        assert done.returncode == 0, done.stderr
        import json

        doc = json.loads(done.stdout)
        assert doc["discovery"]["status"] == "filled", doc
        inst = load_sweep(path).sweep.instance("q1")
        assert inst.queue == str(box / "queue.txt")
        assert inst.queue_log == str(box / "master.log")
        assert inst.run_logs == str(box / "logs")
        assert inst.runner is not None and inst.runner.script == str(box / "run_queue.sh")
    finally:
        server.stop()
