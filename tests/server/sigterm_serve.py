"""Serving through ``watch.serve_watched`` against the fake server (slow chunks), run as a script
by the interrupt tests: it writes MARKER once the requests are in flight, and waits for SIGTERM.

usage: python -m tests.server.sigterm_serve MARKER   (the checkout on PYTHONPATH)
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from llem.backends.server.client import ClientConfig
from llem.backends.server.watch import serve_watched
from llem.vocabulary.workload import Prompt, ScheduledRequest
from tests.server.fake_openai import MODEL, Plan
from tests.server.fake_thread import fake_in_thread


def main() -> None:
    marker = Path(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(99))  # the run's own handler, kept
    plan = Plan(chunks=[(5.0, "a", None)] * 20)  # 100 s a request: still in flight at SIGTERM
    requests = [ScheduledRequest(i, i, Prompt(token_ids=(1, 2)), 0.0) for i in range(50)]
    with fake_in_thread(plan) as url:
        config = ClientConfig(base_url=url, model=MODEL, max_tokens=20)
        threading.Timer(1.0, lambda: marker.write_text("serving")).start()
        try:
            serve_watched(requests, None, config)
        finally:
            # the handler in place before the loop is back
            print("handler restored:", signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL)
            time.sleep(0.1)


if __name__ == "__main__":
    main()
