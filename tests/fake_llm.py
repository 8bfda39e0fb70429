#!/usr/bin/env python3
"""A fake OpenAI-compatible (or Anthropic) chat server for the agent tests.

usage: fake_llm.py SCRIPT.json [REQUEST_LOG]

Binds 127.0.0.1 on a free port and prints the port on the first line of
stdout. Every POST consumes the next entry of the script's "replies" list;
every request body is appended as one JSON line to REQUEST_LOG (with its
Authorization header and how many requests were being answered at once,
"inflight"). When the replies run out, it answers with a submit call.

Script: {"mode": "openai" | "anthropic", "replies": [ENTRY, ...]}
ENTRY keys (all optional):
  content      assistant text
  reasoning    reasoning_content (OpenAI) / a thinking block (Anthropic)
  calls        [[name, args], ...]  args: a dict (JSON-encoded) or a raw string
  usage        [prompt_tokens, completion_tokens]
  stream       true: send as SSE chunks (OpenAI mode), tool-call arguments split
  reset_after  with stream: send N chunks, then drop the connection
  status       HTTP status (default 200); with body: that JSON as the reply
  body         a raw JSON reply body
  headers      extra response headers
  hang         never answer (sleep this many seconds)
  endless      with stream: after the role chunk, content chunks of this many
               bytes forever, until the client hangs up (a runaway endpoint)
  drift        with token mode: this turn's prompt renders the earlier assistant
               messages without their <think>...</think> block (as templates that
               drop earlier reasoning do), so its prompt ids no longer start with
               the previous turn's prompt + completion ids

Token mode (vLLM's token pass-through): a plain (not streamed) OpenAI reply to a
request whose body has "return_token_ids": true carries top-level
"prompt_token_ids" and "choices"[0]["token_ids"], and with "logprobs": true also
"choices"[0]["logprobs"]["content"] with one {"token", "logprob"} per id. The ids
come from a toy tokenizer (one id per UTF-8 byte: TOKEN_BASE + the byte) over a
toy chat template that renders the whole request: each message as
<|ROLE|>CONTENT<|end|>, an assistant message as
<|assistant|><think>REASONING</think>CONTENT<tool_call>{"name","arguments"}</tool_call>...<|end|>,
then the generation prompt <|assistant|>. The completion ids are the rendering of
the assistant message sent (after <|assistant|>), exactly as the next request
renders it when lis puts it back into the history unchanged: so turn t's prompt
ids start with turn t-1's prompt ids + completion ids unless the history changed.
The request log's records carry the body's "seed" beside the whole body.

Conversation mode (lis batch: many episodes at once, in any order): with
"rows": {MARKER: [ENTRY, ...]} a request is matched to the first MARKER found
in its first user message, else to "default": [ENTRY, ...] (top-level, or a
"default" key of "rows"); the entry is
chosen by the number of assistant messages in the request (its step), so
replies do not depend on arrival order. With "seeds": {SEED: [ENTRY, ...]} a
request whose body has that "seed" gets those entries instead (one episode of
a group that differs, e.g. a straggler). Extra ENTRY keys there:
  fail         answer the first N requests of this step with fail_status
               (default 500) and fail_headers, then the entry
  latency      seconds to wait before answering (also a top-level default)
Only the standard library is used.
"""
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

script = json.load(open(sys.argv[1]))
log_path = sys.argv[2] if len(sys.argv) > 2 else None
mode = script.get("mode", "openai")
replies = script.get("replies", [])
lock = threading.Lock()
state = {"i": 0}


fails = {}


def first_user_text(req):
    for m in req.get("messages", []):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return " ".join(b.get("text", "") for b in c if isinstance(b, dict))
            return c or ""
    return ""


def conv_entry(req):
    text = first_user_text(req)
    step = sum(1 for m in req.get("messages", []) if m.get("role") == "assistant")
    marker, entries = None, script.get("default", script["rows"].get("default", []))
    for mk, ents in script["rows"].items():
        if mk in text:
            marker, entries = mk, ents
            break
    seeded = script.get("seeds", {}).get(str(req.get("seed")))
    if seeded is not None:
        marker, entries = "seed:%s" % req.get("seed"), seeded
    e = entries[step] if step < len(entries) else {"calls": [["submit", {}]]}
    if e.get("fail"):
        with lock:
            k = (marker, step)
            n = fails.get(k, 0)
            if n < e["fail"]:
                fails[k] = n + 1
                return step, {"status": e.get("fail_status", 500),
                              "headers": e.get("fail_headers", {}),
                              "body": {"error": {"message": "injected failure %d" % (n + 1)}}}
    return step, e


def next_entry():
    with lock:
        i = state["i"]
        state["i"] += 1
    if i < len(replies):
        return i, replies[i]
    return i, {"calls": [["submit", {}]]}


def arg_text(a):
    return a if isinstance(a, str) else json.dumps(a)


def openai_message(e, i):
    msg = {"role": "assistant", "content": e.get("content")}
    if e.get("reasoning"):
        msg["reasoning_content"] = e["reasoning"]
    calls = e.get("calls") or []
    if calls:
        msg["tool_calls"] = [
            {"id": "call_%d_%d" % (i, k), "type": "function",
             "function": {"name": c[0], "arguments": arg_text(c[1])}}
            for k, c in enumerate(calls)]
    return msg


def usage_of(e):
    u = e.get("usage", [100, 10])
    return {"prompt_tokens": u[0], "completion_tokens": u[1], "total_tokens": u[0] + u[1]}


TOKEN_BASE = 1000  # toy token ids: TOKEN_BASE + each UTF-8 byte


