#!/bin/bash
# ci-test.sh - `lis batch` sharded over a real single-node Slurm cluster (issue 14).
#
# As root, on a Debian machine without systemd (CI's): brings up munged,
# slurmctld and slurmd from Debian's packages by hand (the recipe and its
# pitfalls: docs/scale-out.md, "Testing"), then, AS AN UNPRIVILEGED USER:
#   1. submits a 4-task array of lis batch shards (scripts/slurm/submit.sh with
#      lis-batch.sbatch, busybox sandboxes) against tests/fake_llm.py, with the
#      dependent merge job, and checks the merged ids and scores;
#   2. submits it again where shard 2's endpoint answers 401: the array fails, the
#      merge job never runs, `lis batch merge` names shard 2 and the --resume
#      command, and resubmitting only shard 2 (submit.sh --only 2) completes the set;
#   3. starts two `lis serve` with lis-serve.sbatch (one srun step, mutual TLS) and
#      runs a trainer's groups over both with lis.Cluster, one service killed
#      halfway (scripts/slurm/ci-test-rl.sh);
# then takes the cluster down (pid files; its state removed), also on failure or
# Ctrl-C. The last line is "slurm: N passed, M failed"; exit 0 only when M is 0.
#
#   scripts/slurm/ci-test.sh          (after make; B=DIR for another build dir)
#   LIS_SLURM_USER (default lis-slurm, created when missing), LIS_SLURM_WORK
#   (default /var/tmp/lis-slurm), LIS_SLURM_TIMEOUT (seconds per wait, default 300).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/${B:-build}
user=${LIS_SLURM_USER:-lis-slurm}
work=${LIS_SLURM_WORK:-/var/tmp/lis-slurm}
tmo=${LIS_SLURM_TIMEOUT:-300}
state=/var/tmp/lis-slurm-cluster # the cluster: config, state, spool, logs, pid files
conf=$state/etc/slurm.conf       # the clients' copy (MinJobAge=5, see below)
dconf=$state/etc/slurm-daemons.conf
passed=0 failed=0 started_munge=0 fakes=()

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() {
    echo "FAIL $1"
    shift
    [ $# -gt 0 ] && printf '%s\n' "$@" | sed 's/^/     /' | tail -n 60
    failed=$((failed + 1))
}
logs() { # the tails that explain a failure
    local f
    for f in "$work"/run*/slurm/*.out "$state"/log/*.log; do
        [ -f "$f" ] || continue
        echo "---- $f"
        tail -n 15 "$f"
    done | sed 's/^/     /'
}

# A process is gone when it is absent or a zombie: PID 1 here reaps late.
alive() { [ -n "$1" ] && [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
stop_pidfile() { # PIDFILE NAME: TERM, 10 s, then KILL
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 0
    alive "$pid" || { rm -f "$1"; return 0; }
    kill "$pid" 2>/dev/null
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
        echo "note: $2 ($pid) ignored SIGTERM for 10 s; killed" >&2
        kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$1"
}

as_user() { # runs "$@" as the test user, in its work dir, with the clients' config
    runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
        HOME="$(getent passwd "$user" | cut -d: -f6)" USER="$user" LOGNAME="$user" \
        TMPDIR=/tmp XDG_RUNTIME_DIR= XDG_DATA_HOME="$work/data" SLURM_CONF="$conf" \
        LIS_BIN="$work/build/lis" ${LIS_IMAGE_ARCHIVE:+LIS_IMAGE_ARCHIVE="$LIS_IMAGE_ARCHIVE"} \
        ${LIS_IMAGE_NAME:+LIS_IMAGE_NAME="$LIS_IMAGE_NAME"} sh -c 'cd "$0" && exec "$@"' "$work" "$@"
}

down() {
    [ -d "$state" ] || return 0
    # the test user's jobs first: slurmd's end does not end a running job step
    if [ -f "$state/run/slurmctld.pid" ] && alive "$(cat "$state/run/slurmctld.pid")"; then
        SLURM_CONF=$conf timeout 10 scancel --user="$user" >/dev/null 2>&1
        for _ in $(seq 50); do
            [ -z "$(SLURM_CONF=$conf timeout 5 squeue -h -u "$user" 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    stop_pidfile "$state/run/slurmd.pid" slurmd
    stop_pidfile "$state/run/slurmctld.pid" slurmctld
    [ $started_munge -eq 1 ] && stop_pidfile /run/munge/munged.pid munged
    rm -rf "$state"
}

finish() {
    local rc=$? f
    trap - EXIT INT TERM
    for f in "${fakes[@]}"; do stop_pidfile "$f" fake_llm; done
    down
    if [ -d "$state" ] || pgrep -f "slurmctld -f $dconf" >/dev/null 2>&1; then
        bad "cluster down" "$(ls -la "$state" 2>&1)"
    else
        ok "cluster down: daemons stopped, $state removed"
    fi
    if [ $failed -eq 0 ]; then
        rm -rf "$work"
    elif [ -d "$work" ]; then
        echo "note: the work directory stays for a look: $work"
    fi
    [ $rc -ne 0 ] && [ $failed -eq 0 ] && bad "ci-test.sh stopped early (exit $rc)"
    echo "slurm: $passed passed, $failed failed"
    exit $((failed > 0))
}
trap finish EXIT
trap 'echo "ci-test.sh: interrupted" >&2; exit 130' INT TERM

fatal() { bad "$@"; logs; exit 1; }

[ "$(id -u)" -eq 0 ] || { echo "ci-test.sh: run it as root (it starts a Slurm cluster)" >&2; exit 2; }
for f in lis lis-init liblis-agent.so; do
    [ -e "$build/$f" ] || fatal "$build/$f is missing: run make first"
done

# ---- packages (scripts/deps.sh installs them in CI; this is for a dev machine) ----
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
   ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    echo "== installing slurmctld slurmd slurm-client munge"
    # the postinsts must not start daemons: there is no init here that would stop them
    prc=/usr/sbin/policy-rc.d own_prc=0
    if [ ! -e $prc ]; then printf '#!/bin/sh\nexit 101\n' >$prc && chmod 755 $prc && own_prc=1; fi
    export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
    timeout 600 apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
        slurmctld slurmd slurm-client munge >/tmp/lis-slurm-apt.log 2>&1 ||
        timeout 600 sh -c 'apt-get update -q && apt-get install -y -q --no-install-recommends \
            slurmctld slurmd slurm-client munge' >>/tmp/lis-slurm-apt.log 2>&1
    apt_rc=$?
    [ $own_prc -eq 1 ] && rm -f $prc
    [ $apt_rc -eq 0 ] || fatal "installing the Slurm packages" "$(tail -n 20 /tmp/lis-slurm-apt.log)"
fi

# ---- the cluster --------------------------------------------------------------------------
echo "== single-node Slurm (munged, slurmctld, slurmd by hand)"
down # what an earlier run that was killed left behind (stale pid files)
node=$(hostname -s)
id slurm >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin slurm
id munge >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin munge
mkdir -p "$state"/{etc,run,log,ctld,spool} /run/munge /var/log/munge /var/lib/munge /etc/munge
chmod 755 "$state" "$state/etc" "$state/run"
chown slurm:slurm "$state/log" "$state/ctld" "$state/run"
chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
chmod 755 /run/munge
chmod 700 /var/log/munge /var/lib/munge /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1 ||
        dd if=/dev/urandom of=/etc/munge/munge.key bs=128 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
# a munged that answers (a system one) is used; else ours, --force past a stale socket lock
if ! { munge -n | unmunge; } >/dev/null 2>&1; then
    stop_pidfile /run/munge/munged.pid munged
    runuser -u munge -- munged --force >"$state/log/munged.out" 2>&1 ||
        fatal "munged does not start" "$(cat "$state/log/munged.out")"
    started_munge=1
fi
for _ in $(seq 100); do { munge -n | unmunge; } >/dev/null 2>&1 && break; sleep 0.1; done
{ munge -n | unmunge; } >/dev/null 2>&1 || fatal "munge round trip" "$(munge -n 2>&1 | unmunge 2>&1)"

# Node line as slurmd sees the hardware; everything by IP, so no DNS or /etc/hosts is needed.
hw=$(slurmd -C 2>/dev/null | head -n1)
[[ "$hw" == NodeName=* ]] || fatal "slurmd -C" "$(slurmd -C 2>&1)"
hw=$(echo "$hw" | sed -E "s/^NodeName=[^ ]+/NodeName=$node/")
write_conf() { # FILE MINJOBAGE
    cat >"$1" <<CONF
# written by lis scripts/slurm/ci-test.sh; removed when the test ends
ClusterName=lisci
SlurmctldHost=$node(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state/log/jobcomp.log
SchedulerParameters=batch_sched_delay=0
DependencyParameters=kill_invalid_depend
MinJobAge=$2
MailProg=/bin/true
ReturnToService=2
$hw NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}
# Two copies that differ in MinJobAge: the daemons keep finished records (300 s) so that
# `sbatch --wait` of an array sees every task's exit code; the clients read 5, so that
# `sbatch --wait` polls every 2 s instead of backing off to 32 s.
write_conf "$dconf" 300
write_conf "$conf" 5
export SLURM_CONF=$conf
slurmctld -c -f "$dconf" >"$state/log/slurmctld.out" 2>&1 ||
    fatal "slurmctld does not start" "$(cat "$state/log/slurmctld.out")"
for _ in $(seq 300); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
scontrol ping 2>/dev/null | grep -q UP || fatal "slurmctld is not UP after 30 s" "$(scontrol ping 2>&1)" "$(logs)"
slurmd -f "$dconf" >"$state/log/slurmd.out" 2>&1 ||
    fatal "slurmd does not start" "$(cat "$state/log/slurmd.out")"
st=""
for _ in $(seq 600); do
    st=$(sinfo -h -N -n "$node" -o %T 2>/dev/null)
    [ "$st" = idle ] && break
    sleep 0.1
done
[ "$st" = idle ] || fatal "node $node is not idle after 60 s (state '$st')" "$(sinfo -R 2>&1)" "$(logs)"
timeout 60 srun -N1 true >/dev/null 2>&1 || fatal "srun -N1 true" "$(logs)"
ok "cluster up: node $node idle, srun works"

# ---- the test user, its copy of lis, the rows, the fake endpoints ---------------------------
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
rm -rf "$work"
mkdir -p "$work/build"
cp -a "$build/lis" "$build/lis-init" "$build"/liblis-*.so "$work/build/" # serve's too
cp "$top/tests/fake_llm.py" "$work/"
cp -r "$top/scripts/slurm" "$work/slurm" # the user may not read this checkout
bash "$top/scripts/make-test-rootfs.sh" busybox "$work/busybox" >/dev/null ||
    fatal "the busybox rootfs (scripts/make-test-rootfs.sh busybox)"
tar -C "$work/busybox" -cf "$work/busybox.tar" . # the same, as an archive each node imports
# 10 rows; the model answers wrongly for i % 3 == 1, so 7 of 10 score 1
{
    for i in $(seq 0 9); do
        echo "{\"id\":\"r$i\",\"problem_statement\":\"MARK$i: write the answer\",\"ground_truth\":\"ok\"}"
    done
} >"$work/tasks.jsonl"
script() { # FAIL_LIST: the markers that get a 401 (which stops their shard at once)
    local i sep="" ans
    printf '{"rows":{'
    for i in $(seq 0 9); do
        printf '%s"MARK%d:"' "$sep" "$i"
        sep=,
        if [[ " $1 " == *" $i "* ]]; then
            printf ':[{"fail":100,"fail_status":401}]'
            continue
        fi
        ans=ok
        [ $((i % 3)) -eq 1 ] && ans=wrong
        printf ':[{"calls":[["execute_bash",{"command":"echo %s > /testbed/output/answer.txt"}]]},' "$ans"
        printf '{"calls":[["submit",{}]]}]'
    done
    printf '}}\n'
}
script "" >"$work/good.json"
script "2 6" >"$work/bad2.json" # the rows of shard 2 of 4
chown -R "$user:$user" "$work"
chmod -R a+rX "$work"
start_fake() { # NAME: its URL in $url
    as_user sh -c 'echo $$ > "$1.pid"; exec python3 fake_llm.py "$1.json" > "$1.port"' sh "$1" \
        </dev/null >/dev/null 2>"$work/$1.err" &
    fakes+=("$work/$1.pid")
    local port=""
    for _ in $(seq 100); do
        port=$(head -n1 "$work/$1.port" 2>/dev/null)
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || fatal "fake_llm.py ($1) did not start" "$(cat "$work/$1.err")"
    url=http://127.0.0.1:$port/v1
}
start_fake good
good=$url
start_fake bad2
bad=$url

flags() { # URL: the lis batch flags of every shard (the image: --rootfs, or imported)
    local image="--rootfs $work/busybox"
    [ -n "${LIS_IMAGE_ARCHIVE:-}" ] && image="" # lis-batch.sbatch adds --image
    echo --tasks tasks.jsonl --llm-name fake --llm-base-url "$1" --api-key k \
        $image --net none --scorer builtin:match --max-steps 3 --concurrency 2 --quiet
}
submit() { # RUN URL [submit.sh options]: the array and its merge job, waited for
    local run=$1 url=$2
    shift 2
    # shellcheck disable=SC2046
    as_user timeout "$tmo" bash "$work/slurm/submit.sh" -n 4 -o "$work/$run" --wait "$@" \
        -- $(flags "$url")
}
# the merged set: every id once, with its score (as the fake model answers)
check_merged() { # DIR
    python3 - "$1" <<'PY'
import json, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + "/results.jsonl")]
got = sorted((r["id"], r["score"], r["reason"]) for r in rows)
want = sorted(("r%d" % i, 0.0 if i % 3 == 1 else 1.0, "submitted") for i in range(10))
if got != want:
    sys.exit("rows %s, want %s" % (got, want))
res = json.load(open(d + "/results.json"))
if res["total"] != 10 or abs(res["mean_score"] - 0.7) > 1e-9 or res["num_errors"] != 0:
    sys.exit("results.json: total %s mean_score %s num_errors %s" % (res["total"], res["mean_score"], res["num_errors"]))
traj = json.load(open(d + "/trajectory.json"))
if sorted(traj) != sorted("r%d" % i for i in range(10)):
    sys.exit("trajectory.json keys %s" % sorted(traj))
if "shard" in json.load(open(d + "/run.json")):
    sys.exit("run.json of the merge still names a shard")
PY
}
jobstate() { # JOBID_TASK or JOBID: its JobState (slurmctld keeps the record 300 s)
    scontrol -o show job "$1" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p' | head -n1
}

# ---- 1: four shards as a job array, then the afterok merge ------------------------------------
echo "== 1: a 4-task array of lis batch shards, then the dependent merge"
out=$(submit run1 "$good" 2>&1)
rc=$?
arr=$(echo "$out" | sed -nE 's/^array ([0-9]+)$/\1/p')
mid=$(echo "$out" | sed -nE 's/^merge ([0-9]+)$/\1/p')
if [ $rc -eq 0 ] && [ -n "$arr" ] && [ -n "$mid" ]; then
    ok "submit.sh --wait: array $arr and merge $mid ended with 0"
else
    bad "submit.sh --wait exited $rc" "$out" "$(logs)"
fi
if [ -f "$work/run1/merged/results.jsonl" ] && msg=$(check_merged "$work/run1/merged" 2>&1); then
    ok "merged by the afterok job: ids r0..r9 once each, 7 of 10 scored 1, mean 0.7"
else
    bad "the merged results of run 1" "$msg" "$(ls -la "$work/run1" "$work/run1/merged" 2>&1)" "$(logs)"
fi
msg=""
for k in 0 1 2 3; do
    d=$work/run1/shard-$k-of-4
    ids=$(python3 -c "import json,sys;print(' '.join(sorted(json.loads(l)['id'] for l in open(sys.argv[1]))))" "$d/results.jsonl" 2>&1)
    want=$(for i in $(seq 0 9); do [ $((i % 4)) -eq $k ] && echo "r$i"; done | sort | tr '\n' ' ' | sed 's/ $//')
    [ "$ids" = "$want" ] || msg="$msg shard $k: ids '$ids', want '$want';"
    owner=$(stat -c %U "$d/results.jsonl" 2>/dev/null)
    [ "$owner" = "$user" ] || msg="$msg shard $k written by '$owner', not $user;"
    grep -q "as $user:" "$work"/run1/slurm/lis-batch-"${arr:-x}"_$k.out 2>/dev/null ||
        msg="$msg task $k's output does not say it ran as $user;"
done
[ -z "$msg" ] && ok "each task ran one shard (rows i % 4 == K) as $user, rootless" ||
    bad "the shards of run 1" "$msg"

# ---- 2: a failing shard, then only that shard again ---------------------------------------------
echo "== 2: shard 2 meets a 401; the array fails, merge names it, --only 2 finishes the set"
echo "   (the image is an archive each node imports once, not a shared directory)"
export LIS_IMAGE_ARCHIVE=$work/busybox.tar LIS_IMAGE_NAME=lis-ci-busybox
out=$(submit run2 "$bad" 2>&1)
rc=$?
arr=$(echo "$out" | sed -nE 's/^array ([0-9]+)$/\1/p')
mid=$(echo "$out" | sed -nE 's/^merge ([0-9]+)$/\1/p')
s2=$(jobstate "${arr:-x}_2")
[ $rc -ne 0 ] && [ "$s2" = FAILED ] && [ ! -e "$work/run2/merged" ] &&
    ok "the array failed (task 2 $s2, submit.sh exit $rc) and the merge job did not run" ||
    bad "run 2: submit.sh exit $rc, task 2 '$s2', merged dir $(ls -d "$work/run2/merged" 2>&1)" "$out" "$(logs)"
n=$(grep -l "^lis-ci-busybox:latest sha256:.*(tarball" "$work"/run2/slurm/*.out 2>/dev/null | wc -l)
if [ "$n" -eq 1 ] && as_user "$work/build/lis" rootfs inspect lis-ci-busybox >/dev/null 2>&1; then
    ok "the image archive was imported once on the node, by the first task, into $user's store"
else
    bad "the image import: $n imports" "$(cat "$work"/run2/slurm/*.out 2>&1 | head -n 20)"
fi
ok_states=""
for k in 0 1 3; do ok_states="$ok_states$(jobstate "${arr:-x}_$k") "; done
[ "$ok_states" = "COMPLETED COMPLETED COMPLETED " ] && ok "the other shards completed" ||
    bad "tasks 0, 1, 3 of run 2: $ok_states" "$(logs)"
out=$(as_user "$work/build/lis" batch merge "$work/run2/merged" "$work"/run2/shard-*-of-4 2>&1)
rc=$?
# the hint runs as printed: the lis that merges, and --resume DIR alone (run.json has the flags)
if [ $rc -ne 0 ] && echo "$out" | grep -qF "shard 2/4 ($work/run2/shard-2-of-4) is incomplete: 2 of 2 episodes have no row; finish it with $work/build/lis batch --resume $work/run2/shard-2-of-4, then merge again"; then
    ok "lis batch merge refuses and names shard 2/4 and its --resume"
else
    bad "merge of run 2 (exit $rc) does not name shard 2" "$out"
fi
out=$(submit run2 "$good" --only 2 2>&1)
rc=$?
arr=$(echo "$out" | sed -nE 's/^array ([0-9]+)$/\1/p')
if [ $rc -eq 0 ] && grep -q -- "--resume $work/run2/shard-2-of-4" "$work"/run2/slurm/lis-batch-"${arr:-x}"_2.out 2>/dev/null; then
    ok "resubmitted shard 2 alone (array $arr): it resumed its directory, the merge ran"
else
    bad "resubmitting shard 2: exit $rc" "$out" "$(logs)"
fi
if [ -f "$work/run2/merged/results.jsonl" ] && msg=$(check_merged "$work/run2/merged" 2>&1); then
    ok "run 2 merged after the resubmission: the same ids and scores as run 1"
else
    bad "the merged results of run 2" "$msg" "$(logs)"
fi

# ---- 3: RL rollouts over two lis serve services, one killed (issue 31) ---------------------------
# shellcheck source=scripts/slurm/ci-test-rl.sh
. "$top/scripts/slurm/ci-test-rl.sh"
