"""Lab checker of chapter 5's tensor-core exercise: a WMMA matmul the learner completes.

The kernel runs on the CPU emulator (WMMA m16n16k16, a fragment owned by its whole warp) in a
child process, under race_check, at shapes that are multiples of 16 but not square; a wrong
result is compared with the answers of the usual mistakes (B's layout or ldm, the
accumulator refilled in the loop, C stored column-major, a tile index swapped) to name
the mistake.
"""
from __future__ import annotations

import numpy as np

from .. import precision
from ..emulator.source import strip_comments
from ..kernels import wmma_matmul as wmma_cu
from .compare import assert_close, random_array
from .lab import Exercise, learner_kernel, run_learner_kernel, text_answer

WMMA_KERNEL = "wmma_matmul"
# (M, N, K): one tile, then tiles that are not square and counts that are not powers of 2.
WMMA_SHAPES = ((16, 16, 16), (32, 48, 16), (48, 32, 64), (16, 80, 48), (64, 16, 32))


def wmma_launch(M: int, N: int):
    """The launch the exercise asks for: one warp per 16×16 tile of C, 4 warps per block."""
    return wmma_cu.launch_config(wmma_cu.VERSIONS[0], M, N)


def _tilewise(M, N, fn) -> np.ndarray:
    out = np.zeros((M, N))
    for r in range(0, M, 16):
        for c in range(0, N, 16):
            out[r:r + 16, c:c + 16] = fn(r, c)
    return out


def _mistakes(A: np.ndarray, B: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """(the result, what went wrong) of the usual mistakes, for A (M×K) and B (K×N)."""
    M, K = A.shape
    N = B.shape[1]
    a, b = A.astype(np.float64), B.astype(np.float64)
    out = []
    if K % 16 == 0:  # only the last k-step survives: the accumulator refilled inside the loop
        out.append((a[:, K - 16:] @ b[K - 16:, :],
                    "C holds the product of the last 16 columns of A only: fill the accumulator "
                    "with 0 once, before the loop over k, and pass it as both c and d of "
                    "wmma::mma_sync so that every k-step adds to it."))
        out.append((a[:, :16] @ b[:16, :],
                    "C holds the product of the first 16 columns of A only: step k by 16 up to K "
                    "and load the A fragment at column k and the B fragment at row k."))
    # B read as column-major: each 16×16 tile of B transposed
    out.append((_tilewise(M, N, lambda r, c: sum(a[r:r + 16, k:k + 16] @ b[k:k + 16, c:c + 16].T
                                                 for k in range(0, K, 16))),
                "B is row-major (K×N): declare its fragment wmma::row_major and load it with "
                "ldm = N."))
    out.append((_tilewise(M, N, lambda r, c: sum(a[r:r + 16, k:k + 16].T @ b[k:k + 16, c:c + 16]
                                                 for k in range(0, K, 16))),
                "A is row-major (M×K): declare its fragment wmma::row_major and load it with "
                "ldm = K."))
    out.append((_tilewise(M, N, lambda r, c: (a[r:r + 16] @ b[:, c:c + 16]).T),
                "each 16×16 tile of C is transposed: store it with wmma::mem_row_major and "
                "ldm = N."))
    return out


def _diagnose(C: np.ndarray, A, B, atol: float) -> str:
    """The hint for a wrong C: the mistake whose answer C is, or what the NaN says."""
    for answer, hint in _mistakes(A, B):
        if answer.shape == C.shape and np.all(np.abs(C - answer) <= 2 * atol + 1e-6):
            return hint
    if np.isnan(C).any():
        rows, cols = np.nonzero(np.isnan(C))
        return (f"C[{rows[0]}][{cols[0]}] was never written: warp w (counting the warps of the "
                f"whole grid) owns tile (w / (N / 16), w % (N / 16)) and every warp with a tile "
                f"stores it (the launch has {wmma_cu.WARPS_PER_BLOCK} warps per block).")
    return ("check which tile each warp owns (row = (w / (N / 16)) * 16, col = (w % (N / 16)) * "
            "16) and the pointers: A + row * K + k, B + k * N + col, C + row * N + col.")


def check_wmma_matmul(source: str, number: str = "5.5",
                      title: str = "a tensor-core matmul with WMMA", seed: int = 55) -> None:
    """``wmma_matmul(A, B, C, M, N, K)``: A (M×K) and B (K×N) half, row-major; C float; one warp
    per 16×16 tile of C, launched as :func:`wmma_launch` says; M, N, K multiples of 16."""
    with Exercise(number, title):
        text_answer(source, "the source you passed is", "pass your kernel's CUDA C source as a string")
        code = strip_comments(source, blank_strings=True)
        if "mma_sync" not in code or "load_matrix_sync" not in code:
            raise AssertionError("multiply on the tensor cores: load fragments with "
                                 "wmma::load_matrix_sync, multiply-add them with wmma::mma_sync "
                                 "and store the accumulator with wmma::store_matrix_sync.")
        kern = learner_kernel(source, "wmma_matmul.cu", WMMA_KERNEL)
        for i, (M, N, K) in enumerate(WMMA_SHAPES):
            A = random_array((M, K), seed=seed + 2 * i).astype(np.float16)
            B = random_array((K, N), seed=seed + 2 * i + 1).astype(np.float16)
            ref = A.astype(np.float64) @ B.astype(np.float64)
            # products of halfs are exact in float; K of them are added in float
            atol = precision.matmul_error_bound(A.astype(np.float32), B.astype(np.float32))
            C = np.full((M, N), np.nan, np.float32)
            grid, block = wmma_launch(M, N)
            what = f"M={M}, N={N}, K={K}"
            run_learner_kernel(kern, grid, block, (A, B, C, np.int32(M), np.int32(N),
                                                   np.int32(K)), what, race_check=True)
            if not np.all(np.abs(C - ref) <= atol):  # NaN fails too
                hint = _diagnose(C, A, B, atol)
                try:
                    assert_close(C, ref, rtol=0.0, atol=atol, name=f"C at {what}")
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n{hint}") from None
