"""The functions' dependencies: functions/requirements.txt, generated from requirements.in, pins every
package Cloud Functions installs, with its hashes, and the interpreter running these tests (the one the
local stack runs the functions with) has exactly those versions installed."""
import importlib.metadata
import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from visitkit.paths import FUNCTIONS_DIR, INFRA_DIR, ROOT

REQUIREMENTS_TXT = FUNCTIONS_DIR / "requirements.txt"
REQUIREMENTS_IN = FUNCTIONS_DIR / "requirements.in"
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
# What Cloud Functions runs (infra/functions.tf: runtime python312, on Linux x86_64), for the markers of the
# pinned packages' own requirements.
DEPLOY_TARGET = {
    "python_version": "3.12", "python_full_version": "3.12.0", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "os_name": "posix", "sys_platform": "linux",
    "platform_system": "Linux", "platform_machine": "x86_64",
}


def logical_lines(text):
    """A requirements file's entries: continuation lines joined, comments and blank lines dropped."""
    for line in text.replace("\\\n", " ").splitlines():
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        if line:
            yield line


def parse_pins(text):
    """{canonical name: version} of a fully pinned, hashed requirements file; AssertionError naming
    the first entry that is anything else (a range, an option, an include, a pin without a hash)."""
    pins = {}
    for line in logical_lines(text):
        first, *rest = line.split()
        pin = PIN.fullmatch(first)
        assert pin, f"not a name==version pin: {line!r}"
        assert rest and all(HASH.fullmatch(option) for option in rest), f"a pin without sha256 hashes only: {line!r}"
        name = canonicalize_name(pin[1])
        assert name not in pins, f"{name} is pinned twice"
        pins[name] = pin[2]
    return pins


def pins_of(path):
    return parse_pins(path.read_text())


def not_installed_as_pinned(pins):
    """The pins the running interpreter does not have: {name: (pinned, installed or None)}."""
    wrong = {}
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (version, installed)
    return wrong


def unpinned_dependencies(pins):
    """The requirements of the pinned packages (with the extras they ask of each other, for the deploy
    target) that are not pinned, or pinned outside what asks for them: [(package, requirement)]."""
    missing = []
    todo = [(name, frozenset()) for name in pins]
    seen = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for text in importlib.metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            if requirement.marker and not any(requirement.marker.evaluate({**DEPLOY_TARGET, "extra": extra})
                                              for extra in extras | {""}):
                continue
            dependency = canonicalize_name(requirement.name)
            if dependency not in pins or not requirement.specifier.contains(pins[dependency], prereleases=True):
                missing.append((name, text))
            else:
                todo.append((dependency, frozenset(requirement.extras)))
    return missing


def test_every_entry_is_an_exact_pin_with_its_hashes():
    pins = pins_of(REQUIREMENTS_TXT)
    assert {"functions-framework", "google-cloud-firestore", "google-cloud-pubsub", "grpcio", "protobuf",
            "gunicorn"} <= set(pins)


def test_a_range_an_unhashed_pin_or_an_include_is_refused():
    good = "flask==3.1.3 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via functions-framework\n"
    assert parse_pins(good) == {"flask": "3.1.3"}
    for bad in ("flask>=3.1\n", "flask==3.1.3\n", "flask==3.1.3 --hash=md5:abc\n", "-r other.txt\n",
                good + good):
        try:
            parse_pins(bad)
        except AssertionError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_the_local_stack_runs_exactly_the_deployed_versions():
    """The local stack runs the functions with this interpreter (sys.executable): it must have every
    package Cloud Functions installs, at the version it installs. `make setup` installs them so."""
    wrong = not_installed_as_pinned(pins_of(REQUIREMENTS_TXT))
    assert not wrong, ("installed here other than functions/requirements.txt pins ({name: (pinned, installed)};"
                       f" `make setup` installs the pinned set): {wrong}")


