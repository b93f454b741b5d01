"""Starts one node of a distributed Locust run: the master, or one machine's workers. The same
start on a laptop (`scripts/run-iteration --workers N`: the master and N workers over loopback)
and on the fleet's VMs (infra/loadgen's startup script).

    python3 locust/node.py master --config run.conf --out DIR --bind-port P --expect-workers N
    python3 locust/node.py worker --config run.conf --master-host H --master-port P --processes K [--master-wait S]

run.conf is a Locust configuration file holding the test's options (host, shape, ...); master and
workers read the same one. The master writes the run's files (OUTPUTS) into --out; workers log to
stderr. With --master-wait, a worker first waits up to S seconds for its master's port to answer
and ends with NO_MASTER if it never does (a fleet's VM then ends: infra/loadgen's startup script).
Standard library only: it runs where nothing but Locust is installed.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCUSTFILE = HERE / "locustfile.py"
# The master's files, by Locust option (the kit's results folder reads the same names).
OUTPUTS = {"--csv": "locust", "--html": "locust.html", "--logfile": "locust.log", "--ledger-file": "ledger.json",
           "--health-file": "health.csv", "--per-second-file": "per_second.csv", "--arrivals-file": "arrivals.csv"}
OUTPUT_FLAGS = ["--csv-full-history"]  # the master's too (a worker refuses it without --csv)
DEFAULT_WAIT_S = 600  # for workers to connect: VMs boot and install Locust first
NO_MASTER = 3  # a worker's exit code when no master answered within --master-wait
PROBE_EVERY_S = 5


def locust_command(config):
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--config", str(config)]


def master_command(config, out, bind_port, expect_workers, wait_s=DEFAULT_WAIT_S):
    outputs = [part for option, name in OUTPUTS.items() for part in (option, str(Path(out) / name))]
    return [*locust_command(config), "--master", "--master-bind-port", str(bind_port),
            "--expect-workers", str(expect_workers), "--expect-workers-max-wait", str(wait_s), *outputs, *OUTPUT_FLAGS]


def worker_command(config, master_host, master_port):
    return [*locust_command(config), "--worker", "--master-host", master_host, "--master-port", str(master_port)]


def wait_for_master(host, port, wait_s, connect=socket.create_connection, now=time.monotonic, sleep=time.sleep):
    """True once the master's port accepts a TCP connection, False if it has not within wait_s seconds.
    (Locust's own worker gives up after 60 tries of 5 s, and a master still installing may need longer.)"""
    deadline = now() + wait_s
    while True:
        try:
            connect((host, port), timeout=PROBE_EVERY_S).close()
            return True
        except OSError:
            if now() >= deadline:
                return False
            sleep(PROBE_EVERY_S)


def environment():
    """The suite imports the kit's `visitkit` for ID tokens: shipped beside locust/ on a VM."""
    env = dict(os.environ)
    if (HERE.parent / "visitkit").is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    return env


def run(commands):
    """Runs the commands side by side until all end; SIGTERM/SIGINT reach every one of them.
    Returns the first non-zero exit code, or 0."""
    children = [subprocess.Popen(command, env=environment()) for command in commands]

    def forward(signum, _frame):
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [child.wait() for child in children]
    return next((code for code in codes if code), 0)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    master = roles.add_parser("master", help="the master: waits for the workers, runs the test, writes the files")
    master.add_argument("--config", required=True, help="the run's Locust configuration file")
    master.add_argument("--out", required=True, help="folder for the run's files")
    master.add_argument("--bind-port", type=int, required=True)
    master.add_argument("--expect-workers", type=int, required=True)
    master.add_argument("--wait-workers", type=int, default=DEFAULT_WAIT_S, help="seconds to wait for them")
    worker = roles.add_parser("worker", help="this machine's worker processes")
    worker.add_argument("--config", required=True, help="the run's Locust configuration file")
    worker.add_argument("--master-host", required=True)
    worker.add_argument("--master-port", type=int, required=True)
    worker.add_argument("--processes", type=int, default=1, help="one per core")
    worker.add_argument("--master-wait", type=float, default=None, metavar="S",
                        help=f"seconds to wait for the master's port first; none answering: exit {NO_MASTER}")
    args = parser.parse_args(argv)
    if getattr(args, "expect_workers", 1) < 1 or getattr(args, "processes", 1) < 1:
        parser.error("--expect-workers and --processes must be 1 or more")
    if (getattr(args, "master_wait", None) or 0) < 0:
        parser.error("--master-wait must be 0 or more seconds")
    return args


def main(argv=None):
    args = parse(argv)
    if args.role == "master":
        Path(args.out).mkdir(parents=True, exist_ok=True)
        return run([master_command(args.config, args.out, args.bind_port, args.expect_workers, args.wait_workers)])
    if args.master_wait is not None and not wait_for_master(args.master_host, args.master_port, args.master_wait):
        print(f"node.py: no master answered on {args.master_host}:{args.master_port} within {args.master_wait:g} s",
              file=sys.stderr)
        return NO_MASTER
    return run([worker_command(args.config, args.master_host, args.master_port)] * args.processes)


if __name__ == "__main__":
    sys.exit(main())
