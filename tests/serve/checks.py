"""The serve scripts' one-line checks (stall.py, filters.py, compose.py): each
check prints "ok NAME" or "FAIL NAME DETAIL"; finish() prints the count and
exits non-zero after a failure."""
import sys

counts = {"passed": 0, "failed": 0}


def check(name, cond, detail=""):
    counts["passed" if cond else "failed"] += 1
    print("ok" if cond else "FAIL", name, "" if cond else detail, flush=True)


def failed():
    return counts["failed"]


def finish():
    print(f"{counts['passed']} passed, {counts['failed']} failed", flush=True)
    sys.exit(1 if counts["failed"] else 0)
