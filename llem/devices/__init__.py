"""The device layer: what llem measures energy on, below measurement.

Each device kind has its own modules here and is the only place that reads its vendor's
interface. GPUs: the protocols every vendor implements (``gpu``: ``GpuLibrary``, ``GpuReader``,
what a reading is in ``readings``), NVIDIA through NVML (``nvidia``, the only importer of
``pynvml``, with ``nvidia_reader`` and ``nvidia_control``), the vendor-free GPU control
(``gpu_control``) and the opener that picks the vendor (``gpus``). CPUs: RAPL zones of Linux
powercap (``powercap``: which zones exist and what each covers, snapshots of their counters), the
energy between snapshots (``cpu_energy``), what a package's die zones read, from the CPU's vendor
(``rapl_scope``), and which CPU packages the process may run on (``cpu_affinity``). The chassis
at the wall: the BMC's power reading through ipmitool or FreeIPMI (``bmc``) or its Redfish service
(``redfish``). Measurement asks this layer and never reads vendor files itself.

Imports llem.figures, llem.quality and below (today none of llem); writes GPU limits, clocks.
"""
