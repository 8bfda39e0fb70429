#!/bin/bash
# fuzz/run.sh TARGET... - runs the libFuzzer targets built in $FUZZ_B (make fuzz), one after
# the other (the machine is shared), each for $FUZZ_SECONDS, from its seeds (fuzz/corpus/T and
# the findings in fuzz/regress/T) with a working corpus in $FUZZ_B/corpus/T. One summary line
# per target; exit 1 when any target crashed, hung or broke an invariant, its reproducer kept
# in $FUZZ_B/crashes/T/ (replay it: $FUZZ_B/fuzz_T FILE). Logs in $FUZZ_B/logs/T.log.
set -u
cd "$(dirname "$0")/.."
B=${FUZZ_B:-build-fuzz}
case $B in /*) ;; *) B=$PWD/$B ;; esac
secs=${FUZZ_SECONDS:-60}
fail=0
for t in "$@"; do
    bin=$B/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz_$t: not built ($bin)"; fail=1; continue; }
    mkdir -p "$B/corpus/$t" "$B/crashes/$t" "$B/logs" "$B/tmp/$t"
    seeds=("fuzz/corpus/$t")
    [ -d "fuzz/regress/$t" ] && seeds+=("fuzz/regress/$t")
    opts=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$B/crashes/$t/")
    [ -f "fuzz/dict/$t.dict" ] && opts+=(-dict="fuzz/dict/$t.dict")
    # a tar archive needs a few 512-byte blocks per entry
    [ "$t" = extract ] && opts+=(-max_len=16384)
    before=$(ls "$B/crashes/$t" | wc -l)
    TMPDIR="$B/tmp/$t" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bin" "${opts[@]}" "$B/corpus/$t" "${seeds[@]}" >"$B/logs/$t.log" 2>&1
    rc=$?
    rm -rf "${B:?}/tmp/$t"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/logs/$t.log" | tail -n1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$B/logs/$t.log" | tail -n1)
    found=$(( $(ls "$B/crashes/$t" | wc -l) - before ))
    echo "fuzz_$t: ${secs} s, ${runs:-?} runs (${rate:-?}/s), corpus $(ls "$B/corpus/$t" | wc -l)" \
         "inputs, $found new finding(s), exit $rc"
    if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
        fail=1
        grep -m3 -E 'ERROR: |runtime error|invariant violated|SUMMARY' "$B/logs/$t.log" | sed 's/^/    /'
        ls -t "$B/crashes/$t" | head -3 | sed "s|^|    reproducer: $B/crashes/$t/|"
    fi
done
exit $fail
