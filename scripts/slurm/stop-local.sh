#!/usr/bin/env bash
# Stop the cluster scripts/slurm/start-local.sh started, and nothing else: jobs still on it are
# cancelled, then each daemon is found by the pid file start-local.sh wrote and checked by name
# (/proc/PID/comm) before it is signalled; nothing is looked up or killed by name. A munged that
# start-local.sh found running has no pid file and is left alone. /etc/slurm/slurm.conf is put
# back as it was (removed, or the kept original restored). Same LLEM_SLURM_DIR as start-local.sh.
set -uo pipefail
log() { echo "[slurm stop] $*" >&2; }
# shellcheck source=scripts/slurm/common.sh
source "$(dirname "$0")/common.sh"
if ! compgen -G "$RUN/*.pid" > /dev/null && ! grep -qsF "$MARK" "$CONF"; then
  log "nothing to stop (no pid file in $RUN)"
  exit 0
fi
need_root
t0=$SECONDS

# jobs left on the cluster (only when the controller is ours and answers)
if pid_alive "$RUN/slurmctld.pid" slurmctld > /dev/null; then
  jobs=$(squeue -h -o %A 2> /dev/null | sort -u | tr "\n" " ")
  if [ -n "${jobs// /}" ]; then
    log "cancelling the jobs still there: $jobs"
    scancel $jobs > /dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      [ -z "$(squeue -h -o %i 2> /dev/null)" ] && break
      sleep 0.5
    done
  fi
fi

stop_pidfile "$RUN/slurmd.pid" slurmd
stop_pidfile "$RUN/slurmctld.pid" slurmctld
stop_pidfile "$RUN/munged.pid" munged

if [ -e "$CONF" ] && grep -qF "$MARK" "$CONF"; then
  if [ -e "$BASE/slurm.conf.orig" ]; then
    mv "$BASE/slurm.conf.orig" "$CONF"
    log "restored the earlier $CONF"
  else
    rm -f "$CONF"
  fi
fi
log "stopped in $((SECONDS - t0)) s"
