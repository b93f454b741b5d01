"""Where a function's CPU goes: py-spy's collapsed stacks put down to our code, the server and
Google's client libraries, a standard-library frame counting for its caller."""
from visitkit.benchmarks import profiling
from visitkit.benchmarks.profiling import FRAMEWORK, GOOGLE, INTERPRETER, OURS

OWN = profiling.FUNCTIONS_DIR
LIBS = profiling.SITE_PACKAGES
STDLIB = profiling.STDLIB


def stack(*files, count):
    frames = ";".join(f"f{i} ({file}:{i + 1})" for i, file in enumerate(files))
    return f'process 7:"python -m functions_framework --target x";thread (0x7f);{frames} {count}'


RAW = "\n".join([
    # json.dumps called from our code: ours
    stack(f"{STDLIB}/threading.py", f"{LIBS}/gunicorn/workers/gthread.py", f"{OWN}/common.py",
          f"{STDLIB}/json/encoder.py", count=5),
    # a gRPC call made from our code: the library's
    stack(f"{LIBS}/functions_framework/__init__.py", f"{OWN}/inc_counter.py", f"{LIBS}/grpc/_channel.py",
          f"{STDLIB}/threading.py", count=30),
    stack(f"{LIBS}/gunicorn/workers/gthread.py", f"{LIBS}/gunicorn/util.py", f"{STDLIB}/socket.py", count=40),
    # no frame outside the standard library: a pool thread between requests
    stack(f"{STDLIB}/threading.py", f"{STDLIB}/concurrent/futures/thread.py", count=25),
])


def test_a_frames_origin_is_its_file_and_the_standard_library_has_none():
    assert profiling.origin_of(f"{OWN}/store_inc_counter.py") == OURS
    assert profiling.origin_of(f"{LIBS}/werkzeug/wrappers/response.py") == FRAMEWORK
    assert profiling.origin_of(f"{LIBS}/google/cloud/firestore_v1/batch.py") == GOOGLE
    assert profiling.origin_of(f"{LIBS}/cryptography/x509/base.py") == GOOGLE  # a client library's dependency
    assert profiling.origin_of(f"{STDLIB}/json/encoder.py") is None


def test_each_sample_counts_for_its_innermost_frame_outside_the_standard_library():
    assert profiling.breakdown(RAW) == {OURS: 0.05, FRAMEWORK: 0.4, GOOGLE: 0.3, INTERPRETER: 0.25}
    assert profiling.breakdown("") == {}


def test_a_process_whose_command_holds_a_newline_is_one_sample():
    raw = 'process 9:"python -c \nimport x";thread (0x1);' + f"g ({OWN}/visits.py:3) 7\n" + RAW
    found = list(profiling.samples(raw))
    assert found[0] == ([f"{OWN}/visits.py"], 7) and len(found) == 5


def test_the_files_with_the_most_samples_name_their_origin():
    assert profiling.top_files(RAW, most=3) == [(FRAMEWORK, "gunicorn/util.py", 0.4), (GOOGLE, "grpc/_channel.py", 0.3),
                                                (OURS, "common.py", 0.05)]
    assert profiling.summarize(RAW)["samples"] == 100


def test_py_spy_watches_the_process_and_its_children_without_pausing_them():
    command = profiling.record_command(123, 30, "out.txt")
    assert command[0].endswith("py-spy") and command[1:4] == ["record", "--pid", "123"]
    assert {"--subprocesses", "--nonblocking", "--full-filenames"} <= set(command)
    assert command[command.index("--duration") + 1] == "30" and command[command.index("--format") + 1] == "raw"


def test_a_profile_keeps_no_machine_path():
    import sysconfig
    import tempfile

    from visitkit.paths import ROOT

    stdlib = sysconfig.get_paths()["stdlib"]
    temporary = tempfile.gettempdir()
    raw = (f'process 7:"{ROOT}/.venv/bin/python -m functions_framework --source {ROOT}/functions/main.py '
           f'--restarts {temporary}/bench-hot-path-x1/restarts.jsonl";'
           f"a ({stdlib}/threading.py:1);b ({ROOT}/.venv/lib/python3.11/site-packages/grpc/_channel.py:2);"
           f"c ({ROOT}/functions/common.py:3) 4")
    assert profiling.portable(raw) == ('process 7:".venv/bin/python -m functions_framework --source functions/main.py '
                                       '--restarts tmp/bench-hot-path-x1/restarts.jsonl";'
                                       "a (stdlib/threading.py:1);b (site-packages/grpc/_channel.py:2);"
                                       "c (functions/common.py:3) 4")
    assert str(ROOT) not in profiling.portable(raw)
