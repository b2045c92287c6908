"""``python -m gpucourse.experiments.ch3 {hello,ddp,allreduce}``, under ``torchrun`` (each of its
processes joins torchrun's group) or alone (it starts its own workers): see ``torchrun.main``."""
import sys

from .torchrun import main

if __name__ == "__main__":
    sys.exit(main())
