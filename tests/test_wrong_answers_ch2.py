"""Lab 2's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""
import torch

from gpucourse.check import ch2 as c2
from test_ch2_checkers import NAIVE, SOLUTION
from wrong_answer_table import table_tests


def bank_ways(addresses, word=lambda a: a // 4, bank=lambda w: w % 32, distinct=True):
    banks = {}
    for a in addresses:
        banks.setdefault(bank(word(a)), []).append(word(a))
    return max(len(set(w)) if distinct else len(w) for w in banks.values())


# The references are chapter 2's checker tests' own: one copy of each kernel.
TRANSPOSE, NAIVE_TRANSPOSE = SOLUTION, NAIVE


def _swap(text, old, new):
    assert old in text, old  # the wrong answer must really differ from the solution
    return text.replace(old, new)


def train_step(model, opt, xb, yb):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()


def train_fast(model, opt, X, Y, batch, device, pin=True, keep=True, non_blocking=True,
               stop=None):
    if pin:
        pinned = X.pin_memory(), Y.pin_memory()
        if keep:
            X, Y = pinned
    for i in range(0, stop(len(X), batch) if stop else len(X), batch):
        train_step(model, opt, X[i:i + batch].to(device, non_blocking=non_blocking),
                   Y[i:i + batch].to(device, non_blocking=non_blocking))


def _loop(**how):
    return lambda model, opt, X, Y, batch, device: train_fast(model, opt, X, Y, batch, device, **how)


def _pin_every_batch(model, opt, X, Y, batch, device):
    for i in range(0, len(X), batch):
        train_step(model, opt, X[i:i + batch].pin_memory().to(device, non_blocking=True),
                   Y[i:i + batch].pin_memory().to(device, non_blocking=True))


def momentum_steps(w, v, grads, lr, beta):
    for g in grads:
        v.mul_(beta).add_(g)
        w.add_(v, alpha=-lr)
    return w, v


def _momentum_temporary(w, v, grads, lr, beta):
    for g in grads:
        v.mul_(beta).add_(g)
        w.sub_(lr * v)
    return w, v


def _momentum_wrong_order(w, v, grads, lr, beta):
    for g in grads:
        w.add_(v, alpha=-lr)
        v.mul_(beta).add_(g)
    return w, v


def _momentum_rebinds(w, v, grads, lr, beta):
    for g in grads:
        v = beta * v + g
        w = w - lr * v
    return w, v


def _momentum_v_rebound(w, v, grads, lr, beta):
    for g in grads:
        v = v.mul_(beta) + g
        w.add_(v, alpha=-lr)
    return w, v


def _momentum_sign(w, v, grads, lr, beta):
    for g in grads:
        v.mul_(beta).add_(g)
        w.add_(v, alpha=lr)
    return w, v


def mixed_precision_bytes(model, low=2, master=4, states=2, params=None):
    n = sum(p.numel() for p in (params or model.parameters)())
    return {"weights": low * n, "gradients": low * n, "master_copy": master * n,
            "optimizer_state": states * 4 * n}


CHECKS = {"2.1": c2.check_bank_ways, "2.2": c2.check_padded_transpose,
          "2.3": lambda answer: c2.check_pinned_loop(answer, train_step),
          "2.4": c2.check_buffer_reuse, "2.5": c2.check_mixed_bytes}
REFERENCES = {"2.1": bank_ways, "2.2": TRANSPOSE, "2.3": train_fast, "2.4": momentum_steps,
              "2.5": mixed_precision_bytes}

WRONG_ANSWERS = {
    "2.1": [
        ("lanes counted, not distinct words", lambda a: bank_ways(a, distinct=False), "broadcast"),
        ("the bank from the byte address", lambda a: bank_ways(a, word=lambda a: a, bank=lambda w: w % 32),
         "(a // 4) % 32"),
        ("16 banks", lambda a: bank_ways(a, bank=lambda w: w % 16), "16 banks"),
        ("the number of banks touched", lambda a: len({(x // 4) % 32 for x in a}), "ONE bank"),
        ("a float", lambda a: float(bank_ways(a)), "return an int"),
        ("8-byte words", lambda a: bank_ways(a, word=lambda a: a // 8), "8-byte words"),
    ],
    "2.2": [
        ("no barrier", TRANSPOSE.replace("__syncthreads();", ""), "has a race"),
        ("no padding", _swap(TRANSPOSE, "tile[TILE][TILE + 1]", "tile[TILE][TILE]"),
         "32-way bank conflict"),
        ("the padding on the wrong dimension", _swap(TRANSPOSE, "tile[TILE][TILE + 1]", "tile[TILE + 1][TILE]"),
         "32-way bank conflict"),
        ("no shared memory", NAIVE_TRANSPOSE, "never reads or writes shared memory"),
        ("the input's bounds on the store",
         _swap(TRANSPOSE, "if (x < rows && y + j < cols)", "if (x < cols && y + j < rows)"), "out of bounds"),
        ("padding of 2", _swap(TRANSPOSE, "TILE + 1", "TILE + 2"), "34 words apart"),
    ],
    "2.3": [
        ("nothing pinned", _loop(pin=False), "nothing was pinned"),
        ("pinned but blocking copies", _loop(non_blocking=False), "blocking"),
        ("pinned every batch", _pin_every_batch, "outside the loop"),
        ("pin_memory()'s result dropped", _loop(keep=False), "keep its result"),
        ("the last batch skipped", _loop(stop=lambda n, b: n - b), "copies for 5 batches"),
    ],
    "2.4": [
        ("a temporary per step", _momentum_temporary, "new tensor(s) per iteration"),
        ("w updated before v", _momentum_wrong_order, "differ"),
        ("new tensors each step", _momentum_rebinds, "in place"),
        ("v rebound to a new tensor", _momentum_v_rebound, "the v you return is a new tensor"),
        ("the step's sign flipped", _momentum_sign, "differ"),
    ],
    "2.5": [
        ("16-bit optimizer state", lambda m: mixed_precision_bytes(m, states=1), "two fp32 values"),
        ("no master copy", lambda m: mixed_precision_bytes(m, master=2), "master copy is fp32"),
        ("4-byte weights and gradients", lambda m: mixed_precision_bytes(m, low=4), "2-byte bf16"),
        ("bits, not bytes", lambda m: {k: 8 * v for k, v in mixed_precision_bytes(m).items()},
         "counts bits"),
        ("buffers counted too", lambda m: mixed_precision_bytes(
            m, params=lambda: list(m.parameters()) + list(m.buffers())), "not state_dict"),
        ("a number, not a dict", lambda m: sum(mixed_precision_bytes(m).values()), "return a dict"),
    ],
}


test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
