"""Test reward: uses the row's fields (kwargs) as the original's runner passes them."""
import os
import sys

import helper_mod  # found because the task folder is on sys.path, as in the original

CALLS = []  # module state survives between calls: the worker is resident


def compute_score(agent_answer: str, ground_truth: str, **kwargs) -> float:
    CALLS.append(kwargs.get("id"))
    print("scoring", kwargs.get("id"), "call", len(CALLS))  # must not corrupt the protocol
    os.write(1, b"raw write to fd 1\n")
    if "ground_truth" in kwargs:
        raise AssertionError("ground_truth must not be in kwargs")
    if ground_truth == "raise":
        raise ValueError("cannot score row %s" % kwargs["id"])
    if ground_truth == "crash":
        sys.stderr.write("about to crash hard\n")
        sys.stderr.flush()
        os._exit(3)
    if ground_truth == "calls":
        return float(len(CALLS))
    if kwargs.get("domain") == "arith":
        try:
            return 1.0 if abs(float(agent_answer) - float(ground_truth)) <= kwargs.get("tolerance", 0) else 0.0
        except ValueError:
            return 0.0
    if ground_truth == "text":
        return "not a number"
    return helper_mod.same(agent_answer, ground_truth)
