"""queueguard's tests, one subpackage per package of src/queueguard (packages, so that test
modules of the same name in different folders import; `tests/conftest.py` reaches them all)."""
