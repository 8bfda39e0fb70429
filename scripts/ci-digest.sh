#!/bin/bash
# ci-digest.sh LOG:LABEL ... - what failed in the logs of .ci/run, in a few lines,
# printed at its end (all a CI report may keep is the tail): first the details
# (assertions, leaks, sanitizer reports, pytest failures, the frames of lis in a
# hung test's traceback), then, last, each failing test and suite. Prints
# nothing when nothing failed. CI_DIGEST_LINES caps the details (default 14).
max=${CI_DIGEST_LINES:-14}
details="" summary=""
for arg in "$@"; do
    log=${arg%%:*} label=${arg##*:}
    if [ ! -f "$log" ]; then
        summary+="[$label] no log ($log): the step did not run"$'\n'
        continue
    fi
    clean=$(sed 's/\x1b\[[0-9;]*m//g' "$log")
    d=$(echo "$clean" | grep -E '^\[----\].*(Assertion|assert|Timed out|FAILED |Error:|Exception:|Timeout \()|^\[LEAK\]|^\[SAN \] .*(ERROR:|runtime error|SUMMARY)|File ".*/lis/|File ".*/test_[a-z_]+\.py", line [0-9]+ in test_|_{4,} test_[a-z0-9_]+ _{4,}' \
        | awk '!seen[$0]++' | head -n 10)
    s=$(echo "$clean" | grep -E '^\[FAIL\]|: [0-9]+ passed, [1-9][0-9]* failed' | awk '!seen[$0]++' | head -n 6)
    [ -n "$d" ] && details+=$(echo "$d" | sed "s/^/[$label] /")$'\n'
    [ -n "$s" ] && summary+=$(echo "$s" | sed "s/^/[$label] /")$'\n'
done
[ -z "$details$summary" ] && exit 0
echo "== what failed (scripts/ci-digest.sh; the whole logs: /tmp/lis-ci-*.log)"
printf '%s' "$details" | cut -c1-240 | head -n "$max"
printf '%s' "$summary" | cut -c1-240 | head -n 10
