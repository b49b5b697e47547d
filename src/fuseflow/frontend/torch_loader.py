"""Load a PyTorch model class from a file for the CLI, with generated example inputs.

    >>> parse_input_spec("34x34:csr")
    ((34, 34), 'csr')
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import signal
import sys
import threading
import traceback
from pathlib import Path

from ..errors import FuseflowError, UserError
from .torch_import import trace_torch, user_line

LAYOUTS = ("dense", "csr", "csc", "coo")


def parse_input_spec(text: str) -> tuple[tuple[int, ...], str]:
    shape_text, _, layout = text.partition(":")
    layout = layout or "dense"
    if not re.fullmatch(r"\d+(x\d+)*", shape_text):
        raise UserError(f"input spec {text!r} has no shape like 34x16", "--input",
                        "write SHAPE[:LAYOUT], e.g. 34x34:csr")
    if layout not in LAYOUTS and not re.fullmatch(r"bsr\d+", layout):
        raise UserError(f"unknown layout {layout!r} in {text!r}", "--input",
                        "use dense, csr, csc, coo or bsrB (B = block size)")
    return tuple(int(d) for d in shape_text.split("x")), layout


def make_input(shape, layout: str, density: float, generator):
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    if layout == "dense":
        return torch.randn(shape, generator=generator)
    mask = torch.rand(shape, generator=generator) < density
    dense = torch.randn(shape, generator=generator) * mask
    if layout == "csr":
        return dense.to_sparse_csr()
    if layout == "csc":
        return dense.to_sparse_csc()
    if layout == "coo":
        return dense.to_sparse_coo()
    block = int(layout[3:])
    if len(shape) != 2 or shape[0] % block or shape[1] % block:
        raise UserError(f"shape {shape} is not a 2-d multiple of block {block}", "--input")
    return dense.to_sparse_bsr((block, block))


TIMEOUT = 600.0  # seconds for importing a model file, building its class and tracing forward() (--timeout)


class _Overran(BaseException):
    """The deadline passed while the user's code ran: raised in the main thread by SIGALRM (a
    BaseException, which the user's own `except Exception` does not swallow)."""

    def __init__(self, stack):
        super().__init__()
        self.stack = stack


class _UserFile:
    """The user's model file run under one deadline (`deadline`); each step that runs its code
    (`step`) reports an exit, an exception or the deadline as the user's error, one line naming
    the file and line."""

    def __init__(self, path: Path, timeout: float | None):
        self.path, self.timeout = path, timeout
        self.armed = False

    @contextlib.contextmanager
    def deadline(self):
        """SIGALRM after `timeout` seconds (only in the main thread, where Python delivers signals)."""
        if not self.timeout or threading.current_thread() is not threading.main_thread():
            yield
            return

        def overran(_signum, frame):
            if self.armed:
                raise _Overran(traceback.extract_stack(frame))

        previous = signal.signal(signal.SIGALRM, overran)
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, min(self.timeout, 1e9))  # longer: no deadline (31 years)
        try:
            yield
        except _Overran:  # in fuseflow's own steps between the user's
            raise UserError(f"loading {self.path} did not finish within {self.timeout:g} s", str(self.path),
                            "give --timeout more seconds") from None
        finally:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    @contextlib.contextmanager
    def step(self, what: str, exit_fix: str, theirs: bool = True):
        """Run `what` (e.g. "Net.__init__"): SystemExit and the deadline are reported as the
        user's; so is any other exception when the step is all `theirs` (not tracing, where
        `from_torch` tells the model's errors from fuseflow's)."""
        try:
            yield
        except FuseflowError:
            raise
        except SystemExit as done:
            raise UserError(f"{what} called sys.exit({done.code!r})", self._where(done.__traceback__),
                            exit_fix) from None
        except _Overran as late:
            where = user_line(late.stack, str(self.path))
            if where is None and what.endswith(".forward"):
                what = f"tracing {what.removesuffix('.forward')} (torch.export and torch-mlir)"
            raise UserError(f"{what} did not {'return' if where else 'finish'} within {self.timeout:g} s",
                            where or str(self.path),
                            "give --timeout more seconds if it is only slow" if where is None else
                            "make it return, or give --timeout more seconds if it is only slow") from None
        except Exception as err:
            if not theirs:
                raise
            first = (str(err).strip().splitlines() or [""])[0]
            raise UserError(f"{what} raised {type(err).__name__}" + (f": {first}" if first else ""),
                            self._where(err.__traceback__)) from None

    def _where(self, tb) -> str:
        return user_line(tb, str(self.path)) or str(self.path)


