#!/bin/bash
# submit.sh - a sharded `lis batch` run on Slurm: a job array of N shards
# (lis-batch.sbatch) and a merge job that runs only when every shard succeeded
# (--dependency=afterok). docs/scale-out.md.
#
#   scripts/slurm/submit.sh -n 4 -o /shared/runs/math -- --task bench/math \
#       --llm-name M --llm-base-url http://gpu-node:8000/v1 --rootfs /shared/img --concurrency 64
#
#   -n N          shards (array tasks 0..N-1)
#   -o RUN_DIR    shared output directory: RUN_DIR/shard-K-of-N/, RUN_DIR/merged/,
#                 the jobs' output in RUN_DIR/slurm/
#   --only LIST   submit only these shards (e.g. 2 or 1,3): a failed shard again,
#                 resumed where it stopped; the merge job waits for them
#   --no-merge    no merge job
#   --wait        wait for the last job (sbatch --wait) and exit with its status
#   -s ARG        an extra sbatch argument for both jobs (repeatable), e.g.
#                 -s --partition=cpu -s --time=12:00:00
# Prints "array JOBID" and "merge JOBID" lines. Environment: LIS_BIN, and what
# lis-batch.sbatch reads (LIS_IMAGE_ARCHIVE, LIS_IMAGE_NAME); sbatch exports it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n="" run="" only="" merge=1 wait=0 extra=()
die() { echo "submit.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    -n) n=${2:-}; shift 2 ;;
    -o) run=${2:-}; shift 2 ;;
    --only) only=${2:-}; shift 2 ;;
    --no-merge) merge=0; shift ;;
    --wait) wait=1; shift ;;
    -s) extra+=("${2:-}"); shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (submit.sh --help)" ;;
    esac
done
[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "-n N: the number of shards (a positive integer)"
[ -n "$run" ] || die "-o RUN_DIR: the shared output directory"
[ $# -gt 0 ] || die "give the lis batch flags after -- (the rows, the model, the image)"
if [ -n "$only" ]; then
    [[ "$only" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--only: a list of shard numbers (2 or 1,3)"
    for k in ${only//,/ }; do [ "$k" -lt "$n" ] || die "--only: shard $k is not below $n"; done
    array=$only
else
    array=0-$((n - 1))
fi
mkdir -p "$run/slurm"
run=$(cd "$run" && pwd)
lis=${LIS_BIN:-lis}
q() { printf "'%s'" "$(printf %s "$1" | sed "s/'/'\\\\''/g")"; }
sb=(sbatch --parsable ${extra[@]+"${extra[@]}"})
last_wait=()
[ $wait -eq 1 ] && [ $merge -eq 0 ] && last_wait=(--wait)
jid=$("${sb[@]}" "${last_wait[@]+"${last_wait[@]}"}" --array="$array" \
      --output="$run/slurm/lis-batch-%A_%a.out" "$here/lis-batch.sbatch" "$run" "$n" "$@") || {
    rc=$?
    [ -n "${jid:-}" ] && echo "array ${jid%%;*}"
    exit $rc
}
jid=${jid%%;*}
echo "array $jid"
[ $merge -eq 1 ] || exit 0
# afterok: only when every task of the array succeeded; a failed shard cancels it
cmd="exec $(q "$lis") batch merge $(q "$run/merged") $(q "$run")/shard-*-of-$n"
mw=()
[ $wait -eq 1 ] && mw=(--wait)
set +e
mid=$("${sb[@]}" "${mw[@]+"${mw[@]}"}" --job-name=lis-batch-merge --dependency=afterok:"$jid" \
      --kill-on-invalid-dep=yes --output="$run/slurm/lis-batch-merge-%j.out" --wrap "$cmd")
rc=$?
set -e
mid=${mid%%;*}
[ -n "$mid" ] && echo "merge $mid"
[ $wait -eq 1 ] && [ $rc -eq 0 ] && [ -n "$mid" ] || exit $rc
# `sbatch --wait` exits 0 for a job its dependency cancelled before it ran: ask for the state
st=$(scontrol -o show job "$mid" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p')
case "$st" in
COMPLETED|"") exit 0 ;; # "": the record is gone already; sbatch's 0 stands
*)
    echo "submit.sh: the merge job $mid ended $st: a shard of array $jid failed (its output:" \
         "$run/slurm/lis-batch-${jid}_K.out); resubmit it with --only K" >&2
    exit 1 ;;
esac
