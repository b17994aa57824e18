"""The SPANK chroot plugin: C sources, and their cffi build (plugin .so + Python binding for tests)."""