def _split_spec(spec: str) -> tuple[Path, str]:
    path_text, sep, class_name = spec.rpartition(":")
    if not sep or not path_text or not class_name:
        raise UserError(f"--torch {spec!r} is not FILE.py:CLASS", "command line")
    path = Path(path_text)
    if not path.is_file():
        raise UserError(f"no such Python file: {path}", "--torch")
    return path, class_name


def load_class(spec: str, user: _UserFile | None = None):
    """(the module of the file `spec` names, its class); `user` runs the import (its errors)."""
    path, class_name = _split_spec(spec)
    user = user or _UserFile(path, None)
    module_spec = importlib.util.spec_from_file_location(f"fuseflow_user_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    with user.step(f"importing {path.name}", 'keep script code under `if __name__ == "__main__":`'):
        module_spec.loader.exec_module(module)
    if not hasattr(module, class_name):
        raise UserError(f"{path} defines no {class_name}", str(path))
    return module, getattr(module, class_name)


def _init_arguments(init: str | None) -> dict:
    try:
        kwargs = json.loads(init) if init else {}
    except json.JSONDecodeError as err:
        raise UserError(f"--init is not JSON: {err}", "command line") from None
    if not isinstance(kwargs, dict):
        raise UserError("--init must be a JSON object of constructor arguments", "command line")
    return kwargs


def program_from_torch_spec(spec: str, inputs: list[str] | None, init: str | None, density: float,
                            seed: int, formats: dict, timeout: float | None = TIMEOUT):
    """The Program of the class `spec` (FILE.py:CLASS) names, traced on `inputs` (else the
    file's example_inputs()). Importing the file, building the class and tracing its forward()
    must end within `timeout` seconds; an exit, an exception in the file's own code or the
    deadline is the user's error (one line with the file and line)."""
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it
    import torch_mlir.fx  # noqa: F401, PLC0415 - imported before the deadline starts: it is not the model's time

    path, class_name = _split_spec(spec)
    kwargs = _init_arguments(init)
    user = _UserFile(path, timeout)
    with user.deadline():
        module, cls = load_class(spec, user)
        torch.manual_seed(seed)
        with user.step(f"{class_name}.__init__", "build the module without exiting (fuseflow constructs it)"):
            model = _construct(cls, kwargs, spec, path)
        generator = torch.Generator().manual_seed(seed)
        if inputs:
            examples = [make_input(*parse_input_spec(text), density, generator) for text in inputs]
        elif hasattr(module, "example_inputs"):
            with user.step("example_inputs()", "return the example inputs without exiting"):
                examples = list(module.example_inputs())
        else:
            raise UserError(f"no example inputs for {cls.__name__}", spec,
                            "give --input SHAPE[:LAYOUT] per forward() argument or define example_inputs()")
        with user.step(f"{class_name}.forward", "return the result without exiting (fuseflow runs forward() to "
                       "trace it)", theirs=False):
            traced = trace_torch(model, *examples, formats=formats)
    return traced.program()


def _construct(cls, kwargs: dict, spec: str, path: Path):
    """`cls(**kwargs)`; arguments that do not fit its signature are a one-line error with a fix."""
    try:
        return cls(**kwargs)
    except TypeError as err:
        if user_line(err.__traceback__, str(path)) is not None:
            raise  # raised by the class's own code
        raise UserError(f"constructing {cls.__name__} failed: {err}", spec, "pass arguments with --init") from None
