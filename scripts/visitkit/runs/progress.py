"""Live progress while a run loads and converges: a tqdm bar on a terminal, plain periodic lines
otherwise (CI, logs), so a long load never sits silent."""
import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

from visitkit.formatting import fmt


class Progress:
    def __init__(self, label: str, total: float | None = None, stream: TextIO | None = None, every_s: float = 10.0,
                 now: Callable[[], float] = time.monotonic):
        self.label, self.total, self.every_s, self.now = label, total, every_s, now
        self.stream = stream or sys.stderr
        self.bar: tqdm | None = None
        if self.stream.isatty():
            self.bar = tqdm(total=total, desc=label, unit="s", file=self.stream, leave=True, dynamic_ncols=True,
                            bar_format="{desc}: {bar} {n:.0f}/{total_fmt} s {postfix}")
        self._last_line: float | None = None

    def update(self, elapsed: float, total: float | None = None, **figures: object) -> None:
        """figures: name -> value, shown in the order given (None shows as n/a)."""
        self.total = total or self.total
        text = "  ".join(f"{name.replace('_', ' ')} {fmt(value)}" for name, value in figures.items())
        if self.bar is not None:
            if self.total and self.bar.total != self.total:
                self.bar.total = self.total
            self.bar.n = min(elapsed, self.total or elapsed)
            self.bar.set_postfix_str(text, refresh=True)
            return
        if self._last_line is None or self.now() - self._last_line >= self.every_s:
            self._last_line = self.now()
            planned = f"/{self.total:.0f}" if self.total else ""
            print(f"  {self.label}: {elapsed:.0f}{planned} s  {text}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
