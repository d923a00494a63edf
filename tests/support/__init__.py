"""Helpers the tests share: in-process runs of Lambda code, private copies of the deployed
tables, notebook cells, the suite's stack timeouts. Imported as ``support.<module>`` (pytest
puts tests/ on the path, beside the root conftest.py)."""
