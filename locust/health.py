"""The load generator's own health, per Locust process and second: its CPU, the lag of its event
loop (how late a 0.1 s sleep wakes: users wait that long on top of the system), and its users.

A saturated load generator understates the system: Locust warns once above 90 % CPU; this keeps
the timeline, so a report can say which process saturated, when, and whether before the knee.
Workers ship their samples with each stats report; the master (or the only process) writes them
all, and the exact requests and failures per second, as CSV when the run ends.
"""
import csv
import time

import gevent
import psutil

PROBE_S = 0.1
SAMPLE_S = 1.0
HEALTH_COLUMNS = ("time", "process", "cpu_percent", "loop_lag_ms", "users")
PER_SECOND_COLUMNS = ("time", "requests", "failures")


class Probe:
    """Samples this process once a second, in a greenlet of its own."""

    def __init__(self, runner, process_name):
        self.runner, self.process_name = runner, process_name
        self.samples = []  # rows in HEALTH_COLUMNS' order
        self.shipped = 0
        self._process = psutil.Process()
        self._process.cpu_percent()  # the first call only starts the count

    def start(self):
        return gevent.spawn(self.run)

    def run(self):
        while True:
            started, worst = time.monotonic(), 0.0
            while time.monotonic() - started < SAMPLE_S:
                before = time.monotonic()
                gevent.sleep(PROBE_S)
                worst = max(worst, time.monotonic() - before - PROBE_S)
            self.samples.append((round(time.time(), 1), self.process_name, self._process.cpu_percent(),
                                 round(1000 * worst, 1), self.runner.user_count))

    def take(self):
        """The samples since the last take (a worker's report)."""
        taken = self.samples[self.shipped:]
        self.shipped = len(self.samples)
        return taken


def write_health(path, samples):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(HEALTH_COLUMNS)
        out.writerows(sorted(samples, key=lambda row: (row[0], row[1])))


def write_per_second(path, total):
    """Requests and failures per second (Locust's own per-second counts, which every worker's
    reports add to: exact, where the history's running total moves in 3 s batches)."""
    seconds = sorted(set(total.num_reqs_per_sec) | set(total.num_fail_per_sec))
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(PER_SECOND_COLUMNS)
        out.writerows((second, total.num_reqs_per_sec.get(second, 0), total.num_fail_per_sec.get(second, 0))
                      for second in seconds)
