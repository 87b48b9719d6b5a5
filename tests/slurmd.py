"""A throwaway single-node Slurm (munged, slurmctld, slurmd) on this machine, for tests.

Installed by the README's test command (Debian's slurm-wlm). Its own config, spool, state and
ports under a temp folder; SLURM_CONF points at it. Needs root (slurmd runs jobs as users).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.sshd import free_port, require


def _munge_ok() -> bool:
    munge = subprocess.run(["munge", "-n"], capture_output=True, check=False)
    if munge.returncode != 0:
        return False
    return subprocess.run(["unmunge"], input=munge.stdout, capture_output=True, check=False).returncode == 0


class Slurm:
    """slurmctld + slurmd with one node (this host) and one partition."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        require("/usr/sbin/slurmctld", "Slurm (slurm-wlm)")
        if os.geteuid() != 0:
            require("/nonexistent/root", "root (slurmd runs jobs)")
        for sub in ("spool", "state", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname()
        self.conf.write_text("\n".join([
            "ClusterName=cockpit", f"SlurmctldHost={host}", f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}", "AuthType=auth/munge", "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={self.root / 'state'}", f"SlurmdSpoolDir={self.root / 'spool'}",
            f"SlurmctldPidFile={self.root / 'ctld.pid'}", f"SlurmdPidFile={self.root / 'd.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'ctld.log'}",
            f"SlurmdLogFile={self.root / 'log' / 'd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "ReturnToService=2", "MpiDefault=none", "MinJobAge=3600",
            f"NodeName={host} CPUs={os.cpu_count() or 1} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
        if not _munge_ok():
            # munged refuses files it does not own; a machine set up by a root-run munged (or a
            # package script) leaves a root-owned log, pid and socket behind, so hand every file
            # in its folders to munge and let --force clear a stale socket.
            for folder in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
                Path(folder).mkdir(parents=True, exist_ok=True)
                shutil.chown(folder, "munge", "munge")
                for entry in Path(folder).rglob("*"):
                    shutil.chown(entry, "munge", "munge")
            subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged", "--force"],
                           check=False)
            deadline = time.monotonic() + 10
            while not _munge_ok():
                if time.monotonic() > deadline:
                    raise RuntimeError("munged did not come up")
                time.sleep(0.2)
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for daemon in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd"):
            self.procs.append(subprocess.Popen([daemon, "-D", "-f", str(self.conf)], env=env,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(0.5)
        deadline = time.monotonic() + 30
        while True:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                                   text=True, check=False).stdout.strip()
            if state in ("idle", "mixed", "allocated"):
                return
            if time.monotonic() > deadline:
                log = (self.root / "log" / "ctld.log").read_text()[-500:] if (
                    self.root / "log" / "ctld.log").exists() else ""
                raise RuntimeError(f"slurm did not come up (sinfo: {state!r}): {log}")
            time.sleep(0.3)

    def env(self) -> dict[str, str]:
        """Environment for Slurm commands against this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def stop(self) -> None:
        """Stop both daemons (jobs still running are killed with them)."""
        subprocess.run(["scancel", "--user", "root"], env=self.env(), capture_output=True, check=False)
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
