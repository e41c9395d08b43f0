"""A tiny OpenAI-compatible chat-completions server for the agent demo (loopback only).

It plays a fixed two-step script with real server-sent events: first a tool call
(convert_length), then, once a tool result is in the conversation, an answer quoting it.

    python3 tests/fake_model.py 8766
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def chunk(delta, finish=None):
    return {"id": "chatcmpl-demo", "object": "chat.completion.chunk", "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def usage(prompt, completion):
    return {"id": "chatcmpl-demo", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(min(length, 1 << 20)))
        results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
        if not results:
            args = '{"value": 3, "from": "mile", "to": "kilometre"}'
            events = [chunk({"role": "assistant", "content": None}),
                      chunk({"tool_calls": [{"index": 0, "id": "call_demo_1", "type": "function",
                                             "function": {"name": "convert_length", "arguments": ""}}]})]
            events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 8]}}]})
                       for i in range(0, len(args), 8)]
            events += [chunk({}, "tool_calls"), usage(182, 31)]
        else:
            text = results[-1]["content"].split("\n")[1]
            words = f"3 miles is {text} kilometres.".split(" ")
            events = [chunk({"content": w + (" " if i < len(words) - 1 else "")})
                      for i, w in enumerate(words)]
            events += [chunk({}, "stop"), usage(240, 12)]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for e in events:
            self.wfile.write(f"data: {json.dumps(e)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
