"""Lab 6's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""
import torch

from gpucourse import precision
from gpucourse.check import ch6 as c6
from wrong_answer_table import table_tests


def quantize(w, amax=lambda w: w.abs().amax(dim=1, keepdim=True), by=127, low=-127,
             guard=True, rounding=torch.round):
    m = amax(w)
    scale = torch.where(m > 0, m / by, torch.ones_like(m)) if guard else m / by
    q = rounding(w / scale).clamp(low, 127).to(torch.int8)
    return q, scale.squeeze(1) if scale.ndim == 2 else scale


def _nan_hidden_by_the_cast(w):
    """No guard before dividing: 0/0 = NaN, which .to(torch.int8) turns into 0 on x86; the
    scale returned is guarded, so q and scale both look right here."""
    m = w.abs().amax(dim=1, keepdim=True)
    q = torch.round(w / m * 127).clamp(-127, 127).to(torch.int8)
    return q, torch.where(m > 0, m / 127, torch.ones_like(m)).squeeze(1)


def _scaler(unscale=None, update=None):
    """A LossScaler whose unscale or update is replaced."""
    body = {}
    if unscale:
        body["unscale"] = lambda self, grads: unscale(self, grads)
    if update:
        body["update"] = lambda self, found_inf: update(self, found_inf)
    return type("LossScaler", (c6.ReferenceScaler,), body)


def _finite(out):
    return not all(bool(torch.isfinite(g).all()) for g in out)


def _update(reset=True, grow_after=lambda clean, interval: clean == interval):
    def update(self, found_inf):
        if found_inf:
            self.scale *= self.backoff_factor
            if reset:
                self.clean_steps = 0
        else:
            self.clean_steps += 1
            if grow_after(self.clean_steps, self.growth_interval):
                self.scale *= self.growth_factor
                self.clean_steps = 0
    return update


def choose(gpu):
    if "bf16" in gpu.precisions:
        return "bf16", False
    if "fp16" in gpu.precisions and gpu.peak_flops("fp16") > gpu.peak_flops("fp32"):
        return "fp16", True
    return "fp32", False


def training_bytes(params, activations, dtype, optimizer, master=True, state_bytes=4,
                   act_bytes=None):
    size = {"fp32": 4, "bf16": 2, "fp16": 2}[dtype]
    states = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    copy = 4 * params if size < 4 and master else 0
    return (2 * params * size + copy + state_bytes * states * params
            + (act_bytes or size) * activations)


def int8_matmul(a, b, qa_dim=1, qb_dim=0, guard=True, acc=torch.int32, scales=2):
    sa = a.abs().amax(dim=qa_dim, keepdim=True) / 127
    sb = b.abs().amax(dim=qb_dim, keepdim=True) / 127
    if guard:
        sa = torch.where(sa > 0, sa, torch.ones_like(sa))
        sb = torch.where(sb > 0, sb, torch.ones_like(sb))
    qa = torch.round(a / sa).clamp(-127, 127).to(torch.int8)
    qb = torch.round(b / sb).clamp(-127, 127).to(torch.int8)
    if acc is torch.int32:
        c = precision.int8_mm(qa, qb).float()
    else:
        c = (qa.to(acc) @ qb.to(acc)).float()
    if qb_dim == 1:  # scales of b's rows: multiply them into B before the product
        c = precision.int8_mm(qa, torch.round(qb.float() * sb).to(torch.int8)).float()
        return c * sa
    return c * sa * sb if scales == 2 else c * sa


CHECKS = {"6.1": c6.check_quantize, "6.2": c6.check_loss_scaler,
          "6.3": c6.check_choose_precision, "6.4": c6.check_training_bytes,
          "6.5": c6.check_int8_matmul}
REFERENCES = {"6.1": quantize, "6.2": c6.ReferenceScaler, "6.3": choose, "6.4": training_bytes,
              "6.5": c6.reference_int8_matmul}

WRONG_ANSWERS = {
    "6.1": [
        ("divided by 128 and clamped to -128..127", lambda w: quantize(w, by=128, low=-128),
         "max|w|/128"),
        ("one scale for the tensor, as a 0-d tensor",
         lambda w: quantize(w, amax=lambda w: w.abs().max()), "per-tensor"),
        ("one scale for the tensor, repeated per row",
         lambda w: (quantize(w, amax=lambda w: w.abs().max())[0],
                    (w.abs().max() / 127).repeat(w.shape[0])), "per-tensor"),
        ("NaN from 0/0 hidden by the int8 cast", _nan_hidden_by_the_cast, "NaN or inf value"),
        ("the signed max", lambda w: quantize(w, amax=lambda w: w.amax(dim=1, keepdim=True)),
         "MAGNITUDE"),
        ("truncation instead of rounding", lambda w: quantize(w, rounding=lambda x: x),
         "Round to the nearest"),
        ("a scale of 0 for an all-zero row", lambda w: quantize(w, guard=False), "all-zero"),
        ("q left in float", lambda w: (quantize(w)[0].float(), quantize(w)[1]), "int8"),
    ],
    "6.2": [
        ("the count kept after an overflow", _scaler(update=_update(reset=False)), "reset"),
        ("growth one step late", _scaler(update=_update(grow_after=lambda c, i: c > i)),
         "exactly growth_interval"),
        ("NaN not counted as an overflow",
         _scaler(unscale=lambda s, g: ([x.float() / s.scale for x in g],
                                       any(bool(torch.isinf(x).any()) for x in g))), "NaN"),
        ("unscaled in FP16", _scaler(unscale=lambda s, g: ([x / s.scale for x in g],
                                                           _finite([x / s.scale for x in g]))),
         "FP32"),
        ("-inf not counted",
         _scaler(unscale=lambda s, g: ([x.float() / s.scale for x in g],
                                       any(bool((x == float("inf")).any() | torch.isnan(x).any())
                                           for x in g))), "-inf"),
        ("growth on every clean step", _scaler(update=lambda s, f: setattr(
            s, "scale", s.scale * (s.backoff_factor if f else s.growth_factor))), "expected"),
    ],
    "6.3": [
        ("from the compute capability: pre-Volta means fp32",
         lambda g: ("bf16", False) if "bf16" in g.precisions else
         ("fp16", True) if g.compute_capability >= (7, 0) else ("fp32", False),
         "older than Volta, yet its FP16 peak is twice"),
        ("bf16 everywhere", lambda g: ("bf16", False), "expected"),
        ("fp16 wherever it exists", lambda g: choose(g) if "bf16" in g.precisions else
         (("fp16", True) if "fp16" in g.precisions else ("fp32", False)), "P-slow-fp16"),
        ("bf16 with loss scaling", lambda g: (choose(g)[0], choose(g)[0] != "fp32"), "loss scaling"),
        ("the fastest format", lambda g: (max(g.precisions, key=g.peak_flops), False),
         "inference format"),
        ("fp16 without loss scaling", lambda g: (choose(g)[0], False), "loss scaling"),
    ],
    "6.4": [
        ("no FP32 master copy", lambda p, a, d, o: training_bytes(p, a, d, o, master=False),
         "master"),
        ("optimizer states in 2 bytes",
         lambda p, a, d, o: training_bytes(p, a, d, o, state_bytes=2 if d != "fp32" else 4),
         "optimizer state"),
        ("activations in fp32", lambda p, a, d, o: training_bytes(p, a, d, o, act_bytes=4),
         "Activations"),
        ("everything halved in 16 bits", lambda p, a, d, o: training_bytes(p, a, "fp32", o) // (
            1 if d == "fp32" else 2), "expected"),
        ("Adam's two states counted as one",
         lambda p, a, d, o: training_bytes(p, a, d, "momentum" if o == "adam" else o),
         "optimizer state"),
    ],
    "6.5": [
        ("NaN from 0/0 hidden by the int8 cast", lambda a, b: int8_matmul(a, b, guard=False),
         "NaN or inf value"),
        ("FP16 sums", lambda a, b: int8_matmul(a, b, acc=torch.float16), "INT32"),
        ("FP32 sums", lambda a, b: int8_matmul(a, b, acc=torch.float32), "exact integer product"),
        ("one scale only", lambda a, b: int8_matmul(a, b, scales=1), "both scales"),
        ("b quantized per row", lambda a, b: int8_matmul(a, b, qb_dim=1), "COLUMN"),
        ("per-tensor scales", lambda a, b: int8_matmul(a, b, qa_dim=(0, 1), qb_dim=(0, 1)),
         "per ROW"),
    ],
}


test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
