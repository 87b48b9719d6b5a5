#!/usr/bin/env bash
# Set up a fresh machine for cockpit: system packages, a venv, the package and its test deps.
# Idempotent: a second run only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
# GNU screen: one of the launch recipes `cockpit discover` is tested against.
command -v screen >/dev/null 2>&1 || need_apt+=(screen)
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need_apt+=(openssh-client)
command -v rsvg-convert >/dev/null 2>&1 || need_apt+=(librsvg2-bin)
# A single-node Slurm (and munge) for the Slurm tests; the daemons are started by the tests.
[ -x /usr/sbin/slurmctld ] || need_apt+=(slurm-wlm)
# Network namespaces for the link-cut fault tests.
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  # policy-rc.d keeps Debian's postinst from starting a system sshd we do not want.
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# torch first and pinned: an unpinned torch would resolve to the multi-GB CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[test,static]"
