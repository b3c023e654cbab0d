#!/usr/bin/env bash
# A single-node Slurm on a Debian machine without systemd or cgroups (as CI has):
# munged, MariaDB + slurmdbd (so sacct works), slurmctld and slurmd, with fake gres/gpu
# devices. Partitions: cpu (default) and gpu, both on this node. Idempotent.
#   scripts/slurm-up.sh         install if needed, configure, start, smoke-test
#   scripts/slurm-up.sh stop    stop the daemons it started
# Env: SLURM_ROOT (/tmp/bisect-ngc-slurm), SLURM_FAKE_GPUS (4), SLURM_CPUS (nproc)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
R=${SLURM_ROOT:-/tmp/bisect-ngc-slurm}
NGPU=${SLURM_FAKE_GPUS:-4}
CPUS=${SLURM_CPUS:-$(nproc)}
DBPASS=bisectngc
say() { echo "[slurm-up] $*" >&2; }
alive() { [ -n "${1:-}" ] || return 1; local st; st=$(ps -o stat=,comm= -p "$1" 2>/dev/null) || return 1
          case "$st" in Z*) return 1;; esac; [ "${st##* }" = "$2" ]; }
running() { alive "$(cat "$1" 2>/dev/null || true)" "$2"; }
stop() { local p; p=$(cat "$1" 2>/dev/null || true)
         if alive "$p" "$2"; then kill "$p"; for _ in $(seq 50); do alive "$p" "$2" || break; sleep 0.1; done
           alive "$p" "$2" && kill -9 "$p"; fi; rm -f "$1"; }
wait_for() { local end=$(( $(date +%s) + $1 )); shift
             until "$@" >/dev/null 2>&1; do [ "$(date +%s)" -ge "$end" ] && return 1; sleep 0.2; done; }

if [ "${1:-}" = stop ]; then
  stop "$R/slurmd.pid" slurmd; stop "$R/slurmctld.pid" slurmctld; stop "$R/slurmdbd.pid" slurmdbd
  [ -f "$R/mariadb.pid" ] && stop "$R/mariadb.pid" mariadbd
  exit 0
fi

need=()
for b in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge slurmdbd:slurmdbd; do
  command -v "${b%%:*}" >/dev/null || need+=("${b#*:}")
done
command -v mariadbd >/dev/null || command -v mysqld >/dev/null || need+=(mariadb-server)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
mkdir -p "$R/ctld" "$R/d" "$R/log" "$R/fakegpu"
H=$(hostname -s)
getent hosts "$H" >/dev/null || echo "127.0.0.1 $H" >> /etc/hosts

# munge
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged --force
  wait_for 10 sh -c 'munge -n | unmunge' || { say "munged did not start"; exit 1; }
fi

# MariaDB for slurmdbd
if ! mariadb-admin ping >/dev/null 2>&1; then
  mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
  DB=$(command -v mariadbd || command -v mysqld)
  setsid nohup "$DB" --user=mysql >>"$R/log/mariadb.log" 2>&1 </dev/null &
  echo $! > "$R/mariadb.pid"
  wait_for 60 mariadb-admin ping || { say "MariaDB did not start"; exit 1; }
fi
mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
            CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
            ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

for i in $(seq 0 $((NGPU - 1))); do
  [ -c "$R/fakegpu/gpu$i" ] || { rm -f "$R/fakegpu/gpu$i"; mknod "$R/fakegpu/gpu$i" c 1 3; }
done
T=$(mktemp -d)
cat > "$T/slurm.conf" <<CONF
ClusterName=bisectngc
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
DependencyParameters=kill_invalid_depend
ReturnToService=2
MinJobAge=300
StateSaveLocation=$R/ctld
SlurmdSpoolDir=$R/d
SlurmctldPidFile=$R/slurmctld.pid
SlurmdPidFile=$R/slurmd.pid
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdLogFile=$R/log/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
GresTypes=gpu
AccountingStorageTRES=gres/gpu
NodeName=$H NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=4000 Gres=gpu:$NGPU State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=ALL Default=NO MaxTime=INFINITE State=UP
CONF
echo "NodeName=$H Name=gpu File=$R/fakegpu/gpu[0-$((NGPU - 1))]" > "$T/gres.conf"
cat > "$T/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$R/log/slurmdbd.log
PidFile=$R/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DBPASS
StorageLoc=slurm_acct_db
CONF
mkdir -p /etc/slurm
changed=0
for f in slurm.conf gres.conf slurmdbd.conf; do
  cmp -s "$T/$f" "/etc/slurm/$f" || { cp "$T/$f" "/etc/slurm/$f"; changed=1; }
done
chmod 600 /etc/slurm/slurmdbd.conf; rm -rf "$T"
if [ "$changed" = 1 ]; then
  stop "$R/slurmd.pid" slurmd; stop "$R/slurmctld.pid" slurmctld; stop "$R/slurmdbd.pid" slurmdbd
fi
if ! running "$R/slurmdbd.pid" slurmdbd; then
  slurmdbd
  wait_for 60 sacctmgr -n list cluster || { say "slurmdbd not answering"; exit 1; }
fi
sacctmgr -n -P list cluster format=cluster | grep -qx bisectngc || sacctmgr -i add cluster bisectngc >/dev/null
if ! running "$R/slurmctld.pid" slurmctld; then
  slurmctld
  wait_for 30 scontrol ping || { say "slurmctld not answering: $(tail -3 "$R/log/slurmctld.log")"; exit 1; }
fi
running "$R/slurmd.pid" slurmd || slurmd
node_ok() { sinfo -h -n "$H" -o %T | grep -Eq '^(idle|mixed|allocated|completing)'; }
if ! wait_for 30 node_ok; then
  scontrol update nodename="$H" state=resume || true
  wait_for 15 node_ok || { say "node not usable: $(sinfo -h -n "$H" -o '%T %E')"; exit 1; }
fi
J=$(sbatch --parsable -o /dev/null --wrap true)
wait_for 60 sh -c "scontrol -o show job $J | grep -q JobState=COMPLETED" \
  || { say "smoke job $J did not complete: $(scontrol -o show job "$J")"; exit 1; }
say "slurm up on $H: $(sinfo -h -o '%P %a %D %T %G' | tr '\n' ' ')"
