"""Chapter 2 lab checkers: each accepts the solution and rejects plausible wrong answers."""
import numpy as np
import pytest
import torch

from gpucourse import profiler
from gpucourse.kernels import transpose
from gpucourse.check import ch2 as lab
from gpucourse.check import expect_failure

# --------------------------------------------------------------------------- 2.1 bank conflicts


def ways_right(addresses):
    banks = {}
    for a in addresses:
        banks.setdefault((a // 4) % 32, set()).add(a // 4)
    return max(len(s) for s in banks.values())


def ways_counting_lanes(addresses):  # forgets the broadcast: same word counted per lane
    banks = {}
    for a in addresses:
        banks[(a // 4) % 32] = banks.get((a // 4) % 32, 0) + 1
    return max(banks.values())


def ways_byte_bank(addresses):  # bank from the byte address instead of the word
    banks = {}
    for a in addresses:
        banks.setdefault(a % 32, set()).add(a // 4)
    return max(len(s) for s in banks.values())


def ways_16_banks(addresses):  # thinks there are 16 banks
    banks = {}
    for a in addresses:
        banks.setdefault((a // 4) % 16, set()).add(a // 4)
    return max(len(s) for s in banks.values())


def test_bank_ways_accepts_the_solution(capsys):
    lab.check_bank_ways(ways_right)
    assert capsys.readouterr().out.strip() == "Exercise 2.1 passed: counting bank conflicts."


@pytest.mark.parametrize("wrong,match", [(ways_counting_lanes, "broadcast"),
                                         (ways_byte_bank, "-way"), (ways_16_banks, "-way"),
                                         (lambda a: 1.0, "return an int")])
def test_bank_ways_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        lab.check_bank_ways(wrong)


# --------------------------------------------------------------------------- 2.2 transpose

SOLUTION = r'''
extern "C" __global__ void transpose_padded(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
'''
NAIVE = r'''
extern "C" __global__ void transpose_padded(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (x < cols && y + j < rows) out[x * rows + y + j] = in[(y + j) * cols + x];
}
'''
SWIZZLED = (SOLUTION.replace("tile[TILE][TILE + 1]", "tile[TILE][TILE]")
            .replace("tile[threadIdx.y + j][threadIdx.x]", "tile[threadIdx.y + j][threadIdx.x ^ (threadIdx.y + j)]")
            .replace("tile[threadIdx.x][threadIdx.y + j]", "tile[threadIdx.x][(threadIdx.y + j) ^ threadIdx.x]"))
FLAT_PADDED = (SOLUTION.replace("__shared__ float tile[TILE][TILE + 1];", "__shared__ float t[TILE * (TILE + 1)];")
               .replace("tile[threadIdx.y + j][threadIdx.x]", "t[(threadIdx.y + j) * (TILE + 1) + threadIdx.x]")
               .replace("tile[threadIdx.x][threadIdx.y + j]", "t[threadIdx.x * (TILE + 1) + threadIdx.y + j]"))

# Unpadded, read down a column through a pointer into the tile: the subscript trace sees only
# `&tile[0][0]`; the profiler sees the 32-way conflict.
FLAT_UNPADDED = (SOLUTION.replace("__shared__ float tile[TILE][TILE + 1];",
                                  "__shared__ float tile[TILE][TILE];\n    float* t = &tile[0][0];")
                 .replace("tile[threadIdx.y + j][threadIdx.x]", "t[(threadIdx.y + j) * TILE + threadIdx.x]")
                 .replace("tile[threadIdx.x][threadIdx.y + j]", "t[threadIdx.x * TILE + threadIdx.y + j]"))
# Conflict-free tile (read along the rows it was written), but each warp stores down a column
# of `out`: the naive kernel's store, with shared memory in between.
STRIDED_STORE = (SOLUTION.replace("    x = blockIdx.y * TILE + threadIdx.x;\n    y = blockIdx.x * TILE + threadIdx.y;\n", "")
                 .replace("if (x < rows && y + j < cols)\n            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];",
                          "if (x < cols && y + j < rows)\n            out[x * rows + (y + j)] = tile[threadIdx.y + j][threadIdx.x];"))


def test_transpose_checker_accepts_the_solution_and_other_conflict_free_layouts(capsys):
    trace = lab.check_padded_transpose(SOLUTION)
    assert trace["worst"] == 1 and len(trace["accesses"]) == 8 * 8  # 8 warps x (4 writes + 4 reads)
    assert "Exercise 2.2 passed" in capsys.readouterr().out
    lab.check_padded_transpose(lambda: SWIZZLED)
    lab.check_padded_transpose(FLAT_PADDED)


@pytest.mark.parametrize("source,match", [
    (SOLUTION.replace("__syncthreads();", ""), "has a race"),
    (SOLUTION.replace("tile[TILE][TILE + 1]", "tile[TILE][TILE]"), "32-way bank conflict"),
    (SOLUTION.replace("tile[TILE][TILE + 1]", "tile[TILE + 1][TILE]"), "32-way bank conflict"),
    (NAIVE, "never reads or writes shared memory"),
    (SOLUTION.replace("if (x < rows && y + j < cols)", "if (x < cols && y + j < rows)"), "x "),
    (SOLUTION.replace("__syncthreads();", "__syncthreads()"), "line"),
    (FLAT_UNPADDED, "32-way shared-memory bank conflict"),
    (STRIDED_STORE, "global store of 32 sectors per warp request"),
    (SOLUTION.replace("TILE + 1", "TILE + 2"), "34 words apart"),  # even padding: 2-way
])
def test_transpose_checker_rejects_wrong_kernels(source, match):
    with expect_failure(match):
        lab.check_padded_transpose(source)


def test_transpose_checker_accepts_a_tile_passed_to_a_helper_function(capsys):
    """The subscript trace cannot follow the tile into a function; the profiler can."""
    helper = SOLUTION.replace(
        'extern "C" __global__ void transpose_padded(',
        "__device__ float read_tile(float (*tile)[TILE + 1], int r, int c) { return tile[r][c]; }\n"
        'extern "C" __global__ void transpose_padded(').replace(
        "tile[threadIdx.x][threadIdx.y + j];", "read_tile(tile, threadIdx.x, threadIdx.y + j);")
    assert "read_tile(tile" in helper
    lab.check_padded_transpose(helper)
    assert "Exercise 2.2 passed" in capsys.readouterr().out
    with expect_failure("32-way shared-memory bank conflict"):
        lab.check_padded_transpose(helper.replace("TILE + 1", "TILE"))


def test_transpose_checker_says_when_the_exercise_is_not_done():
    def not_done():
        raise NotImplementedError("Exercise 2.2")

    with expect_failure("not done yet"):
        lab.check_padded_transpose(not_done)


def test_trace_reports_each_warp_access():
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    out = np.full((64, 64), np.nan, np.float32)
    unpadded = SOLUTION.replace("tile[TILE][TILE + 1]", "tile[TILE][TILE]")
    grid, block = transpose.launch_config(64, 64)
    t = profiler.trace_shared_accesses(unpadded, "transpose_padded", grid, block,
                                       transpose.args(a, out, 64, 64),
                                       defines=lab.TRANSPOSE_DEFINES)
    np.testing.assert_array_equal(out, a.T)  # the traced build still computes the transpose
    reads = [acc for acc in t["accesses"] if acc["access"] >= 4]
    assert {acc["ways"] for acc in reads} == {32} and len(reads) == 8 * 4
    assert all(acc["banks"] == [acc["banks"][0]] * 32 for acc in reads)


def test_trace_refuses_dynamic_shared_memory():
    src = SOLUTION.replace("__shared__ float tile[TILE][TILE + 1];",
                           "extern __shared__ float buf[]; float (*tile)[TILE + 1] = (float (*)[TILE + 1])buf;")
    with pytest.raises(profiler.TraceError, match="static array"):
        profiler.instrument_shared(src)


# --------------------------------------------------------------------------- 2.3 pinned loop


def train_step(model, opt, xb, yb):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()


def fast(model, opt, X, Y, batch, device):
    X, Y = X.pin_memory(), Y.pin_memory()
    for i in range(0, len(X), batch):
        train_step(model, opt, X[i:i + batch].to(device, non_blocking=True),
                   Y[i:i + batch].to(device, non_blocking=True))


def naive(model, opt, X, Y, batch, device):
    for i in range(0, len(X), batch):
        train_step(model, opt, X[i:i + batch].to(device), Y[i:i + batch].to(device))


def non_blocking_only(model, opt, X, Y, batch, device):
    for i in range(0, len(X), batch):
        train_step(model, opt, X[i:i + batch].to(device, non_blocking=True),
                   Y[i:i + batch].to(device, non_blocking=True))


def pinned_but_blocking(model, opt, X, Y, batch, device):
    X, Y = X.pin_memory(), Y.pin_memory()
    for i in range(0, len(X), batch):
        train_step(model, opt, X[i:i + batch].to(device), Y[i:i + batch].to(device))


def pin_every_batch(model, opt, X, Y, batch, device):
    for i in range(0, len(X), batch):
        train_step(model, opt, X[i:i + batch].pin_memory().to(device, non_blocking=True),
                   Y[i:i + batch].pin_memory().to(device, non_blocking=True))


def shuffled_copy(model, opt, X, Y, batch, device):  # fancy indexing makes pageable copies
    X, Y = X.pin_memory(), Y.pin_memory()
    idx = torch.arange(len(X))
    for i in range(0, len(X), batch):
        train_step(model, opt, X[idx[i:i + batch]].to(device, non_blocking=True),
                   Y[idx[i:i + batch]].to(device, non_blocking=True))


def skips_last_batch(model, opt, X, Y, batch, device):
    X, Y = X.pin_memory(), Y.pin_memory()
    for i in range(0, len(X) - batch, batch):
        train_step(model, opt, X[i:i + batch].to(device, non_blocking=True),
                   Y[i:i + batch].to(device, non_blocking=True))


def host_compute(model, opt, X, Y, batch, device):
    X, Y = X.pin_memory(), Y.pin_memory()
    for i in range(0, len(X), batch):
        xb = (X[i:i + batch] * 1.0).to(device, non_blocking=True)
        train_step(model, opt, xb, Y[i:i + batch].to(device, non_blocking=True))


def discards_the_pinned_copy(model, opt, X, Y, batch, device):  # pin_memory() is not in place
    X.pin_memory(), Y.pin_memory()
    for i in range(0, len(X), batch):
        train_step(model, opt, X[i:i + batch].to(device, non_blocking=True),
                   Y[i:i + batch].to(device, non_blocking=True))


def data_loader(model, opt, X, Y, batch, device):  # collates on the host; pins only with a GPU
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=batch)
    for xb, yb in loader:
        train_step(model, opt, xb.to(device, non_blocking=True), yb.to(device, non_blocking=True))


def test_pinned_loop_accepts_the_solution(capsys):
    lab.check_pinned_loop(fast, train_step)
    assert "Exercise 2.3 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong,match", [
    (naive, "nothing was pinned"), (non_blocking_only, "nothing was pinned"),
    (pinned_but_blocking, "blocking"), (pin_every_batch, "outside the loop"),
    (shuffled_copy, "read pageable memory"), (skips_last_batch, "copies for 5 batches"),
    (host_compute, "computed with host tensors"),
    (discards_the_pinned_copy, "keep its result"), (data_loader, "A DataLoader stacks"),
])
def test_pinned_loop_rejects_wrong_loops(wrong, match):
    with expect_failure(match):
        lab.check_pinned_loop(wrong, train_step)


def nudged(model, opt, X, Y, batch, device):  # trains on data one ulp away from X
    X, Y = X.pin_memory(), Y.pin_memory()
    for i in range(0, len(X), batch):
        xb = X[i:i + batch].to(device, non_blocking=True)
        train_step(model, opt, torch.nextafter(xb, torch.full_like(xb, float("inf"))),
                   Y[i:i + batch].to(device, non_blocking=True))


def test_pinned_loop_compares_bits():
    """The same train_step on the same batches in the same order gives the same bits, so the
    check is exact; the old relative 1e-5 let through a loop that trains on other data."""
    with expect_failure("same bits"):
        lab.check_pinned_loop(nudged, train_step)


def test_host_tensors_behave_normally_outside_the_check():
    x = lab.host_tensor(torch.arange(6.0))
    assert float(x.sum()) == 15.0


# --------------------------------------------------------------------------- 2.4 buffer reuse

def momentum_inplace(w, v, grads, lr, beta):
    for g in grads:
        v.mul_(beta).add_(g)
        w.add_(v, alpha=-lr)
    return w, v


def momentum_temporary(w, v, grads, lr, beta):  # w.sub_(lr * v) still allocates lr * v
    for g in grads:
        v.mul_(beta).add_(g)
        w.sub_(lr * v)
    return w, v


def momentum_wrong_order(w, v, grads, lr, beta):
    for g in grads:
        w.add_(v, alpha=-lr)
        v.mul_(beta).add_(g)
    return w, v


def momentum_rebinds(w, v, grads, lr, beta):  # new tensors: the caller's w and v never change
    for g in grads:
        v = beta * v + g
        w = w - lr * v
    return w, v


def momentum_prealloc(w, v, grads, lr, beta):  # one scratch buffer before the loop is fine
    tmp = torch.empty_like(w)
    for g in grads:
        v.mul_(beta).add_(g)
        torch.mul(v, lr, out=tmp)
        w.sub_(tmp)
    return w, v


def test_buffer_reuse_accepts_in_place_and_preallocated_versions(capsys):
    lab.check_buffer_reuse(momentum_inplace)
    lab.check_buffer_reuse(momentum_prealloc)
    assert capsys.readouterr().out.count("Exercise 2.4 passed") == 2


@pytest.mark.parametrize("wrong,match", [(momentum_temporary, "1 new tensor(s) per iteration"),
                                         (momentum_wrong_order, "differ"),
                                         (momentum_rebinds, "in place")])
def test_buffer_reuse_rejects_wrong_loops(wrong, match):
    with expect_failure(match):
        lab.check_buffer_reuse(wrong)


def test_allocation_counter():
    a, b, c = torch.randn(10), torch.randn(10), torch.randn(10)
    with lab.TorchAllocationCounter() as n:
        a * b + c
    assert n.count == 2 and n.bytes == 80
    with lab.TorchAllocationCounter() as n:
        a.mul_(2).add_(b)
        torch.add(a, c, out=b)
        a[2:5].view(3)
    assert n.count == 0


# --------------------------------------------------------------------------- 2.5 footprint

def mixed_right(model):
    n = sum(p.numel() for p in model.parameters())
    return {"weights": 2 * n, "gradients": 2 * n, "master_copy": 4 * n, "optimizer_state": 8 * n}


def mixed_no_bias(model):
    n = sum(p.numel() for name, p in model.named_parameters() if name.endswith("weight") and p.dim() == 2)
    return {"weights": 2 * n, "gradients": 2 * n, "master_copy": 4 * n, "optimizer_state": 8 * n}


def mixed_16bit_state(model):
    n = sum(p.numel() for p in model.parameters())
    return {"weights": 2 * n, "gradients": 2 * n, "master_copy": 4 * n, "optimizer_state": 4 * n}


def mixed_no_master(model):
    n = sum(p.numel() for p in model.parameters())
    return {"weights": 2 * n, "gradients": 2 * n, "master_copy": 0, "optimizer_state": 8 * n}


def mixed_state_dict(model):  # counts buffers (BatchNorm's running statistics) as weights
    n = sum(t.numel() for t in model.state_dict().values())
    return {"weights": 2 * n, "gradients": 2 * n, "master_copy": 4 * n, "optimizer_state": 8 * n}


def test_mixed_bytes_accepts_the_solution(capsys):
    lab.check_mixed_bytes(mixed_right)
    assert "Exercise 2.5 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong,match", [(mixed_no_bias, "Biases"),
                                         (mixed_16bit_state, "two fp32 values"),
                                         (mixed_no_master, "master copy is fp32"),
                                         (lambda m: {**mixed_right(m), "weights": 2 * mixed_right(m)["weights"]},
                                          "That is 4 bytes a value"),
                                         (lambda m: 0, "return a dict"),
                                         (mixed_state_dict, "not state_dict"),
                                         (lambda m: {k: 8 * v for k, v in mixed_right(m).items()},
                                          "counts bits")])
def test_mixed_bytes_rejects_wrong_counts(wrong, match):
    with expect_failure(match):
        lab.check_mixed_bytes(wrong)
