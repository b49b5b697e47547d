"""What the measurements say: the cost model against them and the fitted device file
(`model_check`), the measured section of docs/gpu.md (`measured_section`), and bytes and counts
written for the command line (`units`).

    >>> from fuseflow.gpu.readout.units import fmt_bytes
    >>> fmt_bytes(2048)
    '2.00KiB'
"""
