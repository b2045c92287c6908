"""ipywidgets front ends: controls → experiment → figure.

``explore(run, render, size=slider, ...)`` builds the course's one widget pattern: the
controls, a status line with a progress bar for runs, and an output area that shows what
``render(run(**values))`` returns. It runs once with the initial values so the cell shows
a figure straight away. Options that the device cannot run are listed with the reason
(``unavailable={"bf16": "needs compute capability 8.0"}``) and never run.
"""
from __future__ import annotations

import base64
import inspect
import time
from typing import Callable, Mapping

import ipywidgets as W
from IPython.core.interactiveshell import InteractiveShell

from .errors import CourseError
from .kernels import BLOCK_SIZES


def _one_of(value, options, what: str):
    """``value`` if it is one of ``options``, else one sentence naming them."""
    options = list(options)
    if not options:
        raise CourseError(f"the {what} control needs at least one option.")
    if value not in options:
        shown = ", ".join(map(str, options[:12])) + (", ..." if len(options) > 12 else "")
        raise CourseError(f"{value!r} is not one of the {what} options ({shown}); start the "
                          "control at one of them.")
    return value


def block_size_slider(values=BLOCK_SIZES, value: int = 256,
                      description: str = "block size") -> W.SelectionSlider:
    """A slider over block sizes, including a few that are not multiples of 32."""
    _one_of(value, values, description or "block size")
    return W.SelectionSlider(options=list(values), value=value, description=description,
                             continuous_update=False, style={"description_width": "initial"})


def choice(options, value=None, description: str = "",
           unavailable: Mapping[str, str] | None = None) -> W.Dropdown:
    """A dropdown whose unavailable options stay listed, marked as such.

    The label stays short (a sentence-long reason is cut off at the dropdown's width); the
    reasons are the dropdown's tooltip, and choosing such an option shows its reason instead
    of running.
    """
    unavailable = dict(unavailable or {})
    options = list(options)
    _one_of(options[0] if value is None and options else value, options, description or "choice")
    labels = [(f"{o} (not available here)" if o in unavailable else str(o), o) for o in options]
    first_ok = next((o for o in options if o not in unavailable), options[0])
    dd = W.Dropdown(options=labels, value=first_ok if value is None else value,
                    description=description, style={"description_width": "initial"},
                    layout=W.Layout(width="max-content"),
                    tooltip="; ".join(f"{o}: {r}" for o, r in unavailable.items()) or None)
    dd.unavailable = unavailable
    return dd


def precision_dropdown(available: Mapping[str, str | None], value: str | None = None,
                       description: str = "precision") -> W.Dropdown:
    """``available`` maps a precision to None (usable) or the reason it is not."""
    return choice(list(available), value=value, description=description,
                  unavailable={k: v for k, v in available.items() if v})


def multi_choice(options, value=(), description: str = "") -> W.SelectMultiple:
    """A list to pick several of ``options`` from (ctrl/shift-click); its value is a tuple."""
    options = list(options)
    for v in value:
        _one_of(v, options, description or "choice")
    return W.SelectMultiple(options=options, value=tuple(value), description=description,
                            rows=min(len(options), 6), style={"description_width": "initial"})


def int_slider(value: int, min: int, max: int, step: int = 1, description: str = "") -> W.IntSlider:
    return W.IntSlider(value=value, min=min, max=max, step=step, description=description,
                       continuous_update=False, style={"description_width": "initial"})


def log2_slider(value: int, min: int, max: int, description: str = "") -> W.SelectionSlider:
    """A slider over powers of two from ``min`` to ``max``."""
    if not (isinstance(min, int) and isinstance(max, int) and 1 <= min <= max):
        raise CourseError(f"a power-of-two slider needs whole numbers 1 <= min <= max, got min={min!r}, "
                          f"max={max!r}.")
    opts, v = [], min
    while v <= max:
        opts.append(v)
        v *= 2
    _one_of(value, opts, description or "slider")
    return W.SelectionSlider(options=opts, value=value, description=description,
                             continuous_update=False, style={"description_width": "initial"})


def _formatter():
    """IPython's display formatter: the kernel's in a notebook (with its figure formats)."""
    return InteractiveShell.instance().display_formatter


