"""Where a function's CPU goes, from py-spy's samples of its process under load: each sample is put
down to the origin of its innermost frame outside the standard library (our code in functions/; the
server every function runs in: functions-framework, Flask, gunicorn; Google's client libraries and
their dependencies), so json.dumps called from common.py is ours; a sample with no such frame (a
thread of gunicorn's pool between requests) is the interpreter's.

py-spy samples only the thread holding the GIL (`--gil`): a thread waiting for a lock, a socket or a
gRPC answer is idle, and its stack would otherwise count as work. So the shares are of Python's own
CPU; the CPU spent outside it (system calls with the GIL released, gRPC's native threads) is not
in the samples, and the figures derived from the shares put it down to each origin in proportion.
"""
import re
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from visitkit.paths import ROOT

FUNCTIONS_DIR = "functions"  # files as portable() writes them: relative to the checkout,
SITE_PACKAGES = "site-packages"  # to the installed packages,
STDLIB = "stdlib"  # or to the standard library
TMP = "tmp"  # a temporary folder named in a process's command
OURS, FRAMEWORK, GOOGLE, INTERPRETER = (
    "our code", "functions-framework, Flask, gunicorn", "Google client libraries", "interpreter")
ORIGINS = (OURS, FRAMEWORK, GOOGLE, INTERPRETER)
# Top-level packages in site-packages that are the server every function runs in (the no-op's
# too); any other package there is a Google client library or one of their dependencies (gRPC,
# protobuf, google-auth's cryptography), as the functions import nothing else.
FRAMEWORK_PACKAGES = {"functions_framework", "flask", "werkzeug", "gunicorn", "cloudevents", "click", "jinja2",
                      "itsdangerous", "markupsafe", "blinker", "watchdog", "deprecation", "packaging",
                      "sitecustomize", "org"}  # the last two: the interpreter's site hook, a probe of `platform`
FRAME = re.compile(r"^.* \((?P<file>[^()]*):\d+\)$")
SAMPLE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$", re.S)


def record_command(pid: int, seconds: float, output: str | Path, rate: int = 200) -> list[str]:
    """py-spy watching a process and its children for `seconds`, without pausing them, writing the
    collapsed stacks (one line per distinct stack and its sample count) to `output`."""
    return [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid), "--subprocesses",
            "--nonblocking", "--gil", "--full-filenames", "--rate", str(rate), "--duration", str(seconds),
            "--format", "raw", "--output", str(output)]


def start(pid: int, seconds: float, output: str | Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(record_command(pid, seconds, output), stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)


def summarize(raw: str) -> dict[str, Any]:
    """What a record keeps of a profile: each origin's share, and the files most samples were in."""
    return {"samples": sum(count for _, count in samples(raw)), "shares": breakdown(raw),
            "top_files": top_files(raw)}


def portable(raw: str) -> str:
    """py-spy's output with this machine's paths taken out: the checkout's files relative to it, the
    installed packages' relative to site-packages/, the standard library's to stdlib/, and the
    temporary folders in the processes' commands to tmp/."""
    raw = re.sub(r"[^\s;(\"]*/site-packages/", SITE_PACKAGES + "/", raw)
    raw = raw.replace(sysconfig.get_paths()["stdlib"] + "/", STDLIB + "/").replace(str(ROOT) + "/", "")
    return raw.replace(tempfile.gettempdir().rstrip("/") + "/", TMP + "/")


def origin_of(path: str) -> str | None:
    """A frame's origin by its file (as portable() writes it), or None for the standard library (its
    caller decides)."""
    if path.startswith(FUNCTIONS_DIR + "/"):
        return OURS
    if not path.startswith(SITE_PACKAGES + "/"):
        return None
    top = path.split("/")[1].removesuffix(".py")
    return FRAMEWORK if top in FRAMEWORK_PACKAGES else GOOGLE


def samples(raw: str) -> Iterator[tuple[list[str], int]]:
    """(frames' files root first, count) of each line of py-spy's raw output; a line may hold a
    newline inside a process's command, so lines are joined until one ends with its count."""
    pending = ""
    for line in raw.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        match = SAMPLE.match(pending)
        if match:
            files = [frame.group("file") for frame in map(FRAME.match, match.group("stack").split(";")) if frame]
            yield files, int(match.group("count"))
            pending = ""


def attributed(files: list[str]) -> tuple[str, str | None]:
    """(origin, file) a sample is put down to: its innermost frame outside the standard library."""
    for file in reversed(files):
        origin = origin_of(file)
        if origin:
            return origin, file.removeprefix(FUNCTIONS_DIR + "/").removeprefix(SITE_PACKAGES + "/")
    return INTERPRETER, None


def breakdown(raw: str) -> dict[str, float]:
    """{origin: share of the samples} (shares sum to 1; empty when there were no samples)."""
    counts = dict.fromkeys(ORIGINS, 0)
    for files, count in samples(raw):
        counts[attributed(files)[0]] += count
    total = sum(counts.values())
    return {origin: round(count / total, 3) for origin, count in counts.items()} if total else {}


def top_files(raw: str, most: int = 6) -> list[tuple[str, str, float]]:
    """The files most samples were put down to: [(origin, file, share of all samples)]."""
    counts: dict[tuple[str, str | None], int] = {}
    total = 0
    for files, count in samples(raw):
        total += count
        key = attributed(files)
        counts[key] = counts.get(key, 0) + count
    ranked = sorted((((origin, file), n) for (origin, file), n in counts.items() if file), key=lambda kv: -kv[1])[:most]
    return [(origin, file, round(count / total, 3)) for (origin, file), count in ranked]
