"""numpy runs that check a plan without a GPU: the plan tile by tile, counting the bytes each level
moves (`plan_emulator`), and the generated kernel's layout block by block (`kernel_emulator`).

    >>> from fuseflow.gpu.emulation.plan_emulator import CheckError
    >>> issubclass(CheckError, Exception)
    True
"""
