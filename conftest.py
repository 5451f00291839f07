"""Settings shared by every test directory."""

from hypothesis import HealthCheck, settings

# Example counts stay as each test sets them; generation speed is not what these tests judge,
# and a loaded 2-core CI machine must not turn a slow draw into a failure.
settings.register_profile("queueguard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("queueguard")
