"""Traffic for serving workloads: when each request is sent (``schedule``), and the one driver
both engines use to send them (``driver``)."""
