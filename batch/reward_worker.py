# reward_worker.py - lis's resident scorer for a task's own reward.py
# (standard library only, python3 >= 3.9). Embedded in liblis-agent.so and
# run as: python3 -c <this> TASK_DIR
#
# It imports TASK_DIR/reward.py (and vanilla_llm_prompt.py when present)
# once, as the original's runner does (importlib spec_from_file_location,
# TASK_DIR first on sys.path), then answers one JSON request per line on
# stdin with one JSON line on fd 3:
#   {"op":"score","answer":A,"ground_truth":G,"row":{...}}
#        -> {"score":x} | {"error":"ExcType: msg"}
#        compute_score(A, G, **row), row without ground_truth
#   {"op":"prompt","row":{...}} -> {"prompt":"..."} | {"error":...}
#        create_prompt(row), else row["problem_statement"]
# First line on fd 3, after the imports: {"ready":true,"score":bool,"prompt":bool}
# or {"error":...} (then it exits). Anything the task's code prints goes to
# stderr (fd 1 is pointed there too), never into the replies.
import importlib.util
import json
import math
import os
import sys
import traceback


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def describe(exc):
    msg = str(exc).strip().splitlines()
    text = "%s: %s" % (type(exc).__name__, msg[-1] if msg else "")
    # an ImportError raised over another (the original math/reward.py's
    # "math-verify is required"): name the import that failed too
    inner = exc.__cause__ or exc.__context__
    if isinstance(exc, ImportError) and isinstance(inner, ImportError):
        text += " (%s: %s)" % (type(inner).__name__, str(inner).strip())
    return text


def main():
    reply = os.fdopen(3, "w", encoding="utf-8")
    os.dup2(2, 1)  # C-level and subprocess output of the task's code
    sys.stdout = sys.stderr

    def send(obj):
        reply.write(json.dumps(obj) + "\n")
        reply.flush()

    task_dir = os.path.abspath(sys.argv[1])
    sys.path.insert(0, task_dir)
    if sys.path[1:2] == [""]:
        del sys.path[1]  # not the caller's working directory
    compute_score = create_prompt = None
    try:
        reward_py = os.path.join(task_dir, "reward.py")
        if os.path.exists(reward_py):
            compute_score = getattr(load(reward_py, "reward"), "compute_score", None)
            if compute_score is None:
                raise AttributeError("reward.py must define compute_score function")
        prompt_py = os.path.join(task_dir, "vanilla_llm_prompt.py")
        if os.path.exists(prompt_py):
            create_prompt = getattr(load(prompt_py, "vanilla_llm_prompt"), "create_prompt", None)
    except BaseException as e:  # an import error is the scorer's, not ours
        traceback.print_exc()
        send({"error": describe(e)})
        return 1
    send({"ready": True, "score": compute_score is not None, "prompt": create_prompt is not None})

    stdin = sys.stdin.buffer
    for line in stdin:
        try:
            req = json.loads(line.decode("utf-8", "replace"))
            row = req.get("row") or {}
            if req.get("op") == "score":
                if compute_score is None:
                    raise RuntimeError("the task has no reward.py")
                kwargs = {k: v for k, v in row.items() if k != "ground_truth"}
                x = compute_score(req.get("answer", ""), req.get("ground_truth"), **kwargs)
                try:
                    x = float(x)
                except (TypeError, ValueError):
                    raise TypeError("compute_score returned %s, not a number" % type(x).__name__)
                if math.isnan(x) or math.isinf(x):
                    raise ValueError("compute_score returned %r" % x)
                send({"score": x})
            elif req.get("op") == "prompt":
                if create_prompt is not None:
                    text = create_prompt(row)
                else:
                    text = row["problem_statement"]
                send({"prompt": str(text)})
            else:
                send({"error": "ValueError: unknown op %r" % req.get("op")})
        except Exception as e:
            traceback.print_exc()
            send({"error": describe(e)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
