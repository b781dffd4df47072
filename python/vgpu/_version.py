"""The package version, read by the build (scikit-build-core) and by `vgpu.__version__`."""
__version__ = "0.1.0"
