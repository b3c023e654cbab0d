"""Exception -> verdict for the weak-ref capture repro. Needs no torch.

Exit 1 only for the four signatures of the weak-ref capture failure; every other
exception, out-of-memory and import errors included, is 125 (cannot test), so an
unrelated crash is never reported as the failure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

WORKS, FAILURE, CANNOT_TEST = 0, 1, 125

DATA_POINTER = "data-pointer-mismatch"
OFF_GPU = "weak-ref-off-gpu"
NUMERICS = "replay-numerics-mismatch"
ILLEGAL_ACCESS = "illegal-memory-access"

# (signature, pattern) for exit 1, most specific first.
_FAILURES = [
    (DATA_POINTER, re.compile(r"data[ _-]?pointer mismatch", re.I)),
    (OFF_GPU, re.compile(r"weak[ _-]?ref\w*\b.*\b(cpu|host)\b|"
                         r"weak[ _-]?ref\w*\b.*\b(off|not on) (the )?(gpu|cuda)", re.I | re.S)),
    (NUMERICS, re.compile(r"^(?=.*\breplay)(?=.*\beager\b)"
                          r"(?=.*(differ|mismatch|not close|diverg))", re.I | re.S)),
    (ILLEGAL_ACCESS, re.compile(r"illegal memory access|cudaErrorIllegalAddress|"
                                r"CUDA_ERROR_ILLEGAL_ADDRESS", re.I)),
]
_OOM = re.compile(r"out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation", re.I)
_NO_CUDA = re.compile(r"no CUDA (device|GPUs?)|Found no NVIDIA driver|"
                      r"Torch not compiled with CUDA enabled|CUDA driver initialization failed|"
                      r"no kernel image is available", re.I)


@dataclass(frozen=True)
class Diagnosis:
    """What one run of the repro found: its exit code (the verdict), the failure's
    signature, and the reason in words."""

    exit_code: int
    signature: str | None
    reason: str

    @property
    def name(self) -> str:
        return {WORKS: "works", FAILURE: "failure"}.get(self.exit_code, "cannot-test")


def works() -> Diagnosis:
    return Diagnosis(WORKS, None, "graph replay matched eager on every step")


def cannot_test(reason: str) -> Diagnosis:
    return Diagnosis(CANNOT_TEST, None, reason)


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _message(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    return text if cause is None or cause is exc else f"{text} (from {_message(cause)})"


def classify(exc: BaseException) -> Diagnosis:
    """The verdict for an exception raised anywhere in the repro."""
    text = _message(exc)
    short = text if len(text) <= 300 else text[:297] + "..."
    names = _names(exc)
    if names & {"KeyboardInterrupt", "SystemExit"}:
        return cannot_test(f"interrupted: {short}")
    if names & {"ImportError", "ModuleNotFoundError"}:
        return cannot_test(f"import error: {short}")
    for signature, pattern in _FAILURES:
        if pattern.search(text):
            return Diagnosis(FAILURE, signature, short)
    if "OutOfMemoryError" in names or _OOM.search(text):
        return cannot_test(f"out of memory: {short}")
    if _NO_CUDA.search(text):
        return cannot_test(f"no CUDA device: {short}")
    return cannot_test(f"unrelated error: {short}")
