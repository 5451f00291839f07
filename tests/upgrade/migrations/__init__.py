"""The migration set 001–004 on real PostgreSQL, one file per topic.

Every database here is a scratch database on the test server (`tests/conftest.py`). Seeds are
hand-built rows in each revision's released shape (docs/schema-history.md),
inserted with plain SQL, never through the runtime, so the migrations meet data the way a
user's database holds it (`seeds.py`).
"""