class Explorer(W.VBox):
    """Controls, a status line and an output area wired to ``render(run(**values))``."""

    def __init__(self, run: Callable, render: Callable, controls: Mapping[str, W.Widget],
                 auto: bool = True, title: str = "", initial=None):
        self._run, self._render = run, render
        self.controls = dict(controls)
        self.status = W.HTML()
        self.progress = W.FloatProgress(value=0, min=0, max=1, layout=W.Layout(width="200px"))
        self.progress.layout.visibility = "hidden"
        self.output = W.Output()
        self.result = None
        self.error: Exception | None = None
        self._accepts_progress = "progress" in inspect.signature(run).parameters
        children = []
        if title:
            children.append(W.HTML(f"<b>{title}</b>"))
        children.append(W.HBox(list(self.controls.values())))
        button = None
        if not auto:
            button = W.Button(description="Run", button_style="primary")
            button.on_click(lambda _: self.update())
            children.append(button)
        children += [W.HBox([self.status, self.progress]), self.output]
        super().__init__(children=children)
        if auto:
            for w in self.controls.values():
                w.observe(lambda _change: self.update(), names="value")
        if initial is None:
            self.update()
        else:  # what the notebook just measured at these settings: shown, not measured again
            self.result = initial
            self._show(render(initial), "measured in the cells above; move a control to re-run"
                       if auto else "measured in the cells above; press Run to re-measure")

    def values(self) -> dict:
        return {name: w.value for name, w in self.controls.items()}

    def _report_progress(self, fraction: float) -> None:
        self.progress.layout.visibility = "visible"
        self.progress.value = max(0.0, min(1.0, float(fraction)))

    def update(self) -> None:
        """Run the experiment for the current values and redraw (errors shown, not raised)."""
        values = self.values()
        for name, w in self.controls.items():
            reason = getattr(w, "unavailable", {}).get(values[name])
            if reason:
                self.status.value = (f"<span style='color:#b2182b'>{name}={values[name]} "
                                     f"is not available here: {reason}. The figure below is "
                                     "still the last one that ran.</span>")
                return
        self.status.value = "<i>running…</i>"
        self.progress.value = 0
        kwargs = dict(values)
        if self._accepts_progress:
            kwargs["progress"] = self._report_progress
        t0 = time.perf_counter()
        try:
            self.result = self._run(**kwargs)
            shown = self._render(self.result)
            self.error = None
        except Exception as exc:  # shown in the widget: a slider move must not kill the cell
            self.error = exc
            self.status.value = f"<span style='color:#b2182b'>{type(exc).__name__}: {exc}</span>"
            return
        finally:
            self.progress.layout.visibility = "hidden"
        self._show(shown, f"ran in {time.perf_counter() - t0:.2f} s")

    def _show(self, shown, status: str) -> None:
        # The output area's contents are set in one state update, not captured from display()
        # inside `with self.output:`. A notebook runner (nbclient, under nbval and nbconvert)
        # mirrors captured output back to the kernel over the channel it waits on for the
        # cell's reply; on a busy machine a cell built this way now and then never finished.
        data, metadata = _formatter().format(shown)
        # A PNG comes back as bytes: an output holds it as base64 text, as display() sends it
        # (bytes would travel as a binary buffer that the front end does not show as an image).
        data = {mime: base64.b64encode(v).decode("ascii") if isinstance(v, bytes) else v
                for mime, v in data.items()}
        self.output.outputs = ({"output_type": "display_data", "data": data,
                                "metadata": metadata},)
        self.status.value = f"<span style='color:#666'>{status}</span>"


def explore(run: Callable, render: Callable, auto: bool = True, title: str = "",
            initial=None, **controls: W.Widget) -> Explorer:
    """Widget pattern: ``controls`` → ``run(**values)`` → ``render(result)`` shown below.

    If ``run`` takes a ``progress`` argument it receives a callback taking a fraction in
    [0, 1]. Set ``auto=False`` for slow experiments: they then run on a button press.
    ``initial``: a result the notebook already measured at the controls' starting values,
    drawn first instead of running ``run`` again.
    """
    return Explorer(run, render, controls, auto=auto, title=title, initial=initial)