def test_a_version_other_than_the_pinned_one_is_caught():
    installed = importlib.metadata.version("grpcio")
    assert not_installed_as_pinned({"grpcio": installed}) == {}
    assert not_installed_as_pinned({"grpcio": installed + ".1"}) == {"grpcio": (installed + ".1", installed)}
    assert not_installed_as_pinned({"no-such-package-here": "1.0"}) == {"no-such-package-here": ("1.0", None)}


def test_the_pins_close_over_every_dependency_on_the_deploy_target():
    """In hash-checking mode pip refuses to install anything not pinned: every requirement of a pinned
    package on Python 3.12 / Linux is itself pinned, at a version that satisfies it."""
    pins = pins_of(REQUIREMENTS_TXT)
    assert unpinned_dependencies(pins) == []
    del pins["grpcio"]
    assert unpinned_dependencies(pins), "a dropped dependency went unnoticed"


def test_each_direct_requirement_is_pinned_at_a_version_it_allows():
    pins = pins_of(REQUIREMENTS_TXT)
    direct = [Requirement(line) for line in logical_lines(REQUIREMENTS_IN.read_text())]
    assert {canonicalize_name(r.name) for r in direct} == {
        "functions-framework", "google-cloud-firestore", "google-cloud-pubsub"}
    for requirement in direct:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is in requirements.in but not pinned in requirements.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.txt pins {name}=={pins[name]}, outside requirements.in's {requirement.specifier}")


def test_the_kits_own_pins_agree_with_the_functions():
    """requirements-dev.txt and requirements-cloud.txt are installed with the functions' pins as
    constraints: a shared package pinned differently would fail `make setup`. Neither includes the
    hashed file (pip would then demand hashes for every unhashed pin)."""
    functions = pins_of(REQUIREMENTS_TXT)
    for path in (ROOT / "requirements-dev.txt", ROOT / "requirements-cloud.txt"):
        for line in logical_lines(path.read_text()):
            if line.startswith("-"):
                assert "functions/requirements" not in line, f"{path.name} includes the functions' pins: {line}"
                continue
            pin = PIN.fullmatch(line)
            assert pin, f"{path.name}: not a name==version pin: {line!r}"
            name = canonicalize_name(pin[1])
            assert functions.get(name, pin[2]) == pin[2], (
                f"{path.name} pins {name}=={pin[2]}, functions/requirements.txt {functions[name]}")


def archive_excludes():
    """The source_dir and excludes of the zip Terraform deploys (infra/build.tf's archive_file)."""
    block = re.search(r'data\s+"archive_file"\s+"functions"\s*\{(.*?)\n\}', (INFRA_DIR / "build.tf").read_text(), re.S)
    assert block, 'infra/build.tf has no data "archive_file" "functions"'
    source = re.search(r'source_dir\s*=\s*"([^"]*)"', block[1])
    excludes = re.search(r"excludes\s*=\s*\[([^\]]*)\]", block[1])
    return source and source[1], re.findall(r'"([^"]*)"', excludes[1]) if excludes else []


def excluded(path, patterns):
    """Whether a path in the archive matches an exclude pattern (`*` within a folder, `**/` any folders)."""
    for pattern in patterns:
        regex = "".join("(?:.*/)?" if part == "**/" else "[^/]*" if part == "*" else re.escape(part)
                        for part in re.split(r"(\*\*/|\*)", pattern))
        if re.fullmatch(regex, path):
            return True
    return False


def test_the_deployed_archive_carries_the_pins_at_its_root():
    """Cloud Functions' build installs the requirements.txt at the zip's root. requirements.in ships too
    (harmless: the build reads only requirements.txt, and it says where the pins come from)."""
    source, excludes = archive_excludes()
    assert source == "${path.module}/../functions"
    assert not excluded("requirements.txt", excludes)
    assert excluded("requirements.txt", excludes + ["*.txt"]) and excluded("a/__pycache__", ["**/__pycache__"])