def toy_ids(text):
    return [TOKEN_BASE + b for b in text.encode()]


def text_of(content):
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content or ""


def render_assistant(m, think=True):
    """An assistant message after its <|assistant|>, up to its <|end|>."""
    s = ""
    if think:
        s += "<think>" + (m.get("reasoning_content") or m.get("reasoning") or "") + "</think>"
    s += text_of(m.get("content"))
    for tc in m.get("tool_calls") or []:
        f = tc.get("function") or {}
        s += "<tool_call>" + json.dumps({"name": f.get("name"), "arguments": f.get("arguments")}) \
            + "</tool_call>"
    return s + "<|end|>"


def render_prompt(msgs, drift):
    out = ""
    for m in msgs:
        role = m.get("role", "")
        out += "<|%s|>" % role
        if role == "assistant":
            out += render_assistant(m, think=not drift)
        else:
            out += text_of(m.get("content")) + "<|end|>"
    return out + "<|assistant|>"


def openai_body(e, i, req=None):
    msg = openai_message(e, i)
    out = {"id": "chatcmpl-%d" % i, "object": "chat.completion", "model": "fake",
           "choices": [{"index": 0, "message": msg,
                        "finish_reason": "tool_calls" if e.get("calls") else "stop"}],
           "usage": usage_of(e)}
    if req and req.get("return_token_ids") is True:
        ids = toy_ids(render_assistant(msg))
        out["prompt_token_ids"] = toy_ids(render_prompt(req.get("messages", []),
                                                        e.get("drift")))
        out["choices"][0]["token_ids"] = ids
        if req.get("logprobs") is True:
            out["choices"][0]["logprobs"] = {"content": [
                {"token": "token_id:%d" % t, "logprob": -0.25 * (1 + k % 4)}
                for k, t in enumerate(ids)]}
    return out


def openai_chunks(e, i):
    def chunk(delta, finish=None):
        return {"id": "chatcmpl-%d" % i, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    out = [chunk({"role": "assistant"})]
    if e.get("reasoning"):
        r = e["reasoning"]
        out += [chunk({"reasoning_content": r[:len(r) // 2]}),
                chunk({"reasoning_content": r[len(r) // 2:]})]
    if e.get("content"):
        c = e["content"]
        out += [chunk({"content": c[:len(c) // 2]}), chunk({"content": c[len(c) // 2:]})]
    for k, c in enumerate(e.get("calls") or []):
        a = arg_text(c[1])
        out.append(chunk({"tool_calls": [{"index": k, "id": "call_%d_%d" % (i, k),
                                          "type": "function",
                                          "function": {"name": c[0], "arguments": ""}}]}))
        for j in range(0, len(a), 7):
            out.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": a[j:j + 7]}}]}))
    out.append(chunk({}, "tool_calls" if e.get("calls") else "stop"))
    last = {"id": "chatcmpl-%d" % i, "object": "chat.completion.chunk", "choices": [],
            "usage": usage_of(e)}
    out.append(last)
    return out


def anthropic_body(e, i):
    content = []
    if e.get("reasoning"):
        content.append({"type": "thinking", "thinking": e["reasoning"], "signature": "sig"})
    if e.get("content"):
        content.append({"type": "text", "text": e["content"]})
    for k, c in enumerate(e.get("calls") or []):
        args = c[1] if isinstance(c[1], dict) else {}
        content.append({"type": "tool_use", "id": "toolu_%d_%d" % (i, k), "name": c[0],
                        "input": args})
    u = e.get("usage", [100, 10])
    return {"id": "msg_%d" % i, "type": "message", "role": "assistant", "content": content,
            "stop_reason": "tool_use" if e.get("calls") else "end_turn",
            "usage": {"input_tokens": u[0], "output_tokens": u[1]}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        with lock:  # requests being answered right now, logged with each request
            state["inflight"] = state.get("inflight", 0) + 1
            self.inflight = state["inflight"]
        try:
            self.answer()
        finally:
            with lock:
                state["inflight"] -= 1

    def answer(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        req = json.loads(body or b"{}")
        if "rows" in script:
            i, e = conv_entry(req)
        else:
            i, e = next_entry()
        lat = e.get("latency", script.get("latency"))
        if lat:
            time.sleep(lat)
        if log_path:
            with lock, open(log_path, "a") as f:
                rec = {"path": self.path, "auth": self.headers.get("Authorization"),
                       "x_api_key": self.headers.get("x-api-key"), "inflight": self.inflight,
                       "seed": req.get("seed"), "body": req}
                f.write(json.dumps(rec) + "\n")
        if e.get("hang"):
            time.sleep(e["hang"])
            return
        status = e.get("status", 200)
        headers = e.get("headers", {})
        if e.get("stream") and status == 200:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if e.get("endless"):
                piece = json.dumps({"id": "chatcmpl-%d" % i, "object": "chat.completion.chunk",
                                    "choices": [{"index": 0, "delta": {
                                        "content": "x" * int(e["endless"])}}]})
                block = (b"data: " + piece.encode() + b"\n\n") * 64
                try:
                    while True:
                        self.wfile.write(block)
                except OSError:
                    pass
                self.close_connection = True
                return
            chunks = openai_chunks(e, i)
            limit = e.get("reset_after")
            for k, c in enumerate(chunks):
                if limit is not None and k >= limit:
                    self.wfile.flush()
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.connection.close()
                    return
                self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
            return
        if "body" in e:
            out = e["body"]
        elif mode == "anthropic":
            out = anthropic_body(e, i)
        else:
            out = openai_body(e, i, req)
        data = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


ThreadingHTTPServer.request_queue_size = 4096  # hundreds of clients connect at once
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
