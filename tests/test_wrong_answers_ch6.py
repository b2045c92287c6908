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


def _verdict(a, b, same_within=0.0):
    if abs(b - a) <= same_within * max(a, b):
        return "same"
    return "smaller" if b < a else "larger"


def explain(fp32, low, parts=None, verdict=_verdict, total=None):
    """6.4 with one slip: ``parts`` (which parts to give), ``verdict`` (how to compare a part),
    ``total`` (how to decide the total from the fp32 and 16-bit breakdowns)."""
    keys = list(dict.fromkeys([*fp32, *low])) if parts is None else parts(fp32, low)
    out = {k: verdict(fp32.get(k, 0), low.get(k, 0)) for k in keys}
    out["total"] = (total or (lambda f, l: verdict(sum(f.values()), sum(l.values()))))(fp32, low)
    return out


def _recipe_copied(fp32, low):
    """The chapter's recipe as a learner remembers it: 16-bit weights, gradients and
    activations, FP32 optimizer state, a new FP32 master copy; a saving in total."""
    keep = ("optimizer state",)
    new = {k: "larger" for k in low if k not in fp32 or not fp32[k]}
    return {**{k: "same" if k in keep else "smaller" for k in fp32}, **new, "total": "smaller"}


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
          "6.3": c6.check_choose_precision, "6.4": c6.check_step_memory,
          "6.5": c6.check_int8_matmul}
REFERENCES = {"6.1": quantize, "6.2": c6.ReferenceScaler, "6.3": choose, "6.4": explain,
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
        ("the chapter's recipe copied: weights and gradients shrink", _recipe_copied,
         "autocast keeps the parameters"),
        ("everything shrinks in 16 bits", lambda f, l: {k: "smaller" for k in [*f, *l, "total"]},
         "autocast keeps the parameters"),
        ("smaller only when halved", lambda f, l: explain(
            f, l, verdict=lambda a, b: "smaller" if b <= a / 2 else "larger" if b > a else "same"),
         "less than half"),
        ("only the parts of the fp32 breakdown", lambda f, l: explain(f, l, parts=lambda f, l: list(f)),
         "no entry for 'fp32 master weights'"),
        ("compared the wrong way round", lambda f, l: explain(l, f), "wrong way round"),
        ("the total always smaller", lambda f, l: explain(f, l, total=lambda f, l: "smaller"),
         "outweigh"),
        ("the total from the activations alone", lambda f, l: explain(
            f, l, total=lambda f, l: _verdict(f.get("saved activations", f.get("activations")),
                                              l.get("saved activations", l.get("activations")))),
         "outweigh"),
        ("a 1 % tolerance for 'same'", lambda f, l: explain(
            f, l, verdict=lambda a, b: _verdict(a, b, same_within=0.01)), "exact counts"),
        ("no total", lambda f, l: {k: v for k, v in explain(f, l).items() if k != "total"},
         "no entry for 'total'"),
        ("the lab's small step written down", lambda f, l: {
            "weights": "same", "gradients": "same", "optimizer state": "same",
            "saved activations": "smaller", "16-bit weight copies": "larger", "total": "larger"},
         "compare the two totals"),
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
