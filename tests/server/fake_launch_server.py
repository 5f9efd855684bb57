"""A server command for the launch tests (run as a script): becomes ready after a delay.

usage: fake_launch_server.py PORT DELAY_S MODE PIDFILE
MODE: "ok"; "exit" (prints to the log, exits 3 before it is ready); "never" (never listens);
"ignore_term" (it and its child ignore SIGTERM). It starts a child process (a stand-in for an
engine's worker) and writes both pids to PIDFILE.
"""

from __future__ import annotations

import http.server
import json
import signal
import subprocess
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        answers: dict[str, object] = {"/v1/models": {"data": [{"id": "m"}]}}
        if MODE != "noversion":  # a server that reports no version (llama-cpp-python's)
            answers["/version"] = {"version": "9.9.9"}
        if self.path not in answers:
            self.send_error(404)
            return
        body = json.dumps(answers[self.path]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


MODE = sys.argv[3] if len(sys.argv) > 3 else "ok"


def main() -> None:
    port, delay_s, mode, pidfile = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
    if mode == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child_code = "import signal, time\n"
    if mode == "ignore_term":
        child_code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    child = subprocess.Popen([sys.executable, "-c", child_code + "time.sleep(3600)"])
    with open(pidfile, "w") as f:
        f.write(f"{child.pid}\n")
    print(f"fake server starting on {port}", flush=True)
    time.sleep(delay_s)
    if mode == "exit":
        print("fatal: planted failure before ready", flush=True)
        sys.exit(3)
    if mode == "never":
        time.sleep(3600)
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
