#!/usr/bin/env python3
"""strict_json.py DIR... - every .json and .jsonl file below each DIR (and
each .html report's bytes) decoded as strict UTF-8 and parsed by Python's json
module; prints how many, and one line per file that fails. Exit 1 on any
failure or when no JSON file was found (tests/test_batch_utf8.c)."""
import json
import os
import sys

parsed, bad = 0, []
for root in sys.argv[1:]:
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if not name.endswith((".json", ".jsonl", ".html")):
                continue
            try:
                with open(path, encoding="utf-8", errors="strict") as f:
                    text = f.read()
                if name.endswith(".jsonl"):
                    for line in text.splitlines():
                        if line.strip():
                            json.loads(line)
                elif name.endswith(".json"):
                    json.loads(text)
                parsed += 1
            except (UnicodeDecodeError, ValueError) as e:
                bad.append("%s: %s" % (path, e))
print("parsed %d" % parsed)
for b in bad:
    print("BAD " + b)
sys.exit(1 if bad or not parsed else 0)
