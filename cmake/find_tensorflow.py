"""Prints the installed TensorFlow's package folder and version, without importing TensorFlow.

Used by cmake/TensorFlow.cmake at configure time (importing TensorFlow would also load any
plugin already installed in tensorflow-plugins/, which may be stale)."""
import importlib.metadata
import importlib.util

spec = importlib.util.find_spec("tensorflow")
if spec is None or not spec.submodule_search_locations:
    raise SystemExit("tensorflow is not installed")
version = ""
for dist in ("tensorflow-cpu", "tensorflow"):
    try:
        version = importlib.metadata.version(dist)
        break
    except importlib.metadata.PackageNotFoundError:
        pass
print(spec.submodule_search_locations[0])
print(version)
