"""A small classification service for the remote screener's tests, run as its own process:

    python3 tests/screening/classify_server.py      # prints "PORT n" (a port the OS picked)

``POST /classify`` answers as vLLM does for a two-class sequence classifier; ``POST
/v1/moderations`` as OpenAI's moderations API; ``POST /broken`` with a 500. A text is an
attack (0.97) if it holds ``XYZZY`` or ``ignore`` (any case), else benign (0.02); a text
holding ``SLOW`` makes the answer wait 2 s. ``GET /stats`` counts the calls and texts.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ATTACK = re.compile(r"xyzzy|ignore", re.I)
STATS = {"calls": 0, "texts": 0, "batches": []}
LOCK = threading.Lock()


def score(text: str) -> float:
    return 0.97 if ATTACK.search(text) else 0.02


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True      # head and body go out as two writes: no 40 ms delayed-ACK wait

    def log_message(self, *args) -> None:      # quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        with LOCK:
            self._send(200, STATS)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
        with LOCK:
            STATS["calls"] += 1
            STATS["texts"] += len(texts)
            STATS["batches"].append(len(texts))
        if any("SLOW" in t for t in texts):
            time.sleep(2)
        if self.path == "/broken":
            self._send(500, {"error": "model not loaded"})
        elif self.path == "/classify":
            self._send(200, {"id": "classify-1", "object": "list", "model": request.get("model", ""),
                             "data": [{"index": i, "label": "MALICIOUS" if score(t) > 0.5 else "BENIGN",
                                       "probs": [1 - score(t), score(t)], "num_classes": 2}
                                      for i, t in enumerate(texts)]})
        elif self.path == "/v1/moderations":
            self._send(200, {"id": "modr-1", "model": request.get("model", ""),
                             "results": [{"flagged": score(t) > 0.5,
                                          "categories": {"prompt_injection": score(t) > 0.5, "violence": False},
                                          "category_scores": {"prompt_injection": score(t), "violence": 0.01}}
                                         for t in texts]})
        else:
            self._send(404, {"error": "not found"})


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
