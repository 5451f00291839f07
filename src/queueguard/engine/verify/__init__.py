"""`verify --migrations DIR`: `checks` (the chain, the rerun, the fresh install, the fixtures
and invariants), `chain` (every revision applied from empty), `data` (fixtures loaded and
read), `report` (the pure half: the report and its renderings)."""
