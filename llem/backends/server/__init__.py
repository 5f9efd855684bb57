"""``+backend=server``: any OpenAI-compatible server, launched by llem or already running.

``client`` sends and streams the requests (``drive``'s submit), ``metrics`` scrapes the server's
Prometheus ``/metrics`` during the window, ``launch`` starts and stops a server process group.
"""
