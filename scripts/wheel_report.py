"""Lists what a tensorflow-vgpu wheel's native code needs from outside the wheel: for each ELF
file, its NEEDED libraries (and who provides each: the TensorFlow wheel, the oneDNN wheel, or
the system's C/C++ runtime), its RUNPATH, and the newest glibc / libstdc++ symbol versions it
uses; then `auditwheel show` when auditwheel is installed. Exits non-zero if a RUNPATH names a
folder of the build machine (anything not relative to $ORIGIN) or a library has no known
provider. Used by scripts/build_wheel.sh and tests/python/test_wheel.py.

    python scripts/wheel_report.py dist/tensorflow_vgpu-*.whl
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

# Who provides each library the wheel's code may need.
PROVIDERS = {
    "libtensorflow_framework.so.2": "tensorflow-cpu wheel",
    "libdnnl.so.3": "onednn-cpu-gomp wheel",
    "libgomp.so.1": "system (GNU OpenMP runtime; oneDNN's libdnnl needs it too)",
}
SYSTEM_RUNTIME = re.compile(
    r"^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so\.\d+$")


def _readelf(*args: str) -> str:
    return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True,
                          timeout=120).stdout


def _newest(versions: list[str], prefix: str) -> str:
    numbers = [tuple(int(p) for p in v[len(prefix):].split(".")) for v in versions
               if v.startswith(prefix) and re.fullmatch(r"[\d.]+", v[len(prefix):])]
    return prefix + ".".join(map(str, max(numbers))) if numbers else "-"


def analyse(wheel: str) -> list[dict]:
    """One entry per ELF file of the wheel: name, size, needed, runpath, glibc, glibcxx."""
    entries = []
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory() as scratch:
        for info in archive.infolist():
            with archive.open(info) as member:
                if member.read(4) != b"\x7fELF":
                    continue
            path = archive.extract(info, scratch)
            dynamic = _readelf("-d", path)
            versions = re.findall(r"Name: (GLIBC_[\d.]+|GLIBCXX_[\d.]+)", _readelf("-V", path))
            runpath = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library \w+: \[([^\]]*)\]", dynamic)
            entries.append({
                "name": info.filename,
                "size": info.file_size,
                "needed": re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic),
                "runpath": runpath.group(1).split(":") if runpath else [],
                "glibc": _newest(versions, "GLIBC_"),
                "glibcxx": _newest(versions, "GLIBCXX_"),
            })
    return entries


def provider(library: str) -> str | None:
    if library in PROVIDERS:
        return PROVIDERS[library]
    if SYSTEM_RUNTIME.match(library):
        return "system (C/C++ runtime)"
    return None


def problems(entries: list[dict]) -> list[str]:
    """What would tie the wheel to the build machine or leave a library unresolved."""
    found = []
    for entry in entries:
        for folder in entry["runpath"]:
            if not folder.startswith("$ORIGIN"):
                found.append(f"{entry['name']}: RUNPATH entry '{folder}' is not relative to $ORIGIN")
        for library in entry["needed"]:
            if provider(library) is None:
                found.append(f"{entry['name']}: needs {library}, which nothing provides")
    return found


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    wheel = sys.argv[1]
    entries = analyse(wheel)
    print(f"{os.path.basename(wheel)}: {os.path.getsize(wheel) / 2**20:.1f} MiB compressed, "
          f"{sum(e['size'] for e in entries) / 2**20:.1f} MiB of native code")
    external: dict[str, str] = {}
    for entry in entries:
        print(f"  {entry['name']} ({entry['size'] / 2**20:.1f} MiB; newest symbols "
              f"{entry['glibc']}, {entry['glibcxx']})")
        print(f"    RUNPATH {':'.join(entry['runpath']) or '-'}")
        print(f"    NEEDED  {', '.join(entry['needed'])}")
        for library in entry["needed"]:
            external[library] = provider(library) or "NOTHING"
    print("external dependencies:")
    for library in sorted(external):
        print(f"  {library:32} {external[library]}")
    auditwheel = shutil.which("auditwheel", path=os.path.dirname(sys.executable))
    if auditwheel:
        shown = subprocess.run([auditwheel, "show", wheel], capture_output=True, text=True,
                               timeout=300)
        print("auditwheel show:\n  " + (shown.stdout + shown.stderr).strip().replace("\n", "\n  "))
    found = problems(entries)
    for problem in found:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
