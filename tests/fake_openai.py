"""A local OpenAI-compatible chat-completions server for tests, with switchable misbehaviour.

Image-tagging requests (structured output named "image_tags") are answered from the image; every other request
from `answer`, then `text_replies` in order, then `text_reply`."""
from __future__ import annotations

import base64
import io
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from PIL import Image

MODES = ("ok", "flaky", "junk", "deep", "huge", "truncated", "empty", "refusal", "wrong_types", "bad_tag",
         "http500", "slow", "bad_key", "echo")
DEEP = '{"color": ' + "[" * 100_000 + "]" * 100_000 + "}"  # JSON nested 100,000 deep


def images_of(body: dict) -> list[Image.Image]:
    """The images sent in a request's user messages."""
    found = []
    for message in body["messages"]:
        if message["role"] == "user" and isinstance(message["content"], list):
            for part in message["content"]:
                if part["type"] == "image_url":
                    found.append(Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))))
    return found


def colour_of(image: Image.Image) -> str:
    """What a sensible model would say: the strongest channel of the pixels that are not near-white."""
    pixels = np.asarray(image.convert("RGB"), dtype=float).reshape(-1, 3)
    coloured = pixels[pixels.min(axis=1) < 200]
    return ("red", "green", "blue")[int(np.argmax((coloured if len(coloured) else pixels).mean(axis=0)))]


class FakeOpenAIServer:
    """Start with `with FakeOpenAIServer() as server:`; point the client at server.url; set server.mode."""

    def __init__(self, mode: str = "ok", delay_s: float = 0.0):
        self.mode, self.delay_s = mode, delay_s
        self.requests: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self.fail_after: int | None = None  # answer this many requests well, then HTTP 500
        self.text_reply = "{}"  # the answer to requests without an image
        self.text_replies: list = []  # answered first, in order; a dict {"refusal": ...} is a refusal
        self.answer = None  # optional function(request body) -> reply for requests other than image tagging
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    number = len(server.requests)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.mode == "echo":  # a careless server: its error repeats the request's path and headers
                        status, payload = 401, {"error": {"message": f"refused {self.path} sent with "
                                                                     f"{dict(self.headers.items())}",
                                                          "type": "invalid_request_error"}}
                    elif server.mode == "bad_key":  # as hosted APIs do: the refused key is echoed back in the message
                        key = self.headers.get("Authorization", "").split()[-1]
                        status, payload = 401, {"error": {"message": f"Incorrect API key provided: {key}",
                                                          "type": "invalid_request_error"}}
                    else:
                        status, payload = (server.image_reply(body, number)
                                           if self.path.endswith("/images/generations") else server.reply(body, number))
                finally:
                    with server._lock:
                        server.in_flight -= 1
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def image_reply(self, body: dict, number: int) -> tuple[int, dict]:
        """The images API: a flat image in the first colour word of the prompt (grey without one)."""
        if self.mode == "http500":
            return 500, {"error": {"message": "model crashed", "type": "server_error"}}
        words = re.findall(r"[a-z]+", body["prompt"].lower())
        colour = next((w for w in words if w in ("red", "green", "blue")), None)
        fill = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}.get(colour, (128, 128, 128))
        buffer = io.BytesIO()
        Image.new("RGB", (32, 32), fill).save(buffer, format="PNG")
        return 200, {"created": number, "data": [{"b64_json": base64.b64encode(buffer.getvalue()).decode("ascii")}]}

    def reply(self, body: dict, number: int) -> tuple[int, dict]:
        time.sleep(self.delay_s)
        if self.mode == "slow":
            time.sleep(3)
        if self.mode == "http500" or (self.fail_after is not None and number > self.fail_after):
            return 500, {"error": {"message": "model crashed", "type": "server_error"}}
        user = next(m for m in body["messages"] if m["role"] == "user")["content"]
        if ((body.get("response_format") or {}).get("json_schema") or {}).get("name") != "image_tags":
            reply = self.answer(body) if self.answer else None
            if reply is None:
                with self._lock:
                    reply = self.text_replies.pop(0) if self.text_replies else self.text_reply
            if isinstance(reply, dict):
                completion = self._completion(body, number, None)
                completion["choices"][0]["message"]["refusal"] = reply["refusal"]
                return 200, completion
            return 200, self._completion(body, number, reply)
        prompt = next(part["text"] for part in user if part["type"] == "text")
        image_url = next(part["image_url"]["url"] for part in user if part["type"] == "image_url")
        image = Image.open(io.BytesIO(base64.b64decode(image_url.split(",", 1)[1])))
        attributes = {name: json.loads(tags) for name, tags in re.findall(r'- "([^"]+)": one of (\[.*\])', prompt)}
        answer = {name: (colour_of(image) if name == "color" and colour_of(image) in tags else tags[0])
                  for name, tags in attributes.items()}
        retried = any(m["role"] == "assistant" for m in body["messages"])
        if self.mode == "junk" or (self.mode == "flaky" and not retried):
            content = "Sure! The shape looks red-ish, I think {maybe"
        elif self.mode == "deep":
            content = DEEP
        elif self.mode == "huge":
            content = json.dumps({**answer, "color": "red" * 400_000})  # a 1.2 MB tag
        elif self.mode == "truncated":
            content = json.dumps(answer)[:-3]
        elif self.mode == "empty":
            content = ""
        elif self.mode == "wrong_types":
            content = json.dumps({name: [1, 2] for name in answer})
        elif self.mode == "refusal":
            completion = self._completion(body, number, None)
            completion["choices"][0]["message"]["refusal"] = "I can't help with that."
            return 200, completion
        elif self.mode == "bad_tag":
            content = json.dumps({**answer, "color": "ultraviolet"})
        else:
            content = "```json\n" + json.dumps(answer) + "\n```"
        return 200, self._completion(body, number, content)

    @staticmethod
    def _completion(body: dict, number: int, content: str | None) -> dict:
        return {"id": f"c{number}", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
