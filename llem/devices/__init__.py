"""The device layer: what llem measures energy on, below measurement.

Each device kind has its own modules here and is the only place that reads its vendor's
interface. Today this holds the CPU side: RAPL zones of Linux powercap (``powercap``: which
zones exist and what each covers, snapshots of their counters), the energy between snapshots
(``cpu_energy``) and which CPU packages the process may run on (``cpu_affinity``). The GPU
interface and its vendor modules (NVIDIA, AMD) are to join them; measurement asks this layer
and never reads vendor files itself.
"""
