"""Every public function of the kit says its types: its parameters and what it returns. mypy (make lint)
then checks them; this test holds that none is left out. Public: not named with a leading underscore,
at a module's top level or in a public class (methods included, __init__ too, whose return may go unsaid)."""
import ast
from pathlib import Path

KIT = Path(__file__).resolve().parents[2] / "scripts" / "visitkit"
SELF = ("self", "cls")


def untyped(path):
    """The public functions of one module that leave a parameter or the return untyped, as 'name(missing)'."""
    found = []

    def visit(body, prefix=""):
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("_") and node.name != "__init__":
                    continue
                arguments = node.args
                every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                         *filter(None, (arguments.vararg, arguments.kwarg))]
                missing = [a.arg for a in every if a.annotation is None and a.arg not in SELF]
                if node.returns is None and node.name != "__init__":
                    missing.append("return")
                if missing:
                    found.append(f"{prefix}{node.name}({', '.join(missing)})")

    visit(ast.parse(path.read_text()).body)
    return found


def test_untyped_finds_a_missing_parameter_or_return(tmp_path):
    source = ("def typed(a: int) -> int: ...\n"
              "def loose(a, b: int): ...\n"
              "def _private(a): ...\n"
              "class Public:\n    def __init__(self, x): ...\n    def m(self) -> None: ...\n"
              "class _Hidden:\n    def m(self, y): ...\n")
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert untyped(path) == ["loose(a, return)", "Public.__init__(x)"]


def test_every_public_function_of_the_kit_is_typed():
    missing = {str(path.relative_to(KIT)): names for path in sorted(KIT.rglob("*.py")) if (names := untyped(path))}
    assert not missing, f"{sum(map(len, missing.values()))} public functions leave types out: {missing}"
