#!/bin/bash
# Every C file of the tree as .clang-format (docs/style.md) makes it.
#   scripts/format-check.sh         lists the files that differ; exit 1 when any does
#   scripts/format-check.sh --fix   rewrites them
# clang-format's output changes between major versions: the tree is kept in the
# form of Debian 12's clang-format 14. With another version (or none) the check is
# skipped (exit 77), not failed.
set -u
cd "$(dirname "$0")/.."
cf=""
for c in clang-format-14 clang-format; do
    if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -qE 'version 14\.'; then
        cf=$c
        break
    fi
done
if [ -z "$cf" ]; then
    echo "format-check: skipped: clang-format 14 is not installed (apt-get install clang-format-14)"
    exit 77
fi
files=$(git ls-files -co --exclude-standard '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
if [ "${1:-}" = --fix ]; then
    echo "$files" | xargs "$cf" -i
    exit 0
fi
bad=0
for f in $files; do
    if ! "$cf" "$f" | cmp -s "$f" -; then
        echo "format-check: $f differs from clang-format (scripts/format-check.sh --fix)"
        bad=1
    fi
done
exit $bad
