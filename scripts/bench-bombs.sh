#!/bin/bash
# Neighbour latency while a bomb runs (issue 10, item 12): for each bomb of
# tests/test_bombs.c (memory, fork, disk, output flood, CPU hog), the median
# `echo ok` exec of a neighbour sandbox during the bomb over its idle median,
# measured in the same run. Goal: <= 3x. Run after `make tests`, as root (the
# suite runs as the unprivileged test user, like `make test`) or as a user.
set -u
cd "$(dirname "$0")/.."
LIS_TEST_SUITES=test_bombs bash scripts/test.sh 2>&1 | sed -n 's/^\[----\] //p' | grep '^bomb ' |
    awk '{print} {r=$NF; if (r > max) max=r} END {printf "worst neighbour ratio: %.2f (goal <= 3)\n", max}'
