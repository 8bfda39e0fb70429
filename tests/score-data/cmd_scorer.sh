#!/bin/sh
# --scorer CMD fixture: reads the JSON row on stdin; behaviour picked by $1.

case "$1" in
good) in=$(cat); case "$in" in *'"answer":"Paris"'*'"ground_truth":"Paris"'*'"row":{'*'"domain":"text"'*) echo " 1 ";; *) echo 0.25;; esac ;;
bad) echo "looks good to me" ;;
fail) echo "scorer exploded" >&2; exit 4 ;;
nostdin) echo 0.5 ;;
esac
