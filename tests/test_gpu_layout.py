"""The sub-packages of fuseflow.gpu import only those before them (docs/architecture.md), and
`python -m fuseflow.cmdline.gpu` needs no other part of fuseflow than gpu/ and the bottom layers."""
import ast
import subprocess
import sys
from pathlib import Path

GPU = Path(__file__).resolve().parents[1] / "src" / "fuseflow" / "gpu"
ORDER = ["problem", "planning", "kernels", "emulation", "measuring", "readout"]
OUTSIDE_GPU = ("fuseflow.errors", "fuseflow.files", "fuseflow.memory", "fuseflow.cmdline", "fuseflow.cmdline.gpu")


def _gpu_imports(path: Path) -> set[str]:
    """The gpu sub-packages a module of gpu/<sub>/ imports (relative or absolute)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.level == 2 or node.module.startswith("fuseflow.gpu."):
                found.add(node.module.removeprefix("fuseflow.gpu.").split(".")[0])
            elif node.level == 1:
                found.add(path.parent.name)
    return found


def test_every_sub_package_is_in_the_order():
    assert sorted(p.name for p in GPU.iterdir() if (p / "__init__.py").is_file()) == sorted(ORDER)


def test_sub_packages_import_only_those_before_them():
    upward = [f"{path.relative_to(GPU)} imports {target}" for path in GPU.glob("*/*.py")
              for target in _gpu_imports(path) if ORDER.index(target) > ORDER.index(path.parent.name)]
    assert not upward, "\n".join(upward)


def test_the_gpu_commands_load_no_other_part_of_fuseflow():
    code = ("import sys\nimport fuseflow.cmdline.gpu\n"
            "print(sorted(m for m in sys.modules if m.startswith('fuseflow.') and not m.startswith('fuseflow.gpu.')"
            f" and m != 'fuseflow.gpu' and m not in {OUTSIDE_GPU!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
